package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/conf"
)

// runCLI runs `zksched args…` in process and returns its exit code and output.
func runCLI(args ...string) (int, string) {
	var out bytes.Buffer
	code := run(args, &out, &out)
	return code, out.String()
}

func TestUserCommand(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users")
	code, out := runCLI("user", "add", "alice", "--role", "operator", "--users-file", path)
	if code != 0 {
		t.Fatalf("user add: exit %d\n%s", code, out)
	}
	token := strings.TrimSpace(out[strings.LastIndex(out, ": ")+2:])
	if len(token) != 43 {
		t.Fatalf("token %q: want 43 characters of base64url (32 bytes)", token)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("users file: %v, %v; want mode 0600", fi, err)
	}
	users, err := conf.ReadUsersFile(path)
	if err != nil || len(users) != 1 || users[0].Name != "alice" || users[0].Role != "operator" ||
		users[0].TokenHash != sha256.Sum256([]byte(token)) {
		t.Fatalf("users file holds %+v, %v", users, err)
	}
	if b, _ := os.ReadFile(path); strings.Contains(string(b), token) {
		t.Fatal("the users file holds the token itself")
	}

	// A comment kept through a remove; a file without a final newline appended to cleanly.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("# the on-call team")
	f.Close()
	if code, out := runCLI("user", "add", "bob", "--role=viewer", "--users-file", path); code != 0 {
		t.Fatalf("user add bob: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "alice", "--role", "admin"}, 1, "user alice already exists (line 1"},
		{[]string{"add", "carol", "--role", "root"}, 2, `--role: role "root": want one of viewer, operator, admin`},
		{[]string{"add", "carol"}, 2, `--role: role "": want one of`},
		{[]string{"add", "car ol", "--role", "viewer"}, 2, "holds a space or a control character"},
		{[]string{"add", "car\x1bol", "--role", "viewer"}, 2, "holds a space or a control character"},
		{[]string{"add", strings.Repeat("x", 129), "--role", "viewer"}, 2, "user name of 129 bytes: at most 128"},
		{[]string{"add", "#x", "--role", "viewer"}, 2, "starts with #"},
		{[]string{"remove", "nobody"}, 1, "no user nobody in"},
		{[]string{"remove", "alice", "--role", "viewer"}, 2, "takes no --role"},
	} {
		code, out := runCLI(append(append([]string{"user"}, tc.args...), "--users-file", path)...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("user %q: exit %d, want %d with %q\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
	if code, out := runCLI("user", "remove", "alice", "--users-file", path); code != 0 {
		t.Fatalf("user remove: exit %d\n%s", code, out)
	}
	code, out = runCLI("user", "list", "--users-file", path)
	if code != 0 || strings.Contains(out, "alice") || !strings.Contains(out, "bob") || !strings.Contains(out, "viewer") {
		t.Fatalf("user list after the remove: exit %d\n%s", code, out)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "# the on-call team\n") {
		t.Errorf("the remove lost the comment:\n%s", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after the remove: %v, %v; want mode 0600", fi, err)
	}

	// A malformed file is named with its line, and left alone.
	if err := os.WriteFile(path, []byte("bob viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := runCLI("user", "add", "dave", "--role", "viewer", "--users-file", path); code == 0 || !strings.Contains(out, "line 1: 2 fields") {
		t.Errorf("add to a malformed file: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(path); string(b) != "bob viewer\n" {
		t.Errorf("the malformed file changed: %q", b)
	}
}
