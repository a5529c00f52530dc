package bench

// The memory mode: how much memory the nodes hold with a large queue. It starts a cluster of
// real processes as the failover mode does (one master and two workers by default), submits N
// single-task workflows whose task sleeps longer than the run, so that the workers' slots
// fill and every other task waits queued, and samples each node's resident set from
// /proc/<pid>/status until the master has created every task instance and the queue has
// stayed full for a hold time. The figures are measured, not judged: the target (a
// master under 100 MB and a worker under 50 MB with 100,000 queued tasks) is for the reader
// to compare against.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// memorySampleEvery is how often the memory mode samples the nodes' RSS and the queue.
const memorySampleEvery = 200 * time.Millisecond

// memoryChunk is how many workflows one submit statement creates.
const memoryChunk = 10_000

// MemoryFigures are what the memory mode adds to a [Summary], under "memory" in its JSON.
// Sizes are in MiB (2^20 bytes), as /proc reports them in KiB.
type MemoryFigures struct {
	// MasterRSSMBMax and WorkerRSSMBMax are the largest VmRSS sampled of any master and any
	// worker over the run; MasterHWMMB and WorkerHWMMB the largest VmHWM (the kernel's own
	// peak RSS, which catches what falls between two samples) read at the end of the hold.
	MasterRSSMBMax float64 `json:"master_rss_mb_max"`
	WorkerRSSMBMax float64 `json:"worker_rss_mb_max"`
	MasterHWMMB    float64 `json:"master_hwm_mb"`
	WorkerHWMMB    float64 `json:"worker_hwm_mb"`
	// QueuedMax is the largest number of queued task instances sampled; TaskInstances how
	// many task instances existed at the end.
	QueuedMax     int `json:"queued_max"`
	TaskInstances int `json:"task_instances"`
	// SubmitMs is how long submitting the N workflows took, FillMs how long from the first
	// submit until every task instance existed, and HoldMs how long the queue was then held
	// full while sampling went on.
	SubmitMs float64 `json:"submit_ms"`
	FillMs   float64 `json:"fill_ms"`
	HoldMs   float64 `json:"hold_ms"`
	// Samples is how many times the nodes were sampled.
	Samples     int     `json:"samples"`
	TaskSleepMs float64 `json:"task_sleep_ms"`
	// Nodes are the figures of each node.
	Nodes []NodeMemory `json:"nodes"`
	// ZKRoot and Schema are where the run ran; both are gone when it returns.
	ZKRoot string `json:"zk_root"`
	Schema string `json:"schema"`
}

// NodeMemory is the memory of one node of a memory run.
type NodeMemory struct {
	Name string `json:"name"`
	Role string `json:"role"`
	ID   string `json:"id"`
	PID  int    `json:"pid"`
	// RSSMBMax is the largest VmRSS sampled, HWMMB the VmHWM at the end of the hold.
	RSSMBMax float64 `json:"rss_mb_max"`
	HWMMB    float64 `json:"hwm_mb"`
	// HeapInuseMB, GoSysMB and Goroutines are read from the node's /metrics at the end of the
	// hold: the Go heap in use and all the memory the Go runtime has from the system, which
	// say how much of the RSS is live data and how much the runtime keeps. 0 when the node's
	// metrics could not be read.
	HeapInuseMB float64 `json:"heap_inuse_mb"`
	GoSysMB     float64 `json:"go_sys_mb"`
	Goroutines  int     `json:"goroutines"`
}

// memoryRun is the state of one run of the memory mode.
type memoryRun struct {
	*procCluster
	// figures holds one entry per node, in the order of the cluster's nodes.
	figures []NodeMemory
	samples int
	// queued and total are the last count of queued and of all task instances; queuedMax the
	// largest queued.
	queued, total, queuedMax int
	// submitted counts the workflows submitted so far, written by the submitting goroutine.
	submitted atomic.Int64
	lastPrint time.Time
}

// memory runs the memory mode on db, the run's scratch schema.
func memory(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	return runOnProcesses(ctx, db, o, "memory", nil, checkMemoryOptions,
		func(c *procCluster, spec *workflow.Spec, v int) (*Summary, error) {
			r := &memoryRun{procCluster: c}
			for _, n := range c.nodes {
				r.figures = append(r.figures, NodeMemory{Name: n.name, Role: string(n.role), ID: n.id, PID: n.cmd.Process.Pid})
			}
			return r.run(ctx, spec, v)
		})
}

