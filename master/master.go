// Package master drives workflow instances: it claims the ones without an owner, creates
// each task instance once its dependencies are terminal (queued, or skipped below a failure),
// and finishes the instance when every task has. Every write is conditioned on ownership, so
// a master whose instance was released by a failover stops driving it.
//
// Retries and timeouts are decided where the attempt ends, by the worker, from the policy the
// master copied onto the task instance (max_retries, retry_interval, timeout). The
// workflow-level policies are the master's: an instance of a workflow with
// max-active-instances starts only while its workflow has a free slot, one past its workflow
// timeout (measured from its start, on the master's clock against the database's start time)
// fails and has its tasks killed, and its priority is added to every task's.
//
// The Scheduler, in schedule.go, fires the workflows' cron schedules; fire.go holds what it
// shares with the command line: storing a schedule, triggers and backfills.
package master

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// Gate says whether the node may act: it is registered in ZooKeeper and connected.
type Gate interface {
	Active() bool
	// Changed is closed at the next change of Active.
	Changed() <-chan struct{}
}

// Config configures a Master.
type Config struct {
	// ID is the node identity, host:port_startMillis; it is the owner of the instances.
	ID string
	// PollInterval is how often the master rescans without a notification.
	PollInterval time.Duration
	Log          zerolog.Logger
}

// Master drives the workflow instances it owns.
type Master struct {
	cfg  Config
	db   *dao.DB
	gate Gate

	mu    sync.Mutex
	specs map[specKey]*workflow.Spec // definitions never change: cache them
	owned map[int64]struct{}
}

type specKey struct {
	name    string
	version int
}

const claimBatch = 100

// New returns a Master.
func New(cfg Config, db *dao.DB, gate Gate) *Master {
	return &Master{cfg: cfg, db: db, gate: gate, specs: map[specKey]*workflow.Spec{}, owned: map[int64]struct{}{}}
}

// Owned returns how many workflow instances the master drives now.
func (m *Master) Owned() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owned)
}

// Run drives workflows until ctx ends. It wakes on notifications and polls as a fallback.
func (m *Master) Run(ctx context.Context) error {
	wake := m.db.ListenMaster(m.cfg.Log)
	defer wake.Close()
	tick := time.NewTicker(m.cfg.PollInterval)
	defer tick.Stop()
	rescan, claim := true, true
	dirty := map[int64]struct{}{}
	for ctx.Err() == nil {
		if m.gate.Active() {
			if rescan {
				rescan = !m.resync(ctx, dirty)
			}
			if claim {
				claim = !m.claim(ctx, dirty)
			}
			m.advanceAll(ctx, dirty)
		}
		note := func(w dao.Wakeup) {
			switch {
			case w.Rescan:
				rescan, claim = true, true
			case w.Payload == "":
				claim = true
			default:
				if id, err := strconv.ParseInt(w.Payload, 10, 64); err == nil {
					dirty[id] = struct{}{}
				}
			}
		}
		select {
		case <-ctx.Done():
		case w := <-wake.C:
			// Take every wake-up already waiting, so one advance covers them all.
			note(w)
			for drained := false; !drained; {
				select {
				case w := <-wake.C:
					note(w)
				default:
					drained = true
				}
			}
		case <-tick.C:
			rescan, claim = true, true
		case <-m.gate.Changed():
			rescan, claim = true, true
		}
	}
	return nil
}

// resync marks every instance the master owns as dirty, which also picks up changes whose
// notification was lost. It reports success.
func (m *Master) resync(ctx context.Context, dirty map[int64]struct{}) bool {
	ids, err := m.db.WorkflowListOwnedActive(ctx, m.cfg.ID)
	if err != nil {
		m.warn(ctx, err, "list owned workflow instances")
		return false
	}
	owned := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		owned[id] = struct{}{}
		dirty[id] = struct{}{}
	}
	m.mu.Lock()
	m.owned = owned
	m.mu.Unlock()
	return true
}

