package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// TestAttackAuditFloodIsFoldedAndLongNamesKeepTheirRow (issue 29, item 4): a viewer who
// floods a master with refused changes adds one audit row per action, outcome and minute,
// whose count is the number of refusals; a path name of 60 KB is answered 400 without being
// echoed and leaves a clipped row; a long random name, which overflowed the target index
// and so left no row at all, leaves its row.
func TestAttackAuditFloodIsFoldedAndLongNamesKeepTheirRow(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_USERS_FILE="+attackUsers(t, e))
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)

	// The flood: kills of ever other task ids, as a viewer, from four clients at once; sent
	// counts the refusals (403), each of which the old code wrote a row of its own for.
	const flood = 3 * time.Second
	var sent, wrong atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client(t, "127.0.0.1", nil)
			for i := int64(w); time.Since(start) < flood; i += 4 {
				req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/v1/task-instances/%d/kill", base, i+1), nil)
				req.Header.Set("Authorization", "Bearer "+attackViewer)
				resp, err := c.Do(req)
				if err != nil {
					wrong.Add(1)
					continue
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusForbidden:
					sent.Add(1)
				case http.StatusTooManyRequests:
					// A request rate limit answers before the route: no refusal to record.
				default:
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if wrong.Load() != 0 {
		t.Fatalf("%d of %d flooded kills were not answered 403", wrong.Load(), sent.Load())
	}
	var rows int
	if err := e.db.SQL().Get(&rows, `SELECT count(*) FROM audit_event WHERE actor = 'vic' AND action = $1`, dao.AuditTaskKill); err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d refused kills in %v (%.0f/s) wrote %d audit rows (%.2f rows/s)",
		sent.Load(), took.Round(time.Millisecond), float64(sent.Load())/took.Seconds(), rows, float64(rows)/took.Seconds())

	// A 60 KB name, and a long random one (which does not compress), in the path; by two
	// users, since the refusals of one user fold into the row of the first.
	long := "n" + strings.Repeat("a", 60<<10)
	raw := make([]byte, 3<<10)
	_, _ = rand.Read(raw)
	random := "r" + base64.RawURLEncoding.EncodeToString(raw)
	c := client(t, "127.0.0.1", nil)
	for _, tc := range []struct{ who, token, name string }{
		{"viewer", attackViewer, long}, {"operator", attackOperator, random},
	} {
		r := call(t, c, "POST", base+"/api/v1/schedules/"+tc.name+"/enable", "", bearer(tc.token)...)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "name in the path is invalid") || len(r.body) > 1024 {
			t.Errorf("%s, a name of %d bytes: %d, %d bytes: %.300s; want a short 400", tc.who, len(tc.name), r.status, len(r.body), r.body)
		}
		var target string
		if err := e.db.SQL().Get(&target, `SELECT target FROM audit_event WHERE action = $1 AND target LIKE $2 ORDER BY id DESC LIMIT 1`,
			dao.AuditScheduleEnable, "schedule/"+tc.name[:32]+"%"); err != nil {
			t.Errorf("%s, a name of %d bytes: no audit row (%v)", tc.who, len(tc.name), err)
		} else if len(target) > 256 || !strings.Contains(target, "…sha256:") {
			t.Errorf("%s, a name of %d bytes: target of %d bytes %.80q…, want it clipped with a hash", tc.who, len(tc.name), len(target), target)
		}
	}
	var largest int
	if err := e.db.SQL().Get(&largest, `SELECT max(octet_length(actor) + octet_length(target) + octet_length(params::text) +
		octet_length(client) + octet_length(outcome)) FROM audit_event`); err != nil {
		t.Fatal(err)
	}
	t.Logf("largest audit row: %d bytes of text", largest)
	if largest > 1024 {
		t.Errorf("an audit row of %d bytes of text", largest)
	}
	if strings.Contains(m.Log(), "refused change not recorded") {
		t.Errorf("a refusal was not recorded:\n%s", grepLines(m.Log(), "refused change not recorded"))
	}
	// The flood's refusals are counted, in the database and in the API.
	type fold struct {
		Minute time.Time `db:"minute"`
		Rows   int       `db:"rows"`
		Count  int64     `db:"count"`
	}
	var folds []fold
	if err := e.db.SQL().Select(&folds, `SELECT date_trunc('minute', at) AS minute, count(*) AS rows, sum(count) AS count
		FROM audit_event WHERE actor = 'vic' AND action = $1 GROUP BY actor, action, outcome, date_trunc('minute', at) ORDER BY 1`, dao.AuditTaskKill); err != nil {
		t.Fatal(err)
	}
	var counted int64
	for _, f := range folds {
		counted += f.Count
		if f.Rows != 1 {
			t.Errorf("minute %s: %d rows of the viewer's refused kills, want 1", f.Minute, f.Rows)
		}
	}
	if counted != sent.Load() || rows > 2 {
		t.Errorf("%d rows counting %d refusals; want at most one a minute, counting all %d", rows, counted, sent.Load())
	}
	// The API shows the count.
	r := call(t, client(t, "127.0.0.1", nil), "GET", base+"/api/v1/audit-events?actor=vic&action="+dao.AuditTaskKill, "", bearer(attackAdmin)...)
	var page struct {
		Items []struct {
			Count int `json:"count"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.body), &page); r.status != 200 || err != nil || len(page.Items) == 0 {
		t.Fatalf("audit events: %d %v %.300s", r.status, err, r.body)
	}
	var shown int64
	for _, ev := range page.Items {
		shown += int64(ev.Count)
	}
	if shown != sent.Load() {
		t.Errorf("the API shows counts summing to %d, want %d", shown, sent.Load())
	}
}
