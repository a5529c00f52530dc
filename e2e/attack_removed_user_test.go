package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
)

// replaceFile gives path the content body by a rename, as an editor or a configuration
// management run does, so a master sees a new file.
func replaceFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestAttackRemovedUserSessionNeverComesBack (issue 29, item 5): a session cookie of a user
// whose users-file line was removed opens nothing once the same line is back byte for byte:
// neither on the master that saw the line go nor on another that never did, nor after
// `zksched user remove` run while no master ran and the line put back by hand.
func TestAttackRemovedUserSessionNeverComesBack(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	users := attackUsers(t, e)
	whole, err := os.ReadFile(users)
	if err != nil {
		t.Fatal(err)
	}
	var without []string
	for _, l := range strings.SplitAfter(string(whole), "\n") {
		if !strings.HasPrefix(l, "olga ") {
			without = append(without, l)
		}
	}
	a := e.Master("master-a", "ZKSCHED_API_USERS_FILE="+users)
	b := e.Master("master-b", "ZKSCHED_API_USERS_FILE="+users)
	baseA, baseB := fmt.Sprintf("http://127.0.0.1:%d", a.Port), fmt.Sprintf("http://127.0.0.1:%d", b.Port)
	serving(t, a, baseA, nil)
	serving(t, b, baseB, nil)
	session := login(t, client(t, "127.0.0.1", nil), baseA, attackOperator)
	thief := client(t, "127.0.0.1", nil)
	with := func(base, path string) int {
		return call(t, thief, "GET", base+path, "", "Cookie", "zksched_session="+session.Value).status
	}
	if s := with(baseB, "/api/v1/cluster"); s != 200 {
		t.Fatalf("the session on the other master: %d", s)
	}

	// The line goes by hand; master A sees it go (master B is not asked meanwhile).
	replaceFile(t, users, strings.Join(without, ""))
	waitUntil(t, 10*time.Second, "master A to see olga gone", func() bool { return with(baseA, "/api/v1/cluster") == 401 })
	// The same line comes back, byte for byte. The token is refused until a master reads
	// the file again, which counts against the address: ask from another one, every 300 ms.
	replaceFile(t, users, string(whole))
	prober := client(t, "127.0.0.9", nil)
	for _, base := range []string{baseA, baseB} {
		testenv.WaitFor(t, 10*time.Second, 300*time.Millisecond, base+" to take olga back", func() bool {
			return call(t, prober, "GET", base+"/api/v1/cluster", "", bearer(attackOperator)...).status == 200
		})
		if s := with(base, "/api/v1/cluster"); s != http.StatusUnauthorized {
			t.Errorf("%s: the API with the cookie of before the removal: %d, want 401", base, s)
		}
		if s := with(base, "/"); s != http.StatusSeeOther {
			t.Errorf("%s: a page with the cookie of before the removal: %d, want a redirect to the login", base, s)
		}
	}
	var rows int
	if err := e.db.SQL().Get(&rows, `SELECT count(*) FROM api_session WHERE user_name = 'olga'`); err != nil || rows != 0 {
		t.Errorf("olga has %d session rows left (%v), want none", rows, err)
	}

	// `zksched user remove` while no master runs, the same line back by hand, a master again.
	session = login(t, client(t, "127.0.0.1", nil), baseA, attackViewer)
	if s := with(baseB, "/api/v1/cluster"); s != 200 {
		t.Fatalf("vic's session on the other master: %d", s)
	}
	for _, m := range []*testcluster.Proc{a, b} {
		if err := m.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		m.Wait(t, 30*time.Second)
	}
	if out, code := e.Run("user", "remove", "vic", "--users-file", users); code != 0 || !strings.Contains(out, "its sessions have ended") {
		t.Fatalf("user remove: %d %s", code, out)
	}
	replaceFile(t, users, string(whole))
	c := e.Master("master-c", "ZKSCHED_API_USERS_FILE="+users)
	baseC := fmt.Sprintf("http://127.0.0.1:%d", c.Port)
	serving(t, c, baseC, nil)
	if s := call(t, thief, "GET", baseC+"/api/v1/cluster", "", bearer(attackViewer)...).status; s != 200 {
		t.Fatalf("vic's token, its line back: %d", s)
	}
	if s := with(baseC, "/api/v1/cluster"); s != http.StatusUnauthorized {
		t.Errorf("vic's cookie of before `zksched user remove`, its line back: %d, want 401", s)
	}
}