func (m *Master) claim(ctx context.Context, dirty map[int64]struct{}) bool {
	for {
		got, err := m.db.WorkflowClaimUnowned(ctx, m.cfg.ID, claimBatch)
		if err != nil {
			m.warn(ctx, err, "claim workflow instances")
			return false
		}
		m.own(got, dirty)
		if len(got) < claimBatch {
			break
		}
	}
	// Instances of workflows with max-active-instances start only while their workflow has a
	// free slot; the rest wait, and a finishing instance wakes the masters to look again.
	got, err := m.db.WorkflowClaimWaiting(ctx, m.cfg.ID, claimBatch)
	m.own(got, dirty)
	if err != nil {
		m.warn(ctx, err, "admit waiting workflow instances")
		return false
	}
	return true
}

func (m *Master) own(got []dao.WorkflowInstance, dirty map[int64]struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, wf := range got {
		m.owned[wf.ID] = struct{}{}
		dirty[wf.ID] = struct{}{}
		m.cfg.Log.Info().Int64("workflow_instance", wf.ID).Str("workflow", wf.WorkflowName).Msg("claimed workflow instance")
	}
}

// advanceBatch is how many workflow instances one advance transaction takes: one statement
// locks them, one lists their tasks, one creates the new task instances and one finishes the
// instances that are done, whatever the batch's size.
const advanceBatch = 100

func (m *Master) advanceAll(ctx context.Context, dirty map[int64]struct{}) {
	for len(dirty) > 0 {
		if !m.gate.Active() || ctx.Err() != nil {
			return
		}
		ids := make([]int64, 0, min(len(dirty), advanceBatch))
		m.mu.Lock()
		for id := range dirty {
			if len(ids) == advanceBatch {
				break
			}
			delete(dirty, id)
			if _, mine := m.owned[id]; mine {
				ids = append(ids, id)
			}
		}
		m.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		if err := m.advance(ctx, ids); err != nil {
			m.warn(ctx, err, "advance workflow instances")
			for _, id := range ids {
				dirty[id] = struct{}{}
			}
			return // the database is likely down: try again at the next wake-up
		}
	}
}

func (m *Master) forget(id int64) {
	m.mu.Lock()
	delete(m.owned, id)
	m.mu.Unlock()
}

