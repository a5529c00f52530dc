package bench

// The viewers mode: what a crowd of viewers reading one large workflow instance costs a
// master. It starts one master process with a users file of one viewer, submits one instance
// of N noop tasks with no dependencies (no worker runs them, so they stay queued), waits
// until the master has created them all, reads the instance's API detail and its UI page once
// each, then fires Requests of each at once as the viewer and samples the master's resident
// set from /proc/<pid>/status all the while; the kernel's own peak (VmHWM) is reset just
// before the crowd, so it is the crowd's. The figures are measured, not judged: the issue's
// target (a master under 300 MB with 200 of each on a 10,000-task instance) is the reader's
// to compare against. With --bin an older binary is measured the same way.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// viewerToken is the token of the viewers mode's one user.
const viewerToken = "bench-viewer-token-0123456789"

// viewersSampleEvery is how often the viewers mode samples the master's RSS during the crowd.
const viewersSampleEvery = 20 * time.Millisecond

// ViewerFigures are what the viewers mode adds to a [Summary], under "viewers" in its JSON.
// Sizes are in MiB (2^20 bytes), as /proc reports them in KiB.
type ViewerFigures struct {
	// Tasks is how many tasks the instance has, Requests how many of each read the crowd
	// sent at once.
	Tasks    int `json:"tasks"`
	Requests int `json:"requests"`
	// APIBytes and APIMs are one read of the instance's detail (GET
	// /api/v1/workflow-instances/{id}) alone; UIBytes and UIMs of its UI page.
	APIBytes int     `json:"api_bytes"`
	APIMs    float64 `json:"api_ms"`
	UIBytes  int     `json:"ui_bytes"`
	UIMs     float64 `json:"ui_ms"`
	// Statuses counts the crowd's answers by status; Seconds is how long the crowd took
	// from the first request to the last answer, P50Ms and MaxMs the requests' own times.
	Statuses map[int]int `json:"statuses"`
	Seconds  float64     `json:"seconds"`
	P50Ms    float64     `json:"p50_ms"`
	MaxMs    float64     `json:"max_ms"`
	// MasterRSSMBBefore is the master's VmRSS just before the crowd; MasterRSSMBMax the
	// largest sampled during it, MasterHWMMB its VmHWM after it (reset before it).
	MasterRSSMBBefore float64 `json:"master_rss_mb_before"`
	MasterRSSMBMax    float64 `json:"master_rss_mb_max"`
	MasterHWMMB       float64 `json:"master_hwm_mb"`
	// ZKRoot and Schema are where the run ran; both are gone when it returns.
	ZKRoot string `json:"zk_root"`
	Schema string `json:"schema"`
}

