package release

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

// chrootTarball returns a Debian bookworm minbase root file system as a tarball made with
// mmdebstrap, cached in the repository's .run folder: a cold build downloads about 100
// packages, later runs only unpack it.
func chrootTarball(t *testing.T) string {
	t.Helper()
	tarball := filepath.Join(testenv.RepoRoot(), ".run", "debian-bookworm-minbase.tar")
	if _, err := os.Stat(tarball); err == nil {
		return tarball
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		t.Fatal("the .deb test needs mmdebstrap (apt-get install mmdebstrap): it makes a Debian root file system to install the package into")
	}
	if err := os.MkdirAll(filepath.Dir(tarball), 0o755); err != nil {
		t.Fatal(err)
	}
	// mmdebstrap reads the format from the target's name unless told: this one ends in .tmp.
	tmp := tarball + fmt.Sprintf(".%d.tmp", os.Getpid())
	if out, err := exec.Command("mmdebstrap", "--variant=minbase", "--format=tar", "--quiet", "bookworm", tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, tarball); err != nil {
		t.Fatal(err)
	}
	return tarball
}

// chroot runs a command in the root file system at root, as root, with its own /proc mounted
// in a mount namespace of its own, so that nothing stays mounted when it ends.
func chroot(root string, args ...string) *exec.Cmd {
	script := `mount -t proc proc "$0/proc" && exec chroot "$0" "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", script, root}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	return cmd
}

func mustChroot(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := chroot(root, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// unit is what the test takes from a packaged systemd unit: how systemd would start it.
type unit struct {
	User, Group, WorkingDirectory string
	Environment                   []string
	EnvironmentFiles              []string
	ExecStart                     []string
}

// parseUnit reads the [Service] section of a unit file: the keys the test needs, as systemd
// reads them (no quoting is used in zksched's units; a leading - on an EnvironmentFile makes
// it optional).
func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var u unit
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			section = line
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section != "[Service]" {
			continue
		}
		switch key {
		case "User":
			u.User = value
		case "Group":
			u.Group = value
		case "WorkingDirectory":
			u.WorkingDirectory = value
		case "Environment":
			u.Environment = append(u.Environment, strings.Fields(value)...)
		case "EnvironmentFile":
			u.EnvironmentFiles = append(u.EnvironmentFiles, value)
		case "ExecStart":
			u.ExecStart = strings.Fields(value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if u.User == "" || len(u.ExecStart) == 0 {
		t.Fatalf("%s: no User or ExecStart: %+v", path, u)
	}
	return u
}

// command returns args (default: the unit's ExecStart) run as systemd would run the unit in
// the root file system at root: as its user and group, in its working directory, with the
// environment systemd gives a service of that user plus the unit's Environment= and then its
// EnvironmentFile= variables (the latter win, as in systemd).
func (u unit) command(t *testing.T, root string, args ...string) *exec.Cmd {
	t.Helper()
	if len(args) == 0 {
		args = u.ExecStart
	}
	group := u.Group
	if group == "" {
		group = u.User
	}
	home := strings.TrimSpace(mustChroot(t, root, "sh", "-c", `getent passwd "$0" | cut -d: -f6`, u.User))
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "LANG=C.UTF-8",
		"HOME=" + home, "USER=" + u.User, "LOGNAME=" + u.User, "SHELL=/usr/sbin/nologin"}
	env = append(env, u.Environment...)
	for _, file := range u.EnvironmentFiles {
		optional := strings.HasPrefix(file, "-")
		data, err := os.ReadFile(filepath.Join(root, strings.TrimPrefix(file, "-")))
		if err != nil {
			if optional && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
				env = append(env, line)
			}
		}
	}
	wd := u.WorkingDirectory
	if wd == "" {
		wd = "/"
	}
	inner := []string{"env", "-i"}
	inner = append(inner, env...)
	inner = append(inner, "sh", "-c", `cd "$0" && u="$1" g="$2" && shift 2 && exec setpriv --reuid="$u" --regid="$g" --init-groups -- "$@"`,
		wd, u.User, group)
	inner = append(inner, args...)
	return chroot(root, inner...)
}

// tree lists every path under root, relative to it.
func tree(t *testing.T, root string) map[string]bool {
	t.Helper()
	paths := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "proc" {
			return filepath.SkipDir
		}
		paths[rel] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// TestDebInstallRunPurge builds the .deb for amd64 with bin/release.sh, installs it with dpkg
// into a fresh Debian root file system, runs `zksched version`, starts a master and a worker
// as their packaged units would (ExecStart, User, Environment and EnvironmentFile read from
// the unit files), configured through /etc/zksched/zksched.env against the test's own
// ZooKeeper root and PostgreSQL schema, runs examples/demo.yaml to success, and purges the
// package: every path it or its scripts made is gone.
func TestDebInstallRunPurge(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("the .deb test installs a package into a chroot: it needs root")
	}
	zk, pg := testenv.ZooKeeper(t), testenv.Postgres(t)
	tarball := chrootTarball(t)
	dist := t.TempDir()
	build(t, dist)
	debs, _ := filepath.Glob(filepath.Join(dist, "zksched_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("release.sh made %v, want one amd64 .deb", debs)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(debs[0]), "zksched_"), "_amd64.deb")

	root := t.TempDir()
	if out, err := exec.Command("tar", "-C", root, "-xpf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("unpack the root file system: %v\n%s", err, out)
	}
	before := tree(t, root)
	// The release as downloaded, installed as docs/install.md shows.
	download := filepath.Join(root, "tmp", "release")
	if err := os.Mkdir(download, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.WriteFile(filepath.Join(download, e.Name()), readFile(t, filepath.Join(dist, e.Name())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	block := testenv.DocBlock(t, "docs/install.md", "From a release", "sh", 1)
	out := mustChroot(t, root, "sh", "-c", "set -e; cd /tmp/release; export DEBIAN_FRONTEND=noninteractive\n"+block)
	if !strings.Contains(out, "\nzksched "+version+"\n") {
		t.Fatalf("the install block did not print zksched version %s:\n%s", version, out)
	}
	var info struct {
		Version, Commit, Date string
		GoVersion             string `json:"go_version"`
	}
	if err := json.Unmarshal([]byte(mustChroot(t, root, "zksched", "version", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(gitOutput(t, "rev-parse", "HEAD")))
	date := strings.TrimSpace(string(gitOutput(t, "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ")))
	if info.Version != version || strings.TrimSuffix(info.Commit, "+dirty") != commit || info.Date != date || info.GoVersion != runtime.Version() {
		t.Errorf("zksched version --json: %+v, want version %s, commit %s, date %s, %s", info, version, commit, date, runtime.Version())
	}
	files := strings.Fields(mustChroot(t, root, "dpkg-query", "-L", "zksched"))
	for path, want := range map[string]string{
		"/usr/bin/zksched": "-rwxr-xr-x root root", "/etc/zksched/zksched.yaml": "-rw-r----- root zksched",
		"/var/lib/zksched": "drwx------ zksched zksched", "/var/lib/zksched-task": "drwx------ zksched-task zksched-task",
		"/usr/share/bash-completion/completions/zksched":    "-rw-r--r-- root root",
		"/usr/share/zsh/vendor-completions/_zksched":        "-rw-r--r-- root root",
		"/usr/share/fish/vendor_completions.d/zksched.fish": "-rw-r--r-- root root",
	} {
		if got := strings.TrimSpace(mustChroot(t, root, "stat", "-c", "%A %U %G", path)); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	if out := mustChroot(t, root, "dpkg-query", "-W", "-f", "${Conffiles}", "zksched"); !strings.Contains(out, "/etc/zksched/zksched.yaml") {
		t.Errorf("conffiles: %q, want /etc/zksched/zksched.yaml", out)
	}
	// The packaged bash completion completes, where bash looks for it.
	if out := mustChroot(t, root, "bash", "-c", `source /usr/share/bash-completion/completions/zksched
COMP_WORDS=(zksched sta); COMP_CWORD=1; _zksched; echo "${COMPREPLY[*]}"`); strings.TrimSpace(out) != "status" {
		t.Errorf("the packaged bash completion of 'zksched sta' = %q, want status", out)
	}

	ports, err := testenv.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	// What an administrator puts in the units' EnvironmentFile.
	settings := fmt.Sprintf("ZKSCHED_REGISTRY_SERVERS=%s\nZKSCHED_REGISTRY_ROOT=%s\nZKSCHED_DB_DSN=%s\n"+
		"ZKSCHED_NODE_HOST=127.0.0.1\nZKSCHED_MASTER_PORT=%d\nZKSCHED_WORKER_PORT=%d\nZKSCHED_WORKER_SLOTS=4\n",
		strings.Join(zk.Servers, ","), zk.Root, pg.DSN, ports[0], ports[1])
	envFile := filepath.Join(root, "etc", "zksched", "zksched.env")
	if err := os.WriteFile(envFile, []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	master := parseUnit(t, filepath.Join(root, "lib", "systemd", "system", "zksched-master.service"))
	worker := parseUnit(t, filepath.Join(root, "lib", "systemd", "system", "zksched-worker.service"))
	if out, err := master.command(t, root, "zksched", "migrate", "--config", "/etc/zksched/zksched.yaml").CombinedOutput(); err != nil {
		t.Fatalf("zksched migrate: %v\n%s", err, out)
	}
	stop := func(cmd *exec.Cmd, name string, log *strings.Builder) {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, log.String())
		}
	}
	var nodes []func()
	for _, n := range []struct {
		name string
		unit unit
	}{{"master", master}, {"worker", worker}} {
		cmd := n.unit.command(t, root)
		var log strings.Builder
		w := syncWriter{mu: &sync.Mutex{}, b: &log}
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, func() { stop(cmd, n.name, &log) })
	}
	stopped := false
	stopNodes := func() {
		if !stopped {
			stopped = true
			for i := len(nodes) - 1; i >= 0; i-- {
				nodes[i]()
			}
		}
	}
	t.Cleanup(stopNodes)

	demo := readFile(t, filepath.Join(testenv.RepoRoot(), "examples", "demo.yaml"))
	if err := os.WriteFile(filepath.Join(root, "tmp", "demo.yaml"), demo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	submit := master.command(t, root, "zksched", "submit", "--wait", "--config", "/etc/zksched/zksched.yaml", "/tmp/demo.yaml")
	run := exec.CommandContext(ctx, submit.Path, submit.Args[1:]...)
	run.Env = submit.Env
	subOut, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("zksched submit --wait examples/demo.yaml: %v\n%s", err, subOut)
	}
	stopNodes()

	// The EnvironmentFile is the administrator's, not the package's: they remove it.
	if err := os.Remove(envFile); err != nil {
		t.Fatal(err)
	}
	mustChroot(t, root, "dpkg", "--purge", "zksched")
	// A listed path is left if it is there and was not before; /lib is a link to /usr/lib.
	for _, f := range files {
		real, err := filepath.EvalSymlinks(filepath.Join(root, f))
		if err != nil {
			continue
		}
		if rel, _ := filepath.Rel(root, real); !before[rel] {
			t.Errorf("%s is left after the purge", f)
		}
	}
	// Nothing new is left but dpkg's and apt's records, the users' entries and the test's own
	// files.
	kept := []string{"var/lib/dpkg/", "var/lib/apt/", "var/cache/apt/", "var/log/", "var/cache/debconf/", "etc/passwd-", "etc/group-",
		"etc/shadow-", "etc/gshadow-", "tmp/"}
	var left []string
	for p := range tree(t, root) {
		if before[p] {
			continue
		}
		ok := false
		for _, k := range kept {
			ok = ok || strings.HasPrefix(p, k)
		}
		if !ok {
			left = append(left, p)
		}
	}
	sort.Strings(left)
	if len(left) > 0 {
		t.Errorf("left after the purge: %v", left)
	}
}

func gitOutput(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncWriter is a node's log, written by the copiers of its stdout and stderr at once.
type syncWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