// advance moves workflow instances forward in one transaction that holds their rows: a
// failover that releases one waits for it, and those this master no longer owns are left
// alone (and forgotten).
func (m *Master) advance(ctx context.Context, ids []int64) error {
	var finished []plan
	var finishedIDs, lost []int64
	err := m.db.Tx(ctx, func(q *dao.Queries) error {
		finished, finishedIDs, lost = nil, nil, nil
		wfs, err := q.WorkflowLockManyIfOwned(ctx, ids, m.cfg.ID)
		if err != nil {
			return err
		}
		locked := make(map[int64]bool, len(wfs))
		wfIDs := make([]int64, len(wfs))
		for i, wf := range wfs {
			locked[wf.ID], wfIDs[i] = true, wf.ID
		}
		for _, id := range ids {
			if !locked[id] {
				lost = append(lost, id)
			}
		}
		all, err := q.TaskListByWorkflows(ctx, wfIDs)
		if err != nil {
			return err
		}
		tasksOf := make(map[int64][]dao.TaskInstance, len(wfs))
		for _, t := range all {
			tasksOf[t.WorkflowInstanceID] = append(tasksOf[t.WorkflowInstanceID], t)
		}
		var rows []dao.NewTask
		var fins []dao.WorkflowFinish
		for i := range wfs {
			wf := &wfs[i]
			spec, err := m.spec(ctx, q, wf.WorkflowName, wf.WorkflowVersion)
			if err != nil {
				return err
			}
			// The database's clock decides, the one ended_at is set by: no skew between hosts.
			if d := time.Duration(spec.Timeout); d > 0 && wf.RunningMs != nil && time.Duration(*wf.RunningMs)*time.Millisecond >= d {
				msg := "workflow timeout " + d.String() + " exceeded"
				stopping, err := q.WorkflowTimeOutIfOwned(ctx, wf.ID, m.cfg.ID, msg)
				if err != nil {
					return err
				}
				finished = append(finished, plan{done: true, state: dao.WorkflowFailed, err: fmt.Sprintf("%s; killing %d running tasks", msg, stopping)})
				finishedIDs = append(finishedIDs, wf.ID)
				continue
			}
			tasks := tasksOf[wf.ID]
			states := make(map[string]dao.TaskState, len(tasks))
			for _, t := range tasks {
				states[t.Name] = t.State
			}
			p := advance(spec, states)
			if len(p.create) > 0 {
				params, err := instanceParams(spec, wf.Params)
				if err != nil {
					return fmt.Errorf("workflow instance %d: %w", wf.ID, err)
				}
				for _, c := range p.create {
					raw, err := json.Marshal(workflow.TaskParams{Task: *c.task, Params: params, Upstream: upstream(c.task, tasks)})
					if err != nil {
						return err
					}
					rows = append(rows, dao.NewTask{WorkflowInstanceID: wf.ID, Name: c.task.Name, Type: c.task.Type, Params: raw,
						State: c.state, Priority: c.task.Priority + wf.Priority, Group: c.task.Group, Pool: c.task.Pool,
						MaxRetries: c.task.Retries, RetryInterval: time.Duration(c.task.RetryInterval),
						Timeout: time.Duration(c.task.Timeout)})
				}
			}
			if p.done {
				fins = append(fins, dao.WorkflowFinish{ID: wf.ID, State: p.state, Error: p.err})
				finished = append(finished, p)
				finishedIDs = append(finishedIDs, wf.ID)
			}
		}
		if _, err := q.TaskInsertMany(ctx, rows); err != nil {
			return err
		}
		// The rows are locked and running under this owner, so every one of them finishes.
		_, err = q.WorkflowFinishManyIfOwned(ctx, m.cfg.ID, fins)
		return err
	})
	if err != nil {
		return err
	}
	for _, id := range lost {
		m.cfg.Log.Info().Int64("workflow_instance", id).Msg("no longer the owner, or finished; stopped driving it")
		m.forget(id)
	}
	for i, id := range finishedIDs {
		m.forget(id)
		p := finished[i]
		ev := m.cfg.Log.Info()
		if p.state != dao.WorkflowSucceeded {
			ev = m.cfg.Log.Warn().Str("error", p.err)
		}
		ev.Int64("workflow_instance", id).Str("state", string(p.state)).Msg("workflow instance finished")
	}
	return nil
}

// spec returns a workflow definition, from the cache when it can.
func (m *Master) spec(ctx context.Context, q *dao.Queries, name string, version int) (*workflow.Spec, error) {
	k := specKey{name, version}
	m.mu.Lock()
	s, ok := m.specs[k]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	raw, err := q.DefinitionGet(ctx, name, version)
	if err != nil {
		return nil, err
	}
	s = new(workflow.Spec)
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, fmt.Errorf("definition %s version %d: %w", name, version, err)
	}
	m.mu.Lock()
	m.specs[k] = s
	m.mu.Unlock()
	return s, nil
}

// upstream returns the outputs of t's dependencies among the workflow instance's tasks,
// which are all finished when t is created: downstream tasks get them in their params.
func upstream(t *workflow.Task, tasks []dao.TaskInstance) map[string]workflow.Upstream {
	if len(t.DependsOn) == 0 {
		return nil
	}
	out := make(map[string]workflow.Upstream, len(t.DependsOn))
	for _, ti := range tasks {
		if !slices.Contains(t.DependsOn, ti.Name) {
			continue
		}
		var u workflow.Upstream
		if ti.Output != nil {
			u.Output = *ti.Output
		}
		out[ti.Name] = u
	}
	return out
}

// instanceParams are the definition's default parameters overridden by the instance's.
func instanceParams(spec *workflow.Spec, raw json.RawMessage) (map[string]string, error) {
	params := maps.Clone(spec.Params)
	if params == nil {
		params = map[string]string{}
	}
	var given map[string]string
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &given); err != nil {
			return nil, fmt.Errorf("instance params: %w", err)
		}
	}
	maps.Copy(params, given)
	return params, nil
}

func (m *Master) warn(ctx context.Context, err error, what string) {
	if ctx.Err() != nil {
		return
	}
	m.cfg.Log.Warn().Err(err).Msg(what + " failed; retrying")
}
