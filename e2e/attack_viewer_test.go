package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAttackViewerCannotExhaustAMaster (issue 29, item 3): a viewer reads a 10,000-task
// instance from a real master. One answer of its detail, and its page in the UI, is a page
// of tasks with their counts by state and a summarized graph, bounded in size; a crowd of
// heavy reads beyond api.heavy-reads is answered 503 with a Retry-After instead of piling up;
// a user over api.rate-limit is answered 429 with a Retry-After, counted in the metrics,
// while another user is still served.
func TestAttackViewerCannotExhaustAMaster(t *testing.T) {
	t.Parallel()
	const tasks, maxAnswer = 10_000, 256 << 10
	e := setupE2E(t, nil, "")
	m := e.Master("master", "ZKSCHED_API_USERS_FILE="+attackUsers(t, e),
		"ZKSCHED_API_HEAVY_READS=2", "ZKSCHED_API_HEAVY_READ_WAIT=20ms", "ZKSCHED_API_RATE_LIMIT=1", "ZKSCHED_API_RATE_BURST=100")
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	serving(t, m, base, nil)
	var wf strings.Builder
	wf.WriteString("name: wide\ntasks:\n")
	for i := range tasks {
		fmt.Fprintf(&wf, "  - {name: t%05d, type: noop}\n", i)
	}
	if out, code := e.Run("submit", e.file(t, "wide.yaml", wf.String())); code != 0 {
		t.Fatalf("submit: %d %s", code, out)
	}
	waitUntil(t, 120*time.Second, "the master to create the instance's tasks", func() bool {
		var n int
		return e.db.SQL().Get(&n, `SELECT count(*) FROM task_instance WHERE workflow_instance_id = 1`) == nil && n == tasks
	})
	c := client(t, "127.0.0.1", nil)
	// Slow answers under -race on a shared machine are slowness, not the refusals looked for.
	c.Timeout = 2 * time.Minute
	viewer := bearer(attackViewer)
	// The first read parses and caches the 10,000-task definition; the second is timed.
	if r := call(t, c, "GET", base+"/api/v1/workflow-instances/1?limit=1", "", viewer...); r.status != http.StatusOK {
		t.Fatalf("the first read: status %d %s", r.status, r.body)
	}

	start := time.Now()
	r := call(t, c, "GET", base+"/api/v1/workflow-instances/1", "", viewer...)
	took := time.Since(start)
	var d struct {
		TaskStates map[string]int    `json:"task_states"`
		Tasks      []json.RawMessage `json:"tasks"`
		TasksNext  int64             `json:"tasks_next"`
		Graph      struct {
			Summarized bool              `json:"summarized"`
			Tasks      int               `json:"tasks"`
			Nodes      []json.RawMessage `json:"nodes"`
		} `json:"graph"`
	}
	if r.status != http.StatusOK || len(r.body) > maxAnswer {
		t.Fatalf("the detail of a %d-task instance: status %d, %d bytes in %v; want 200 and at most %d bytes", tasks, r.status, len(r.body), took, maxAnswer)
	}
	if err := json.Unmarshal([]byte(r.body), &d); err != nil {
		t.Fatal(err)
	}
	if d.TaskStates["queued"] != tasks || len(d.Tasks) != 100 || d.TasksNext == 0 || !d.Graph.Summarized || d.Graph.Tasks != tasks || len(d.Graph.Nodes) != 1 {
		t.Errorf("detail: states %v, %d tasks, next %d, graph summarized %v of %d tasks in %d nodes; want %d queued, a page of 100 with a next, "+
			"a graph summarized in one layer", d.TaskStates, len(d.Tasks), d.TasksNext, d.Graph.Summarized, d.Graph.Tasks, len(d.Graph.Nodes), tasks)
	}
	// The binary is built with -race, and the machine shared: this bounds a runaway, not speed.
	if took > 15*time.Second {
		t.Errorf("the detail took %v", took)
	}
	start = time.Now()
	page := call(t, c, "GET", base+"/workflows/1", "", viewer...)
	pageTook := time.Since(start)
	if page.status != http.StatusOK || len(page.body) > maxAnswer || strings.Count(page.body, `<td class="name">`) != 100 ||
		!strings.Contains(page.body, `id="dag-summary"`) || !strings.Contains(page.body, `id="wf-next"`) || pageTook > 15*time.Second {
		t.Errorf("the UI page: status %d, %d bytes, %d rows in %v; want 200, at most %d bytes, 100 rows, a summarized graph and a next link",
			page.status, len(page.body), strings.Count(page.body, `<td class="name">`), pageTook, maxAnswer)
	}
	t.Logf("figures (-race build): detail %d bytes in %v, UI page %d bytes in %v", len(r.body), took, len(page.body), pageTook)

	// A crowd of heavy reads beyond the two places.
	var mu sync.Mutex
	statuses := map[int]int{}
	retry := map[string]int{}
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			path := "/api/v1/workflow-instances/1"
			if i%2 == 1 {
				path = "/workflows/1"
			}
			r := call(t, c, "GET", base+path, "", viewer...)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.status]++
			if r.status == http.StatusServiceUnavailable {
				retry[r.header.Get("Retry-After")]++
			}
		})
	}
	wg.Wait()
	if statuses[http.StatusServiceUnavailable] == 0 || statuses[http.StatusOK] == 0 || statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable] != 60 ||
		len(retry) != 1 || retry["1"] == 0 {
		t.Errorf("60 heavy reads at once: statuses %v, Retry-After %v; want 200 or 503 with Retry-After 1, some of each", statuses, retry)
	}

	// The operator floods cheap reads: past its burst, 429 with a Retry-After.
	statuses = map[int]int{}
	var retryAfter string
	for i := range 8 {
		wg.Go(func() {
			for range 40 {
				r := call(t, c, "GET", base+"/api/v1/workflow-instances?limit=1", "", bearer(attackOperator)...)
				mu.Lock()
				statuses[r.status]++
				if r.status == http.StatusTooManyRequests && i == 0 {
					retryAfter = r.header.Get("Retry-After")
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if statuses[http.StatusTooManyRequests] == 0 || statuses[http.StatusOK]+statuses[http.StatusTooManyRequests] != 320 {
		t.Errorf("320 requests of one user with a limit of 1 a second and a burst of 100: statuses %v; want 200 then 429", statuses)
	}
	if retryAfter != "" && retryAfter != "1" {
		t.Errorf("Retry-After %q, want 1 (a token comes back every second)", retryAfter)
	}
	if r := call(t, c, "GET", base+"/api/v1/workflow-instances?limit=1", "", viewer...); r.status != http.StatusOK {
		t.Errorf("the viewer while the operator is limited: status %d, want 200", r.status)
	}
	metrics := call(t, c, "GET", base+"/metrics", "")
	for _, name := range []string{"zksched_api_rate_limited_total", "zksched_api_busy_total"} {
		line := between(metrics.body, "\n"+name+" ", "\n")
		if line == "" || line == "0" {
			t.Errorf("metric %s = %q, want the refusals counted", name, line)
		}
	}
}
