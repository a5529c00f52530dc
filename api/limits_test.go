package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// instancePage is what the tests read of GET /api/v1/workflow-instances/{id}.
type instancePage struct {
	TaskStates map[string]int `json:"task_states"`
	Tasks      []struct {
		ID    int64  `json:"id"`
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"tasks"`
	TasksNext int64 `json:"tasks_next"`
	TasksPrev int64 `json:"tasks_prev"`
	Graph     struct {
		Tasks int `json:"tasks"`
	} `json:"graph"`
}

// TestWorkflowDetailPagesItsTasks: the detail of an instance carries its tasks counted by
// state and one page of them, with cursors to walk every task forward and back, filtered by
// state when asked; the UI page shows the counts and a page with next and previous links.
func TestWorkflowDetailPagesItsTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 250)
	get := func(query string) instancePage {
		t.Helper()
		r := b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d%s", f.wf, query), "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d %s", query, r.status, r.body)
		}
		var p instancePage
		r.json(t, &p)
		return p
	}
	first := get("")
	if want := map[string]int{"queued": 245, "running": 2, "succeeded": 2, "failed": 1}; fmt.Sprint(first.TaskStates) != fmt.Sprint(want) {
		t.Errorf("task_states %v, want %v", first.TaskStates, want)
	}
	if len(first.Tasks) != 100 || first.TasksPrev != 0 || first.TasksNext != first.Tasks[99].ID || first.Graph.Tasks != 250 {
		t.Fatalf("first page: %d tasks, prev %d, next %d, graph of %d; want 100, none, the last's id, 250", len(first.Tasks), first.TasksPrev, first.TasksNext, first.Graph.Tasks)
	}
	seen := map[int64]bool{}
	var pages []instancePage
	for p, query := first, ""; ; {
		for _, tk := range p.Tasks {
			if seen[tk.ID] {
				t.Fatalf("task %d on two pages (%s)", tk.ID, query)
			}
			seen[tk.ID] = true
		}
		pages = append(pages, p)
		if p.TasksNext == 0 {
			break
		}
		query = fmt.Sprintf("?after=%d", p.TasksNext)
		p = get(query)
	}
	if len(seen) != 250 || len(pages) != 3 || len(pages[2].Tasks) != 50 {
		t.Errorf("walked %d tasks in %d pages, want 250 in 3 (the last of 50)", len(seen), len(pages))
	}
	back := get(fmt.Sprintf("?before=%d", pages[2].TasksPrev))
	if len(back.Tasks) != 100 || back.Tasks[0].ID != pages[1].Tasks[0].ID || back.TasksNext != pages[1].TasksNext || back.TasksPrev != pages[1].TasksPrev {
		t.Errorf("back from the last page: %d tasks from %d, next %d prev %d; want page 2 again (from %d, next %d prev %d)",
			len(back.Tasks), back.Tasks[0].ID, back.TasksNext, back.TasksPrev, pages[1].Tasks[0].ID, pages[1].TasksNext, pages[1].TasksPrev)
	}
	failed := get("?state=failed&limit=5")
	if len(failed.Tasks) != 1 || failed.Tasks[0].Name != "t2" || failed.TasksNext != 0 {
		t.Errorf("?state=failed: %+v, want t2 alone", failed.Tasks)
	}
	for _, bad := range []string{"?state=done", "?limit=0", "?limit=1001", "?after=x", "?after=1&before=2", "?page=2"} {
		if r := b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d%s", f.wf, bad), ""); r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, r.status)
		}
	}

	page := b.do(t, "GET", fmt.Sprintf("/workflows/%d", f.wf), "", "Accept", "text/html")
	if page.status != http.StatusOK || strings.Count(page.body, `<td class="name">`) != 100 ||
		!strings.Contains(page.body, "250 tasks") || !strings.Contains(page.body, "245 queued") ||
		!strings.Contains(page.body, fmt.Sprintf(`href="/workflows/%d?after=%d"`, f.wf, first.TasksNext)) || strings.Contains(page.body, `id="wf-prev"`) {
		t.Errorf("UI page: status %d, %d rows; want 100 rows, the counts and a next link only\n%s", page.status,
			strings.Count(page.body, `<td class="name">`), page.body)
	}
	page = b.do(t, "GET", fmt.Sprintf("/workflows/%d?state=failed", f.wf), "", "Accept", "text/html")
	if strings.Count(page.body, `<td class="name">`) != 1 || !strings.Contains(page.body, `<option value="failed" selected>`) {
		t.Errorf("UI page filtered on failed: want one row and the filter kept\n%s", page.body)
	}
}

// TestHeavyReadsWaitThenAnswer503: heavy reads beyond api.heavy-reads wait at most
// api.heavy-read-wait for a place, then are answered 503 with a Retry-After; light reads are
// not held up by them, and the refusals are counted.
func TestHeavyReadsWaitThenAnswer503(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true, heavyReads: 1, heavyReadWait: time.Millisecond})
	f := b.seed(t, 3000)
	var mu sync.Mutex
	statuses := map[int]int{}
	var retry []string
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			r := b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d?limit=1000", f.wf), "")
			mu.Lock()
			defer mu.Unlock()
			statuses[r.status]++
			if r.status == http.StatusServiceUnavailable {
				retry = append(retry, r.header.Get("Retry-After"))
			}
		})
	}
	wg.Wait()
	if statuses[http.StatusOK] == 0 || statuses[http.StatusServiceUnavailable] == 0 || statuses[http.StatusOK]+statuses[http.StatusServiceUnavailable] != 40 {
		t.Errorf("statuses %v: want some 200 and the rest 503", statuses)
	}
	for _, ra := range retry {
		if ra != "1" {
			t.Errorf("Retry-After %q, want 1", ra)
		}
	}
	if got := b.server.Busy(); got != int64(statuses[http.StatusServiceUnavailable]) {
		t.Errorf("Busy() = %d, want %d", got, statuses[http.StatusServiceUnavailable])
	}
	if r := b.do(t, "GET", "/api/v1/workflow-instances", ""); r.status != http.StatusOK {
		t.Errorf("a light read: status %d", r.status)
	}
}

// TestRateLimitPerPrincipal: a user over api.rate-limit is answered 429 with a Retry-After,
// before any other work, while another user is served; the refusals are counted.
func TestRateLimitPerPrincipal(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{usersFile: writeUsers(t), rateLimit: 0.5, rateBurst: 3})
	for i := range 3 {
		if r := b.do(t, "GET", "/api/v1/workflow-instances", "", "Authorization", "Bearer "+viewerToken); r.status != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200 within the burst", i, r.status)
		}
	}
	r := b.do(t, "GET", "/api/v1/workflow-instances", "", "Authorization", "Bearer "+viewerToken)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "2" || !strings.Contains(r.errorMessage(t), "api.rate-limit") {
		t.Errorf("over the burst: status %d, Retry-After %q, %s; want 429 naming api.rate-limit, Retry-After 2", r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := b.do(t, "GET", "/api/v1/workflow-instances", "", "Authorization", "Bearer "+adminToken); r.status != http.StatusOK {
		t.Errorf("another user: status %d, want 200", r.status)
	}
	if got := b.server.RateLimited(); got != 1 {
		t.Errorf("RateLimited() = %d, want 1", got)
	}
}