// viewers runs the viewers mode on db, the run's scratch schema.
func viewers(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	dir, err := os.MkdirTemp("", "zksched-bench-viewers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	o.usersFile = filepath.Join(dir, "users")
	user := conf.User{Name: "viewer", Role: "viewer", TokenHash: sha256.Sum256([]byte(viewerToken))}
	if err := os.WriteFile(o.usersFile, []byte(user.String()+"\n"), 0o600); err != nil {
		return nil, err
	}
	spec := &workflow.Spec{Name: "bench-viewers"}
	for i := range o.N {
		spec.Tasks = append(spec.Tasks, workflow.Task{Name: fmt.Sprintf("t%05d", i), Type: "noop", Group: workflow.DefaultGroup})
	}
	return runOnProcesses(ctx, db, o, "viewers", spec, checkViewersOptions,
		func(c *procCluster, spec *workflow.Spec, v int) (*Summary, error) {
			return c.viewers(ctx, spec, v)
		})
}

// checkViewersOptions fills the defaults of the viewers mode and refuses what cannot run.
func checkViewersOptions(o *Options) error {
	o.Masters, o.Workers = 1, 0
	return checkProcOptions(o, "viewers", func(check func(bad bool, format string, args ...any)) {
		check(o.N < 1 || o.N > workflow.MaxTasks, "-n %d: want 1..%d tasks (a workflow's most)", o.N, workflow.MaxTasks)
		check(o.Requests < 1, "--requests %d: want at least 1", o.Requests)
		check(o.Duration <= 0, "--duration %v: want a positive duration", o.Duration)
	})
}

// viewers submits the instance, waits for its tasks, and sends the reads.
func (c *procCluster) viewers(ctx context.Context, spec *workflow.Spec, v int) (*Summary, error) {
	o := c.o
	start := time.Now()
	if err := lifecycle.SubmitMany(ctx, c.db.Queries, lifecycle.Submission{Spec: spec, Version: v}, 1); err != nil {
		return nil, err
	}
	id, err := c.db.WorkflowLastID(ctx)
	if err != nil {
		return nil, err
	}
	for {
		var n int
		if err := c.db.SQL().GetContext(ctx, &n, `SELECT count(*) FROM task_instance WHERE workflow_instance_id = $1`, id); err != nil {
			return nil, err
		}
		if n >= o.N {
			break
		}
		if err := c.checkAlive(); err != nil {
			return nil, err
		}
		if time.Since(start) > o.Duration {
			return nil, fmt.Errorf("viewers: %d of %d task instances created within %v", n, o.N, o.Duration)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
	m := c.nodes[0]
	pid := m.cmd.Process.Pid
	base := fmt.Sprintf("http://127.0.0.1:%d", m.port)
	paths := []string{fmt.Sprintf("/api/v1/workflow-instances/%d", id), fmt.Sprintf("/workflows/%d", id)}
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * o.Requests}}
	f := &ViewerFigures{Tasks: o.N, Requests: o.Requests, Statuses: map[int]int{}, ZKRoot: c.root, Schema: c.schema}
	one := func(path string) (int, float64, error) {
		r := read(ctx, client, base+path)
		if r.err != nil || r.status != http.StatusOK {
			return 0, 0, fmt.Errorf("viewers: GET %s: status %d: %v", path, r.status, r.err)
		}
		return r.bytes, r.ms, nil
	}
	if f.APIBytes, f.APIMs, err = one(paths[0]); err != nil {
		return nil, err
	}
	if f.UIBytes, f.UIMs, err = one(paths[1]); err != nil {
		return nil, err
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "one read: API %d bytes in %.0f ms, UI %d bytes in %.0f ms; sending %d of each at once\n",
			f.APIBytes, f.APIMs, f.UIBytes, f.UIMs, o.Requests)
	}
	before, err := procStatus(pid)
	if err != nil {
		return nil, err
	}
	f.MasterRSSMBBefore, f.MasterRSSMBMax = before.rssMB, before.rssMB
	// Writing 5 to clear_refs resets the process's VmHWM to its VmRSS.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return nil, fmt.Errorf("viewers: reset the master's peak RSS: %w", err)
	}
	results := make([]readResult, 2*o.Requests)
	var wg sync.WaitGroup
	done := make(chan struct{})
	crowd := time.Now()
	for i := range results {
		wg.Go(func() { results[i] = read(ctx, client, base+paths[i%2]) })
	}
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(viewersSampleEvery)
	defer tick.Stop()
	for sampling := true; sampling; {
		if st, err := procStatus(pid); err == nil {
			f.MasterRSSMBMax = max(f.MasterRSSMBMax, st.rssMB)
		}
		select {
		case <-done:
			sampling = false
		case <-tick.C:
		}
	}
	f.Seconds = time.Since(crowd).Seconds()
	after, err := procStatus(pid)
	if err != nil {
		return nil, err
	}
	f.MasterHWMMB = after.hwmMB
	f.MasterRSSMBMax = max(f.MasterRSSMBMax, after.rssMB)
	var ms []float64
	for _, r := range results {
		if r.err != nil {
			f.Statuses[0]++
			continue
		}
		f.Statuses[r.status]++
		ms = append(ms, r.ms)
	}
	slices.Sort(ms)
	if len(ms) > 0 {
		f.P50Ms, f.MaxMs = ms[len(ms)/2], ms[len(ms)-1]
	}
	return &Summary{Mode: "viewers", Tasks: o.N, Workflows: 1, Seconds: time.Since(start).Seconds(), Masters: 1, Viewers: f}, nil
}

// readResult is one read of the viewers mode.
type readResult struct {
	status, bytes int
	ms            float64
	err           error
}

// read GETs url as the viewer and reads the whole answer.
func read(ctx context.Context, client *http.Client, url string) readResult {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return readResult{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+viewerToken)
	resp, err := client.Do(req)
	if err != nil {
		return readResult{err: err}
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return readResult{status: resp.StatusCode, bytes: int(n), ms: float64(time.Since(start).Microseconds()) / 1000, err: err}
}
