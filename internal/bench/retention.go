package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/master"
	"github.com/zksched/zksched/workflow"
)

// RetentionFigures are the retention mode's figures: the sizes of the tables that grow with
// every workflow, sampled while workflows are submitted at a steady rate and a retention
// purges them a short period after they end.
type RetentionFigures struct {
	// Rate is the submit rate, workflows a second, for RunSec seconds.
	Rate   float64 `json:"rate"`
	RunSec float64 `json:"run_s"`
	// InstancesSec and LogsSec are the retention periods of instances and of logs.
	InstancesSec float64 `json:"instances_s"`
	LogsSec      float64 `json:"logs_s"`
	// Submitted is how many workflows were submitted; Purged the rows the retention deleted,
	// by table.
	Submitted int              `json:"submitted"`
	Purged    map[string]int64 `json:"purged"`
	// Samples are the tables' sizes over the run.
	Samples []TableSample `json:"samples"`
	// Flat compares, for each table, its largest size over the second half of the run with
	// its size at the half: 1 means it did not grow after the half.
	Flat map[string]float64 `json:"flat"`
}

// TableSample is the sizes of the tables at one moment of the run.
type TableSample struct {
	AtSec float64 `json:"at_s"`
	// Bytes are pg_total_relation_size (table, indexes and TOAST); Rows the live rows.
	Bytes map[string]int64 `json:"bytes"`
	Rows  map[string]int64 `json:"rows"`
}

// RetentionTables are the tables the retention mode samples, in the order it prints them.
var RetentionTables = []string{"workflow_instance", "task_instance", "task_attempt", "task_log"}

// alwaysLeader is the in-process retention's leadership: the bench's master always leads.
type alwaysLeader struct{}

func (alwaysLeader) IsLeader() bool           { return true }
func (alwaysLeader) Changed() <-chan struct{} { return nil }

// retentionBench submits two-task workflows (a noop, then a shell task that writes a log line)
// at o.Rate for o.Duration to a cluster in process whose master purges finished instances
// o.Retention after they end (their logs at half that), every second, and samples the tables'
// sizes every sampleEvery. Past the period the tables should stop growing: as many rows are
// purged as are made, and vacuum gives the space of the purged rows to the new ones.
func retentionBench(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	spec := &workflow.Spec{Name: "bench-retention", Tasks: []workflow.Task{
		{Name: "a", Type: "noop", Group: workflow.DefaultGroup},
		{Name: "b", Type: "shell", Group: workflow.DefaultGroup, DependsOn: []string{"a"},
			Command: "echo a line of the retention bench from task instance $ZKSCHED_TASK_INSTANCE"},
	}}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	o.workflow = spec.Name
	v, err := define(ctx, db, spec)
	if err != nil {
		return nil, err
	}
	f := &RetentionFigures{Rate: o.Rate, InstancesSec: o.Retention.Seconds(), LogsSec: (o.Retention / 2).Seconds(),
		Purged: map[string]int64{}, Flat: map[string]float64{}}
	var mu sync.Mutex
	stop := cluster(db, o)
	defer stop()
	rctx, cancel := context.WithCancel(ctx)
	retention := master.NewRetention(master.RetentionConfig{Instances: o.Retention, Logs: o.Retention / 2,
		Interval: time.Second, BatchSize: 500, Log: o.Log, Purged: func(table string, n int64) {
			mu.Lock()
			f.Purged[table] += n
			mu.Unlock()
		}}, db, alwaysLeader{})
	purging := make(chan struct{})
	go func() { _ = retention.Run(rctx); close(purging) }()
	defer func() { cancel(); <-purging }()

	start := time.Now()
	sampled := make(chan error, 1)
	sctx, stopSampling := context.WithCancel(ctx)
	go func() { sampled <- sampleTables(sctx, db, o, start, f) }()
	ids, _, err := submitAt(ctx, db, spec, v, o.Rate, o.Duration)
	stopSampling()
	if serr := <-sampled; err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	f.Submitted, f.RunSec = len(ids), time.Since(start).Seconds()
	mu.Lock()
	defer mu.Unlock()
	if n := len(f.Samples); n >= 2 {
		half := f.Samples[n/2]
		for _, table := range RetentionTables {
			most := int64(0)
			for _, s := range f.Samples[n/2:] {
				most = max(most, s.Bytes[table])
			}
			if half.Bytes[table] > 0 {
				f.Flat[table] = float64(most) / float64(half.Bytes[table])
			}
		}
	}
	s := &Summary{Mode: o.Mode, Workflows: len(ids), Tasks: 2 * len(ids), Seconds: f.RunSec, Masters: o.Masters,
		Workers: o.Workers, Slots: o.Slots, Retention: f}
	return s, nil
}

// sampleTables samples the retention tables' sizes every sampleEvery(o) until ctx ends, and
// once more then.
func sampleTables(ctx context.Context, db *dao.DB, o Options, start time.Time, f *RetentionFigures) error {
	every := sampleEvery(o)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		s := TableSample{AtSec: time.Since(start).Seconds(), Bytes: map[string]int64{}, Rows: map[string]int64{}}
		for _, table := range RetentionTables {
			var sz struct {
				Bytes int64 `db:"bytes"`
				Rows  int64 `db:"rows"`
			}
			// The table names are the constants above, not input.
			if err := db.SQL().GetContext(context.WithoutCancel(ctx), &sz, `SELECT pg_total_relation_size('`+table+`') AS bytes,
				(SELECT count(*) FROM `+table+`) AS rows`); err != nil {
				return fmt.Errorf("sample %s: %w", table, err)
			}
			s.Bytes[table], s.Rows[table] = sz.Bytes, sz.Rows
		}
		f.Samples = append(f.Samples, s)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%6.1fs  %s\n", s.AtSec, formatSample(s))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// sampleEvery is how often the retention mode samples: a tenth of the run, between 200 ms
// and 10 s.
func sampleEvery(o Options) time.Duration {
	return min(max(o.Duration/10, 200*time.Millisecond), 10*time.Second)
}

// formatSample writes a sample's sizes, table by table.
func formatSample(s TableSample) string {
	var out string
	for i, table := range RetentionTables {
		if i > 0 {
			out += "  "
		}
		out += fmt.Sprintf("%s %.2f MB (%d rows)", table, float64(s.Bytes[table])/(1<<20), s.Rows[table])
	}
	return out
}

// FormatSample writes a sample's sizes, for the command's summary.
func FormatSample(s TableSample) string { return formatSample(s) }
