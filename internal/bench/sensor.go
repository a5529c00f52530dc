package bench

// The sensor mode: what sensors waiting between their checks cost, and how late their checks
// start. It starts a cluster of real processes as the signal mode does and submits N
// workflows of one reschedule file sensor whose file never appears, checked every Interval.
// Once every sensor has checked once (and paused) it samples the nodes' memory and goroutines
// for the hold time, beside those of the idle cluster: a sensor between checks holds no slot
// and no goroutine, so neither figure may grow with N. Its check lateness is each later
// check's claim (task_attempt.started_at) after the due time the check before set (its
// ended_at plus the interval, as the worker's finish sets wait_until), over the hold.

import (
	"context"
	"fmt"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// SensorFigures are what the sensor mode adds to a [Summary], under "sensor" in its JSON.
type SensorFigures struct {
	// Sensors is how many sensors waited; FillMs how long from the first submit until each
	// had checked once; IntervalMs their interval.
	Sensors    int     `json:"sensors"`
	FillMs     float64 `json:"fill_ms"`
	IntervalMs float64 `json:"interval_ms"`
	// Idle are the nodes sampled before the submission; Held those sampled over the hold.
	Idle []NodeMemory `json:"idle"`
	Held []NodeMemory `json:"held"`
	// MasterRSSMBMax and WorkerRSSMBMax are the largest RSS of any master and any worker
	// over the hold.
	MasterRSSMBMax float64 `json:"master_rss_mb_max"`
	WorkerRSSMBMax float64 `json:"worker_rss_mb_max"`
	// Checks are the checks claimed over the hold after a first one, Lateness their
	// lateness (due → claimed).
	Checks   int             `json:"checks"`
	Lateness dao.Percentiles `json:"lateness"`
	// ZKRoot and Schema are where the run ran; both are gone when it returns.
	ZKRoot string `json:"zk_root"`
	Schema string `json:"schema"`
}

// sensorSpec is the sensor mode's workflow: one file sensor whose file never appears.
func sensorSpec(interval time.Duration) *workflow.Spec {
	return &workflow.Spec{Name: "bench-sensor", Tasks: []workflow.Task{
		{Name: "sense", Type: workflow.TypeSensor, Group: workflow.DefaultGroup,
			File:     &workflow.SensorFile{Path: "/nonexistent/zksched-bench-sensor"},
			Interval: workflow.Duration(interval), Timeout: workflow.Duration(24 * time.Hour)},
	}}
}

// checkSensorOptions fills the defaults of the sensor mode and refuses what cannot run.
func checkSensorOptions(o *Options) error {
	if o.Interval == 0 {
		o.Interval = time.Minute
	}
	return checkProcOptions(o, "sensor", func(check func(bad bool, format string, args ...any)) {
		check(o.N < 1, "-n %d: want at least 1", o.N)
		check(o.Masters < 1, "--masters %d: want at least 1", o.Masters)
		check(o.Workers < 1, "--workers %d: want at least 1", o.Workers)
		check(o.Slots < 1, "--slots %d: want at least 1", o.Slots)
		check(o.Interval < workflow.MinSensorInterval, "--interval %v: want at least %v", o.Interval, workflow.MinSensorInterval)
		check(o.Hold < o.Interval, "--hold %v: want at least the interval, %v, so that each sensor checks again", o.Hold, o.Interval)
	})
}

// sensorBench runs the sensor mode on db, the run's scratch schema.
func sensorBench(ctx context.Context, db *dao.DB, o Options) (*Summary, error) {
	interval := o.Interval
	if interval == 0 {
		interval = time.Minute
	}
	return runOnProcesses(ctx, db, o, "sensor", sensorSpec(interval), checkSensorOptions,
		func(c *procCluster, spec *workflow.Spec, v int) (*Summary, error) {
			r := &memoryRun{procCluster: c}
			for _, n := range c.nodes {
				r.figures = append(r.figures, NodeMemory{Name: n.name, Role: string(n.role), ID: n.id, PID: n.cmd.Process.Pid})
			}
			return sensorRun(ctx, r, spec, v)
		})
}

// sensorLatenessSQL is the lateness of the checks claimed at or after $1 that follow a
// paused check: $2 the interval in milliseconds.
const sensorLatenessSQL = `
	WITH checks AS (
		SELECT started_at, lag(ended_at) OVER (PARTITION BY task_instance_id ORDER BY attempt) AS paused
		FROM task_attempt
	), late AS (
		SELECT greatest(extract(epoch FROM started_at - paused) * 1000 - $2, 0) AS ms
		FROM checks WHERE paused IS NOT NULL AND started_at >= $1
	)
	SELECT count(*) AS n,
		coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), 0) AS p50,
		coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY ms), 0) AS p95,
		coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), 0) AS p99,
		coalesce(max(ms), 0) AS max
	FROM late`

func sensorRun(ctx context.Context, r *memoryRun, spec *workflow.Spec, v int) (*Summary, error) {
	o := r.o
	start, fill, checked, idle, err := r.fill(ctx, spec, v, "sensor", "sensors checked", "checked", `SELECT count(DISTINCT task_instance_id) FROM task_attempt WHERE outcome = 'paused'`)
	if err != nil {
		return nil, err
	}
	var held time.Time
	if err := r.db.SQL().GetContext(ctx, &held, `SELECT now()`); err != nil {
		return nil, err
	}
	r.print(start, fmt.Sprintf("all %d checked once; holding for %v", checked, o.Hold))
	if err := r.hold(ctx); err != nil {
		return nil, err
	}
	r.finish(ctx)
	heldFigures := append([]NodeMemory(nil), r.figures...)
	var late struct {
		N int `db:"n"`
		dao.Percentiles
	}
	if err := r.db.SQL().GetContext(ctx, &late, sensorLatenessSQL, held, o.Interval.Milliseconds()); err != nil {
		return nil, fmt.Errorf("sensor: check lateness: %w", err)
	}
	f := &SensorFigures{Sensors: checked, FillMs: ms(fill), IntervalMs: ms(o.Interval), Idle: idle, Held: heldFigures,
		Checks: late.N, Lateness: late.Percentiles, ZKRoot: r.root, Schema: r.schema}
	for _, nm := range heldFigures {
		switch registry.Role(nm.Role) {
		case registry.RoleMaster:
			f.MasterRSSMBMax = max(f.MasterRSSMBMax, nm.RSSMBMax)
		case registry.RoleWorker:
			f.WorkerRSSMBMax = max(f.WorkerRSSMBMax, nm.RSSMBMax)
		}
	}
	return &Summary{Mode: "sensor", Tasks: checked, Workflows: checked, Seconds: o.Hold.Seconds(),
		P50ms: late.P50, P95ms: late.P95, P99ms: late.P99, Masters: o.Masters, Workers: o.Workers, Slots: o.Slots, Sensor: f}, nil
}
