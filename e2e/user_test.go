package e2e

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
)

func TestUserCommand(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	// runCLI runs `zksched args…` against the test's database and returns its exit code and
	// output.
	runCLI := func(args ...string) (int, string) {
		out, code := e.Run(args...)
		return code, out
	}
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

// TestUserChangesAreAudited: `zksched user add` and `remove` write their audit_event rows (the
// role, never the token) in the transaction that commits the change, and a change whose row
// cannot be written leaves the users file as it was.
func TestUserChangesAreAudited(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	path := filepath.Join(t.TempDir(), "users")
	out, code := e.Run("user", "add", "alice", "--role", "operator", "--users-file", path)
	if code != 0 {
		t.Fatalf("user add: exit %d\n%s", code, out)
	}
	token := strings.TrimSpace(out[strings.LastIndex(out, ": ")+2:])
	if out, code := e.Run("user", "remove", "alice", "--users-file", path); code != 0 {
		t.Fatalf("user remove: exit %d\n%s", code, out)
	}
	ctx := context.Background()
	evs, _, err := e.db.AuditList(ctx, dao.AuditFilter{TargetPrefix: "user/"}, 0, dao.MaxAuditPage)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Action != dao.AuditUserRemove || evs[1].Action != dao.AuditUserAdd {
		t.Fatalf("audit rows %+v: want user.add then user.remove", evs)
	}
	for _, ev := range evs {
		if ev.Target != "user/alice" || !strings.HasPrefix(ev.Actor, "cli:") || ev.Outcome != dao.AuditOK {
			t.Errorf("row %+v: want user/alice by cli:<user>, ok", ev)
		}
		if strings.Contains(string(ev.Params), token) || strings.Contains(string(ev.Params), "sha256") {
			t.Errorf("row %+v holds the token or its hash", ev)
		}
	}
	if !strings.Contains(string(evs[1].Params), `"role": "operator"`) && !strings.Contains(string(evs[1].Params), `"role":"operator"`) {
		t.Errorf("user.add params %s: want the role", evs[1].Params)
	}

	// With the trail refusing rows, neither an add nor a remove changes the file.
	if out, code := e.Run("user", "add", "bob", "--role", "viewer", "--users-file", path); code != 0 {
		t.Fatalf("user add bob: exit %d\n%s", code, out)
	}
	before, _ := os.ReadFile(path)
	// Refused at commit, after the file changed: the change is undone.
	if _, err := e.db.SQL().Exec(`
		CREATE FUNCTION refuse_audit_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'audit_event refused at commit by the test'; END $$;
		CREATE CONSTRAINT TRIGGER refuse_audit_at_commit AFTER INSERT ON audit_event
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_audit_at_commit()`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "carol", "--role", "admin"}, {"remove", "bob"}} {
		out, code := e.Run(append(append([]string{"user"}, args...), "--users-file", path)...)
		if code == 0 || !strings.Contains(out, "refused at commit") || !strings.Contains(out, "the users file was left as it was") {
			t.Errorf("user %v with the commit refused: exit %d\n%s", args, code, out)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("user %v: the users file kept a change whose audit row did not commit:\nbefore %q\nafter  %q", args, before, after)
		}
	}
	if _, err := e.db.SQL().Exec(`DROP TRIGGER refuse_audit_at_commit ON audit_event`); err != nil {
		t.Fatal(err)
	}
	// Refused at the insert, before the file changed.
	daotest.RefuseAudit(t, e.db)
	if out, code := e.Run("user", "add", "carol", "--role", "admin", "--users-file", path); code == 0 || !strings.Contains(out, "audit_event refused by the test") {
		t.Errorf("user add with the trail refusing rows: exit %d\n%s", code, out)
	}
	if out, code := e.Run("user", "remove", "bob", "--users-file", path); code == 0 || !strings.Contains(out, "audit_event refused by the test") {
		t.Errorf("user remove with the trail refusing rows: exit %d\n%s", code, out)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the users file changed without its audit row:\nbefore %q\nafter  %q", before, after)
	}
}

// TestDocsUserCommands runs the `zksched user` commands of docs/security.md as they are
// printed, in bash, where /etc/zksched does not exist, as on a new machine: in a mount
// namespace whose /etc is an overlay on the machine's (etcOverlay), so neither the removal
// of /etc/zksched nor the commands' writes reach the machine's.
func TestDocsUserCommands(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/security.md", "Users and roles", "sh", 1)
	for _, want := range []string{"zksched user add alice ", "zksched user list ", "zksched user remove alice "} {
		if !strings.Contains(block, want) {
			t.Errorf("the docs' commands lack %q, which this test checks:\n%s", want, block)
		}
	}
	e := setupE2E(t, nil, "")
	// Only the overlay's view of /etc/zksched goes, should the machine have one.
	cmd, upper := etcOverlay(t, "findmnt -n -o FSTYPE --mountpoint /etc | grep -qx overlay && rm -rf /etc/zksched\n"+block)
	cmd.Env = append(append(os.Environ(), e.Env...), e.cliPath(t))
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("the docs' commands: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "alice") {
		t.Errorf("user list printed no alice:\n%s", out.String())
	}
	users, err := conf.ReadUsersFile(filepath.Join(upper, "zksched", "users"))
	if err != nil || len(users) != 0 {
		t.Errorf("after the docs' commands the users file holds %+v, %v; want no user", users, err)
	}
}