// run submits the workflows and samples the nodes until the queue has been full for the
// hold time, and sums the run up.
func (r *memoryRun) run(ctx context.Context, spec *workflow.Spec, v int) (*Summary, error) {
	o := r.o
	start := time.Now()
	r.lastPrint = start
	sctx, cancel := context.WithCancel(ctx)
	var submitErr error
	var submitTook time.Duration
	submitDone := make(chan struct{})
	go func() {
		defer close(submitDone)
		submitErr = r.submit(sctx, spec, v)
		submitTook = time.Since(start)
	}()
	// The submitter uses db, which the caller closes once this returns.
	defer func() { cancel(); <-submitDone }()

	tick := time.NewTicker(memorySampleEvery)
	defer tick.Stop()
	var filledAt time.Time
	submitting := true
	for {
		if submitting {
			select {
			case <-submitDone:
				if submitErr != nil {
					return nil, fmt.Errorf("memory: submit: %w", submitErr)
				}
				submitting = false
			default:
			}
		}
		if err := r.checkAlive(); err != nil {
			return nil, err
		}
		if err := r.sample(ctx); err != nil {
			return nil, err
		}
		if filledAt.IsZero() && !submitting && r.total >= o.N {
			filledAt = time.Now()
			r.print(start, fmt.Sprintf("every task instance created; holding for %v", o.Hold))
		}
		if !filledAt.IsZero() && time.Since(filledAt) >= o.Hold {
			break
		}
		if filledAt.IsZero() && time.Since(start) > o.Duration {
			return nil, fmt.Errorf("memory: the queue did not fill within %v: %d of %d workflows submitted, %d of %d task instances created, %d queued (at most %d)",
				o.Duration, r.submitted.Load(), o.N, r.total, o.N, r.queued, r.queuedMax)
		}
		if time.Since(r.lastPrint) >= 2*time.Second {
			r.print(start, "")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	held := time.Since(filledAt)
	took := time.Since(start)
	r.finish(ctx)
	return r.summarize(start, took, submitTook, filledAt.Sub(start), held), nil
}

// checkMemoryOptions fills the defaults of the memory mode and refuses what cannot run.
func checkMemoryOptions(o *Options) error {
	return checkProcOptions(o, "memory", func(check func(bad bool, format string, args ...any)) {
		check(o.N < 1, "-n %d: want at least 1", o.N)
		check(o.Masters < 1, "--masters %d: want at least 1", o.Masters)
		check(o.Workers < 1, "--workers %d: want at least 1", o.Workers)
		check(o.Slots < 1, "--slots %d: want at least 1", o.Slots)
		check(o.TaskSleep <= 0, "--sleep %v: want a positive duration", o.TaskSleep)
		check(o.Hold < 0, "--hold %v: want a duration of 0 or more", o.Hold)
		check(o.Duration <= 0, "--duration %v: want a positive duration", o.Duration)
	})
}

// submit creates the N workflows in chunks, counting them in r.submitted.
func (r *memoryRun) submit(ctx context.Context, spec *workflow.Spec, version int) error {
	for left := r.o.N; left > 0; left -= memoryChunk {
		n := min(left, memoryChunk)
		if err := lifecycle.SubmitMany(ctx, r.db.Queries, lifecycle.Submission{Spec: spec, Version: version}, n); err != nil {
			return err
		}
		r.submitted.Add(int64(n))
	}
	return nil
}

// sample reads every node's RSS and counts the task instances.
func (r *memoryRun) sample(ctx context.Context) error {
	for i, n := range r.nodes {
		st, err := procStatus(n.cmd.Process.Pid)
		if err != nil {
			// A node that has just exited may not be reaped yet: let checkAlive say so.
			select {
			case <-n.done:
				return r.checkAlive()
			case <-time.After(time.Second):
			}
			return fmt.Errorf("memory: read the status of %s: %w", n, err)
		}
		r.figures[i].RSSMBMax = max(r.figures[i].RSSMBMax, st.rssMB)
	}
	r.samples++
	var q struct {
		Queued int `db:"queued"`
		Total  int `db:"total"`
	}
	if err := r.db.SQL().GetContext(ctx, &q,
		`SELECT count(*) FILTER (WHERE state = 'queued') AS queued, count(*) AS total FROM task_instance`); err != nil {
		return fmt.Errorf("memory: count the task instances: %w", err)
	}
	r.queued, r.total, r.queuedMax = q.Queued, q.Total, max(r.queuedMax, q.Queued)
	return nil
}

// print writes a progress line: what, the submitted workflows, the task instances and each
// node's RSS now.
func (r *memoryRun) print(start time.Time, what string) {
	r.lastPrint = time.Now()
	if r.o.Progress == nil {
		return
	}
	var rss []string
	for _, n := range r.nodes {
		if st, err := procStatus(n.cmd.Process.Pid); err == nil {
			rss = append(rss, fmt.Sprintf("%s %.1f", n.name, st.rssMB))
		}
	}
	line := fmt.Sprintf("%6.1fs  submitted %d/%d, task instances %d, queued %d; RSS MB %s",
		time.Since(start).Seconds(), r.submitted.Load(), r.o.N, r.total, r.queued, strings.Join(rss, ", "))
	if what != "" {
		line += "; " + what
	}
	fmt.Fprintln(r.o.Progress, line)
}

// finish reads what is read once, at the end of the hold while the nodes still run: each
// node's VmHWM and its Go runtime's memory from /metrics.
func (r *memoryRun) finish(ctx context.Context) {
	for i, n := range r.nodes {
		f := &r.figures[i]
		if st, err := procStatus(n.cmd.Process.Pid); err == nil {
			f.HWMMB = st.hwmMB
			f.RSSMBMax = max(f.RSSMBMax, st.rssMB)
		} else {
			r.warn("read the status of %s: %v", n, err)
		}
		m, err := scrapeMetrics(ctx, n.port, "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes", "go_goroutines")
		if err != nil {
			r.warn("read the metrics of %s: %v", n, err)
			continue
		}
		f.HeapInuseMB, f.GoSysMB, f.Goroutines = m[0]/(1<<20), m[1]/(1<<20), int(m[2])
	}
}

func (r *memoryRun) summarize(start time.Time, took, submitTook, fill, held time.Duration) *Summary {
	m := &MemoryFigures{QueuedMax: r.queuedMax, TaskInstances: r.total, SubmitMs: ms(submitTook), FillMs: ms(fill),
		HoldMs: ms(held), Samples: r.samples, TaskSleepMs: ms(r.o.TaskSleep), Nodes: r.figures, ZKRoot: r.root, Schema: r.schema}
	for _, f := range r.figures {
		switch registry.Role(f.Role) {
		case registry.RoleMaster:
			m.MasterRSSMBMax, m.MasterHWMMB = max(m.MasterRSSMBMax, f.RSSMBMax), max(m.MasterHWMMB, f.HWMMB)
		case registry.RoleWorker:
			m.WorkerRSSMBMax, m.WorkerHWMMB = max(m.WorkerRSSMBMax, f.RSSMBMax), max(m.WorkerHWMMB, f.HWMMB)
		}
	}
	// The rate is that of the master creating task instances, the work that fills the queue.
	return &Summary{Mode: "memory", Tasks: r.o.N, Workflows: r.o.N, Seconds: took.Seconds(),
		TasksPerSec: float64(r.o.N) / fill.Seconds(), Masters: r.o.Masters, Workers: r.o.Workers, Slots: r.o.Slots,
		Memory: m}
}

// procMemory is a process's memory from /proc/<pid>/status.
type procMemory struct {
	rssMB, hwmMB float64
}

// procStatus reads VmRSS and VmHWM of a process.
func procStatus(pid int) (procMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, err
	}
	var p procMemory
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return procMemory{}, fmt.Errorf("/proc/%d/status: %s: %w", pid, key, err)
		}
		if key == "VmRSS" {
			p.rssMB = kb / 1024
		} else {
			p.hwmMB = kb / 1024
		}
		found++
	}
	if found < 2 {
		return procMemory{}, fmt.Errorf("/proc/%d/status: no VmRSS and VmHWM (a zombie?)", pid)
	}
	return p, nil
}

// scrapeMetrics reads the values of unlabelled metrics from a node's /metrics.
func scrapeMetrics(ctx context.Context, port int, names ...string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	values := make([]float64, len(names))
	seen := make([]bool, len(names))
	for line := range strings.SplitSeq(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		for i, want := range names {
			if name == want {
				if values[i], err = strconv.ParseFloat(strings.TrimSpace(value), 64); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				seen[i] = true
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("no %s in /metrics", names[i])
		}
	}
	return values, nil
}
