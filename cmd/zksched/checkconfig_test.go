package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkConfigBundle writes a config and the files it names into a folder of their own.
type checkConfigBundle struct{ dir string }

func setupCheckConfig(t *testing.T) checkConfigBundle {
	t.Helper()
	return checkConfigBundle{dir: t.TempDir()}
}

// write writes name in the bundle's folder with mode and returns its path.
func (b checkConfigBundle) write(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(b.dir, name)
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// goodConfig is a config both roles accept, naming a ZooKeeper and a PostgreSQL nobody
// listens on: --check-config must not try to reach them.
func (b checkConfigBundle) goodConfig(t *testing.T) string {
	auth := b.write(t, "zk-auth", "zksched:s3cret-pass\n", 0o600)
	return `registry:
  servers: ["127.0.0.1:1"]
  auth-file: ` + auth + `
db:
  dsn: postgres://zksched@127.0.0.1:1/zksched?sslmode=disable
node:
  host: 127.0.0.1
api:
  token: a-token-of-at-least-16-characters
worker:
  allow-root-tasks: true
  groups: [default, gpu]
`
}

func checkConfigRun(t *testing.T, role, config string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run([]string{role, "--check-config", "--config", config}, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCheckConfigGood(t *testing.T) {
	t.Parallel()
	b := setupCheckConfig(t)
	config := b.write(t, "zksched.yaml", b.goodConfig(t), 0o644)
	for _, role := range []string{"master", "worker"} {
		code, stdout, stderr := checkConfigRun(t, role, config)
		if code != exitOK || stdout != "config ok\n" || stderr != "" {
			t.Errorf("%s --check-config: exit %d, stdout %q, stderr %q; want 0, \"config ok\\n\", nothing", role, code, stdout, stderr)
		}
	}
}

func TestCheckConfigBad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, role string
		// edit changes the good config; it may write files with b.
		edit func(t *testing.T, b checkConfigBundle, good string) string
		// want are what stderr must say.
		want []string
	}{
		{"unknown key", "master", func(t *testing.T, b checkConfigBundle, good string) string {
			return good + "  shutdown-timout: 10s\n"
		}, []string{"shutdown-timout"}},
		{"bad duration", "worker", func(t *testing.T, b checkConfigBundle, good string) string {
			return strings.Replace(good, "worker:\n", "worker:\n  shutdown-timeout: soon\n", 1)
		}, []string{"worker.shutdown-timeout"}},
		{"missing auth file", "worker", func(t *testing.T, b checkConfigBundle, good string) string {
			return strings.Replace(good, "zk-auth", "no-such-zk-auth", 1)
		}, []string{"registry auth file", "no such file"}},
		{"malformed auth file", "master", func(t *testing.T, b checkConfigBundle, good string) string {
			b.write(t, "zk-auth-bad", "only-a-user\n", 0o600)
			return strings.Replace(good, "zk-auth", "zk-auth-bad", 1)
		}, []string{"want user:password"}},
		{"token file others may read", "master", func(t *testing.T, b checkConfigBundle, good string) string {
			path := b.write(t, "api-token", "a-token-of-at-least-16-characters\n", 0o644)
			return strings.Replace(good, "  token: a-token-of-at-least-16-characters", "  token-file: "+path, 1)
		}, []string{"api.token-file", "mode 0644"}},
		{"unusable task user", "worker", func(t *testing.T, b checkConfigBundle, good string) string {
			return strings.Replace(good, "  allow-root-tasks: true", "  task-user: no-such-user-zksched", 1)
		}, []string{"worker.task-user"}},
		{"missing tracing CA", "worker", func(t *testing.T, b checkConfigBundle, good string) string {
			return good + "tracing:\n  enabled: true\n  ca-file: " + filepath.Join(b.dir, "no-ca.pem") + "\n"
		}, []string{"tracing.ca-file"}},
		{"two problems at once", "master", func(t *testing.T, b checkConfigBundle, good string) string {
			path := b.write(t, "api-token", "a-token-of-at-least-16-characters\n", 0o640)
			good = strings.Replace(good, "  token: a-token-of-at-least-16-characters", "  token-file: "+path, 1)
			return good + "tracing:\n  enabled: true\n  ca-file: " + filepath.Join(b.dir, "no-ca.pem") + "\n"
		}, []string{"api.token-file", "mode 0640", "tracing.ca-file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupCheckConfig(t)
			config := b.write(t, "zksched.yaml", tc.edit(t, b, b.goodConfig(t)), 0o644)
			code, stdout, stderr := checkConfigRun(t, tc.role, config)
			if code != exitUsage || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing (stderr %q)", code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
		})
	}
}
