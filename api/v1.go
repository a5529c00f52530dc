package api

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// The JSON API, /api/v1. Every list is newest first with keyset pagination: a response
// carries "older" and "newer" cursors, passed back as ?before= and ?after=.

// pageJSON is a page of a list.
type pageJSON[T any] struct {
	Items []T `json:"items"`
	// Older is the ?before= of the next, older page; absent on the last one.
	Older int64 `json:"older,omitempty"`
	// Newer is the ?after= of the previous, newer page; absent on the first one.
	Newer int64 `json:"newer,omitempty"`
}

func toPage[T, U any](p dao.Page[T], conv func(T) U) pageJSON[U] {
	out := pageJSON[U]{Items: make([]U, 0, len(p.Items)), Older: p.Older, Newer: p.Newer}
	for _, it := range p.Items {
		out.Items = append(out.Items, conv(it))
	}
	return out
}

func (s *Server) apiTasks(w http.ResponseWriter, r *http.Request) error {
	page, _, err := s.loadTaskList(r.Context(), r.URL.Query())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toPage(page, func(t dao.TaskRow) dao.TaskRow { return t }))
	return nil
}

// taskJSON is a task instance in full.
type taskJSON struct {
	ID                 int64           `json:"id"`
	WorkflowInstanceID int64           `json:"workflow_instance_id"`
	WorkflowName       string          `json:"workflow_name"`
	Name               string          `json:"name"`
	Type               string          `json:"type"`
	State              dao.TaskState   `json:"state"`
	Priority           int             `json:"priority"`
	WorkerGroup        string          `json:"worker_group"`
	Pool               *string         `json:"pool"`
	WorkerID           *string         `json:"worker_id"`
	Attempt            int             `json:"attempt"`
	Retries            int             `json:"retries"`
	MaxRetries         int             `json:"max_retries"`
	RetryInterval      string          `json:"retry_interval"`
	Timeout            string          `json:"timeout,omitempty"`
	NotBefore          *time.Time      `json:"not_before"`
	FailoverCount      int             `json:"failover_count"`
	KillRequested      bool            `json:"kill_requested"`
	Params             json.RawMessage `json:"params"`
	Output             *string         `json:"output"`
	Error              *string         `json:"error"`
	ExitCode           *int            `json:"exit_code"`
	// Usage is the token usage of the task's result (LLM and agent tasks).
	Usage     *json.RawMessage `json:"usage,omitempty"`
	QueuedAt  time.Time        `json:"queued_at"`
	StartedAt *time.Time       `json:"started_at"`
	EndedAt   *time.Time       `json:"ended_at"`
	// EndReason is why the task ended when something other than its own result ended it
	// (dao.EndReason), null otherwise.
	EndReason *dao.EndReason `json:"end_reason"`
	// ChildWorkflowInstanceID is the instance a workflow task started (details only).
	ChildWorkflowInstanceID *int64 `json:"child_workflow_instance_id,omitempty"`
	// PausedStep is the wait step a paused agent waits at for its signal.
	PausedStep *string `json:"paused_step,omitempty"`
	// ItemCount is set on the parent of a for-each task's items alone: how many it has.
	ItemCount *int `json:"item_count,omitempty"`
	// NextAttemptAt is when the next attempt of a task queued for a retry is due (its
	// retry-interval or retry-backoff after the failed attempt's end); null otherwise.
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	// OutputTruncated marks Output as the first bytes of a longer output: it was over the
	// task's output-limit and the task said output-overflow: truncate.
	OutputTruncated bool `json:"output_truncated"`
}

// TaskView is a task instance as the API shows it, for the CLI's status to show the same.
type TaskView = taskJSON

// TaskViewOf is the API's view of t, an instance of the workflow wfName.
func TaskViewOf(t dao.TaskInstance, wfName string) TaskView { return taskToJSON(t, wfName) }

func taskToJSON(t dao.TaskInstance, wfName string) taskJSON {
	j := taskJSON{ID: t.ID, WorkflowInstanceID: t.WorkflowInstanceID, WorkflowName: wfName, Name: t.Name,
		Type: t.Type, State: t.State, Priority: t.Priority, WorkerGroup: t.WorkerGroup, Pool: t.Pool,
		WorkerID: t.WorkerID, Attempt: t.Attempt, Retries: t.Retries, MaxRetries: t.MaxRetries,
		RetryInterval: t.RetryInterval().String(), NotBefore: t.NotBefore, NextAttemptAt: t.NextAttemptAt(), FailoverCount: t.FailoverCount,
		KillRequested: t.KillRequested, Params: t.Params, Output: t.Output, Error: t.Error, ExitCode: t.ExitCode, Usage: t.Usage,
		QueuedAt: t.QueuedAt, StartedAt: t.StartedAt, EndedAt: t.EndedAt, EndReason: t.EndReason, PausedStep: t.PausedStep,
		ItemCount: t.ItemCount, OutputTruncated: t.OutputTruncated}
	if d := t.Timeout(); d > 0 {
		j.Timeout = d.String()
	}
	return j
}

type attemptJSON struct {
	Attempt   int         `json:"attempt"`
	WorkerID  string      `json:"worker_id"`
	StartedAt time.Time   `json:"started_at"`
	EndedAt   *time.Time  `json:"ended_at"`
	Outcome   *string     `json:"outcome"`
	ExitCode  *int        `json:"exit_code"`
	Error     *string     `json:"error"`
	Failover  *failoverJS `json:"failover,omitempty"`
	// Usage is the token usage of the attempt's own model calls.
	Usage *json.RawMessage `json:"usage,omitempty"`
}

// failoverJS explains a failed_over attempt: its worker was lost at LostAt and fenced by
// Leader at FencedAt.
type failoverJS struct {
	From     string    `json:"from"`
	LostAt   time.Time `json:"lost_at"`
	FencedAt time.Time `json:"fenced_at"`
	FencedBy string    `json:"fenced_by"`
}

type checkpointJSON struct {
	Step      string          `json:"step"`
	Attempt   int             `json:"attempt"`
	Output    string          `json:"output"`
	Usage     json.RawMessage `json:"usage"`
	CreatedAt time.Time       `json:"created_at"`
}

type taskDetailJSON struct {
	taskJSON
	Attempts    []attemptJSON    `json:"attempts"`
	Checkpoints []checkpointJSON `json:"checkpoints"`
	// AgentLoop is a tool-calling agent's conversation; absent for other tasks.
	AgentLoop  *agentLoopJSON `json:"agent_loop,omitempty"`
	TokenUsage tokenUsage     `json:"token_usage"`
	// Log is the tail of the latest attempt's log; /log reads more.
	Log *dao.LogTail `json:"log,omitempty"`
}

const defaultTailBytes = 64 << 10

func (s *Server) apiTask(w http.ResponseWriter, r *http.Request) error {
	d, _, err := s.loadTask(r)
	if err != nil {
		return err
	}
	out := taskDetailJSON{taskJSON: taskToJSON(d.Task, d.Workflow.WorkflowName), Attempts: []attemptJSON{},
		Checkpoints: []checkpointJSON{}, TokenUsage: d.Usage}
	out.ChildWorkflowInstanceID = d.Child
	out.AgentLoop = d.Loop
	for _, a := range d.Attempts {
		aj := attemptJSON{Attempt: a.Attempt, WorkerID: a.WorkerID, StartedAt: a.StartedAt, EndedAt: a.EndedAt,
			ExitCode: a.ExitCode, Error: a.Error, Usage: a.Usage}
		if a.Outcome != nil {
			o := string(*a.Outcome)
			aj.Outcome = &o
		}
		if ev := a.Failover; ev != nil {
			aj.Failover = &failoverJS{From: a.WorkerID, LostAt: ev.LostAt, FencedAt: ev.FencedAt, FencedBy: ev.Leader}
		}
		out.Attempts = append(out.Attempts, aj)
	}
	for _, c := range d.Checkpoints {
		out.Checkpoints = append(out.Checkpoints, checkpointJSON{Step: c.Step, Attempt: c.Attempt, Output: c.Output,
			Usage: c.Checkpoint.Usage, CreatedAt: c.CreatedAt})
	}
	if d.Task.Attempt > 0 {
		tail, err := s.db.TaskLogTail(r.Context(), d.Task.ID, d.Task.Attempt, -1, defaultTailBytes)
		if err != nil {
			return err
		}
		out.Log = &tail
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// logJSON is part of an attempt's log with the state of its task when it was read.
type logJSON struct {
	dao.LogTail
	// Running is read before the log: while it is true more may come, once it is false the
	// log has all the attempt's output (a worker writes only under its running attempt).
	Running bool `json:"running"`
	// TaskState is the task's state, read with Running: a task that has not run yet (attempt
	// 0) may still run while it is queued.
	TaskState dao.TaskState `json:"task_state"`
}

// apiTaskLog reads an attempt's log: ?attempt= (default the latest), then either ?from_seq=
// (chunks from there on, to follow a running task) or ?tail_bytes= (the end; default 64 KiB).
func (s *Server) apiTaskLog(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "task instance")
	if err != nil {
		return err
	}
	q, err := newQuery(r.URL.Query(), "attempt", "from_seq", "tail_bytes")
	if err != nil {
		return err
	}
	t, err := s.db.TaskGet(r.Context(), id)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("task instance", id)
		}
		return err
	}
	attempt, err := q.intRange("attempt", t.Attempt, 1, max(t.Attempt, 1))
	if err != nil {
		return err
	}
	from, err := q.intRange("from_seq", -1, 0, 1<<30)
	if err != nil {
		return err
	}
	tailBytes, err := q.intRange("tail_bytes", defaultTailBytes, 1, 64<<20)
	if err != nil {
		return err
	}
	tail, err := s.db.TaskLogTail(r.Context(), id, attempt, from, tailBytes)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, logJSON{LogTail: tail, Running: t.State == dao.TaskRunning && t.Attempt == attempt, TaskState: t.State})
	return nil
}

func (s *Server) apiTaskKill(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "task instance")
	if err != nil {
		return err
	}
	res, err := s.killTask(r, id)
	if err != nil {
		return err
	}
	body := map[string]any{"task_instance": id, "state": res.State, "attempt": res.Attempt}
	if res.State == dao.TaskKilled {
		body["message"] = "killed before it ran"
		writeJSON(w, http.StatusOK, body)
		return nil
	}
	if res.State == dao.TaskWaiting {
		body["message"] = "kill requested: the for-each's queued items are killed, the workers of its running ones stop them, " +
			"no further item is created, and it becomes killed once they have ended"
		writeJSON(w, http.StatusAccepted, body)
		return nil
	}
	body["worker"] = res.WorkerID
	body["message"] = "kill requested: the worker stops the attempt and the task becomes killed"
	writeJSON(w, http.StatusAccepted, body)
	return nil
}

// signalJSON is the body of a signal: the waiting task's output, and whether it fails.
type signalJSON struct {
	Output string `json:"output"`
	Fail   bool   `json:"fail"`
}

// apiTaskSignal ends the waiting task instance {id} with the body's output, succeeded, or
// failed with it as its error when fail is true: 200. A paused agent is resumed instead of
// succeeding (state queued, paused_step the step the output was given to). A task that is
// not waiting (signalled already, timed out, killed, or neither a wait task nor a paused
// agent) answers 409 and changes nothing.
func (s *Server) apiTaskSignal(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "task instance")
	if err != nil {
		return err
	}
	var body signalJSON
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	res, err := s.signalTask(r, id, body)
	if err != nil {
		return err
	}
	out := map[string]any{"task_instance": id, "workflow_instance": res.WorkflowInstanceID, "state": res.State}
	if res.PausedStep != nil {
		out["paused_step"] = *res.PausedStep
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type rerunJSON struct {
	WorkflowInstanceID int64   `json:"workflow_instance"`
	Requeued           []int64 `json:"requeued"`
	DeletedSkipped     int     `json:"deleted_skipped"`
	Reopened           bool    `json:"reopened"`
}

func (s *Server) apiTaskRerun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "task instance")
	if err != nil {
		return err
	}
	res, wf, err := s.rerunTask(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rerunJSON{WorkflowInstanceID: wf, Requeued: res.Requeued, DeletedSkipped: res.Deleted, Reopened: res.Reopened})
	return nil
}

// workflowJSON is a workflow instance.
type workflowJSON struct {
	ID              int64             `json:"id"`
	WorkflowName    string            `json:"workflow_name"`
	WorkflowVersion int               `json:"workflow_version"`
	State           dao.WorkflowState `json:"state"`
	Owner           *string           `json:"owner"`
	Params          json.RawMessage   `json:"params"`
	Priority        int               `json:"priority"`
	// ConcurrencyKey is the key its workflow's concurrency: rendered for it, null for none.
	ConcurrencyKey *string    `json:"concurrency_key"`
	Error          *string    `json:"error"`
	CreatedAt      time.Time  `json:"created_at"`
	StartedAt      *time.Time `json:"started_at"`
	EndedAt        *time.Time `json:"ended_at"`
	// EndReason is why the instance ended when something other than its tasks' ends ended it
	// (dao.EndReason), null otherwise.
	EndReason *dao.EndReason `json:"end_reason"`
	// TaskStates counts the task instances by state.
	TaskStates dao.TaskStateCounts `json:"task_states,omitempty"`
	// ParentWorkflowInstanceID and ParentTaskInstanceID are where a child workflow instance
	// came from: the workflow task that started it and that task's instance (details only).
	// The task is left out once a rerun has replaced it.
	ParentWorkflowInstanceID *int64 `json:"parent_workflow_instance_id,omitempty"`
	ParentTaskInstanceID     *int64 `json:"parent_task_instance_id,omitempty"`
}

func workflowToJSON(w dao.WorkflowInstance) workflowJSON {
	return workflowJSON{ID: w.ID, WorkflowName: w.WorkflowName, WorkflowVersion: w.WorkflowVersion, State: w.State,
		Owner: w.Owner, Params: w.Params, Priority: w.Priority, ConcurrencyKey: w.ConcurrencyKey, Error: w.Error, CreatedAt: w.CreatedAt,
		StartedAt: w.StartedAt, EndedAt: w.EndedAt, EndReason: w.EndReason}
}

func (s *Server) apiWorkflows(w http.ResponseWriter, r *http.Request) error {
	page, err := s.loadWorkflowList(r.Context(), r.URL.Query())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toPage(page, func(row dao.WorkflowRow) workflowJSON {
		j := workflowToJSON(row.WorkflowInstance)
		j.TaskStates = row.TaskStates
		return j
	}))
	return nil
}

// workflowDetailJSON is a workflow instance with its tasks counted by state (task_states), one
// page of its tasks by id, and its graph.
type workflowDetailJSON struct {
	workflowJSON
	Tasks []taskJSON `json:"tasks"`
	// TasksNext is the ?after= of the next page of tasks; absent on the last one.
	TasksNext int64 `json:"tasks_next,omitempty"`
	// TasksPrev is the ?before= of the previous page of tasks; absent on the first one.
	TasksPrev int64 `json:"tasks_prev,omitempty"`
	Graph     graph `json:"graph"`
}

func (s *Server) apiWorkflow(w http.ResponseWriter, r *http.Request) error {
	d, err := s.loadWorkflow(r)
	if err != nil {
		return err
	}
	out := workflowDetailJSON{workflowJSON: workflowToJSON(d.Workflow), Tasks: []taskJSON{}, Graph: d.Graph,
		TasksNext: d.Tasks.Next, TasksPrev: d.Tasks.Prev}
	out.TaskStates = d.TaskStates
	out.ParentWorkflowInstanceID, out.ParentTaskInstanceID = d.Parent.Workflow, d.Parent.Task
	for _, t := range d.Tasks.Items {
		j := taskToJSON(t, d.Workflow.WorkflowName)
		if c, ok := d.Children[t.ID]; ok {
			j.ChildWorkflowInstanceID = &c
		}
		out.Tasks = append(out.Tasks, j)
	}
	if out.Graph.Edges == nil {
		out.Graph.Edges = []graphEdge{}
	}
	if out.Graph.Nodes == nil {
		out.Graph.Nodes = []graphNode{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workflowCreateJSON is the body of POST /api/v1/workflow-instances.
type workflowCreateJSON struct {
	Name string `json:"name"`
	// Version defaults to the latest.
	Version int               `json:"version"`
	Params  map[string]string `json:"params"`
	// Priority defaults to the workflow's own (its file's priority field).
	Priority *int `json:"priority"`
}

func (s *Server) apiWorkflowCreate(w http.ResponseWriter, r *http.Request) error {
	var body workflowCreateJSON
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	auditOf(r).setParams(body)
	if body.Name == "" {
		return badRequest("name is required")
	}
	id, version, again, err := s.submitStored(r, body)
	if err != nil {
		return err
	}
	if again {
		// The key's first submission made the instance: answer as it was answered.
		wf, err := s.db.WorkflowGet(r.Context(), id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "workflow_name": wf.WorkflowName, "workflow_version": wf.WorkflowVersion, "replayed": true})
		return nil
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": id, "workflow_name": body.Name, "workflow_version": version})
	return nil
}

// idempotencyKeyHeader names the header of a submission that a retry of it repeats, so that
// whichever master gets it creates one instance (lifecycle.SubmitOnce): a key the user sent
// within Config.HookDedupeWindow answers 200 with the instance of its first submission.
const idempotencyKeyHeader = "Idempotency-Key"

// idempotencyKey returns the request's Idempotency-Key, "" for none.
func idempotencyKey(r *http.Request) (string, error) {
	v := r.Header.Get(idempotencyKeyHeader)
	if len(v) > maxDeliveryID || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return "", badRequest("the %s header is not a key: at most %d bytes of text", idempotencyKeyHeader, maxDeliveryID)
	}
	return v, nil
}

// submitStored submits an instance of a stored definition, for the API and the UI's run
// form alike, so both refuse the same params with the same messages: a 400 whose error
// unwraps to the problems, each a *workflow.Error naming its param. It returns the instance
// and the version it runs (body.Version, or the latest for 0), and records the submission in
// the request's audit row. With an Idempotency-Key, again says that the key's first
// submission created the instance, and nothing was done.
func (s *Server) submitStored(r *http.Request, body workflowCreateJSON) (id int64, version int, again bool, err error) {
	st := auditOf(r)
	st.setTarget("definition/" + body.Name)
	key, err := idempotencyKey(r)
	if err != nil {
		return 0, 0, false, err
	}
	if err := workflow.CheckParams(body.Params); err != nil {
		return 0, 0, false, paramsRefused(err)
	}
	version = body.Version
	if version == 0 {
		latest, err := s.db.DefinitionLatest(r.Context(), body.Name)
		if err != nil {
			return 0, 0, false, err
		}
		if latest == 0 {
			return 0, 0, false, errorf(http.StatusNotFound, "no workflow definition %q", clipName(body.Name))
		}
		version = latest
	}
	params, err := json.Marshal(body.Params)
	if err != nil {
		return 0, 0, false, err
	}
	spec, err := s.specs.Get(r.Context(), s.db.Queries, body.Name, version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, errorf(http.StatusNotFound, "workflow definition %q has no version %d", clipName(body.Name), version)
	}
	if err != nil {
		return 0, 0, false, err
	}
	priority := body.Priority
	if priority == nil {
		priority = &spec.Priority
	}
	// Definitions never change, so nothing needs the lookups and the creation in one
	// transaction; submissions arriving together share a statement and a commit, each with
	// its audit row.
	st.setParams(workflowCreateJSON{Name: body.Name, Version: version, Params: body.Params, Priority: priority})
	ev := s.auditEvent(r)
	sub := lifecycle.Submission{Spec: spec, Version: version, Params: params, Priority: *priority, Audit: &ev}
	if key != "" {
		id, again, err = lifecycle.SubmitOnce(r.Context(), s.db, sub, principalOf(r).Name, key, clientAddr(r), s.cfg.HookDedupeWindow)
	} else {
		id, err = lifecycle.SubmitNow(r.Context(), s.db, sub)
	}
	var keyErr *lifecycle.KeyError
	if errors.As(err, &keyErr) {
		return 0, 0, false, badRequest("not submitted: %v", err)
	}
	var paramsErr *lifecycle.ParamsError
	if errors.As(err, &paramsErr) {
		return 0, 0, false, paramsRefused(err)
	}
	if err != nil {
		return 0, 0, false, err
	}
	if again {
		logFor(r).Info().Int64("workflow_instance", id).Str("idempotency_key", key).Msg("workflow submission repeated: nothing submitted")
		return id, version, true, nil
	}
	auditDone(r)
	logFor(r).Info().Int64("workflow_instance", id).Str("workflow", body.Name).Int("version", version).Msg("workflow instance submitted")
	return id, version, false, nil
}

// paramsRefused is the 400 of a submission whose params err refuses.
func paramsRefused(err error) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf("the params are rejected, nothing submitted:\n%v", err), err: err}
}

func (s *Server) apiWorkflowStop(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "workflow instance")
	if err != nil {
		return err
	}
	res, err := s.stopWorkflow(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"workflow_instance": id, "state": dao.WorkflowStopped,
		"killed": res.Killed, "kill_requested": res.KillRequested})
	return nil
}

func (s *Server) apiWorkflowRerun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "workflow instance")
	if err != nil {
		return err
	}
	res, err := s.rerunWorkflow(r, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rerunJSON{WorkflowInstanceID: id, Requeued: res.Requeued, DeletedSkipped: res.Deleted, Reopened: res.Reopened})
	return nil
}

// apiDefinitions lists the workflow definitions by name, a page at a time: ?limit= (default
// 50) and ?after=NAME, the "next" of the page before.
func (s *Server) apiDefinitions(w http.ResponseWriter, r *http.Request) error {
	defs, next, err := s.definitionPage(r, r.URL.Query())
	if err != nil {
		return err
	}
	if defs == nil {
		defs = []dao.DefinitionSummary{}
	}
	out := map[string]any{"items": defs}
	if next != "" {
		out["next"] = next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// definitionPage reads ?after= and ?limit= from v and returns that page of definitions.
func (s *Server) definitionPage(r *http.Request, v url.Values) ([]dao.DefinitionSummary, string, error) {
	q, err := newQuery(v, "after", "limit")
	if err != nil {
		return nil, "", err
	}
	after, err := q.str("after", 128)
	if err != nil {
		return nil, "", err
	}
	limit, err := q.intRange("limit", defaultPageSize, 1, 1000)
	if err != nil {
		return nil, "", err
	}
	return s.db.DefinitionList(r.Context(), after, limit)
}

// apiDefinitionSubmit stores a workflow file (YAML, the format of `zksched submit`) as a new
// version of its definition, unless the latest version is the same.
func (s *Server) apiDefinitionSubmit(w http.ResponseWriter, r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" ||
			mt == "text/plain" || mt == "application/json") {
			return errorf(http.StatusUnsupportedMediaType, "content type %q: send the workflow file as application/yaml", ct)
		}
	}
	spec, body, err := s.parseDefinition(r)
	if err != nil {
		return err
	}
	auditOf(r).setTarget("definition/" + spec.Name)
	ev := s.auditEvent(r)
	stored, err := lifecycle.Define(r.Context(), s.db, lifecycle.Definition{Spec: spec, File: body, By: &ev}, time.Now())
	if err != nil {
		return err
	}
	version, sched := stored.Version, stored.Schedule
	auditDone(r)
	logFor(r).Info().Str("workflow", spec.Name).Int("version", version).Msg("workflow definition stored")
	out := map[string]any{"name": spec.Name, "version": version}
	if sched != nil {
		out["schedule"] = map[string]any{"enabled": sched.Enabled, "next_fire_at": sched.NextFireAt}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parseDefinition reads and parses the workflow file of a request, waiting for a place
// among maxConcurrentParses first. It returns the file too, for what records it.
func (s *Server) parseDefinition(r *http.Request) (*workflow.Spec, []byte, error) {
	select {
	case s.parses <- struct{}{}:
		defer func() { <-s.parses }()
	case <-r.Context().Done():
		return nil, nil, r.Context().Err()
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	spec, err := workflow.Parse(body)
	if err == nil {
		err = errors.Join(spec.CheckWebhookEnv(s.cfg.WebhookEnvPattern), spec.CheckHookSecretEnv(s.cfg.HookSecretEnvPattern), spec.CheckWorkdirs())
	}
	if err != nil {
		return nil, nil, badRequest("the workflow file is rejected, nothing stored:\n%v", err)
	}
	return spec, body, nil
}

// definitionVersionJSON is a version of a definition with its declared params, from which a
// form to run it can be drawn.
type definitionVersionJSON struct {
	dao.DefinitionVersion
	// Params are the params the workflow declares, sorted by name.
	Params []workflow.ParamView `json:"params"`
	// ParamsExtra says that a run may give params beyond Params (params-extra: allow).
	ParamsExtra bool `json:"params_extra"`
}

// apiDefinitionVersions lists the versions of definition {name}, newest first, a page at a
// time (?limit=, ?before=, ?after=, by version number), without their specs: a definition can
// have thousands of versions, and /versions/{version} has each spec.
func (s *Server) apiDefinitionVersions(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	q, err := newQuery(r.URL.Query(), "before", "after", "limit")
	if err != nil {
		return err
	}
	c, err := q.cursor()
	if err != nil {
		return err
	}
	page, err := s.db.DefinitionVersionPage(r.Context(), name, c)
	if err != nil {
		return err
	}
	if len(page.Items) == 0 && c.Before == 0 && c.After == 0 {
		return errorf(http.StatusNotFound, "no workflow definition %q", clipName(name))
	}
	writeJSON(w, http.StatusOK, struct {
		Name string `json:"name"`
		pageJSON[dao.DefinitionVersionRow]
	}{name, toPage(page, func(v dao.DefinitionVersionRow) dao.DefinitionVersionRow { return v })})
	return nil
}

func (s *Server) apiDefinitionVersion(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	v, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || v <= 0 {
		return badRequest("%q is not a version number", clipName(r.PathValue("version")))
	}
	if _, err := newQuery(r.URL.Query()); err != nil {
		return err
	}
	dv, err := s.db.DefinitionVersionGet(r.Context(), name, v)
	if errors.Is(err, sql.ErrNoRows) {
		return errorf(http.StatusNotFound, "workflow definition %q has no version %d", clipName(name), v)
	}
	if err != nil {
		return err
	}
	spec, err := s.specs.Get(r.Context(), s.db.Queries, name, v)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, definitionVersionJSON{DefinitionVersion: dv, Params: spec.DeclaredParams(),
		ParamsExtra: spec.ParamsExtra == workflow.ParamsExtraAllow})
	return nil
}

// clipName cuts a name from a request to 128 bytes, the longest a name can be, for messages.
func clipName(s string) string {
	if len(s) <= 128 {
		return s
	}
	return strings.ToValidUTF8(s[:128], "") + "…"
}

type nodeJSON struct {
	ID     string             `json:"id"`
	Leader bool               `json:"leader,omitempty"`
	Info   *registry.NodeInfo `json:"info,omitempty"`
	// HeartbeatAge is how long ago the node last refreshed its znode, in seconds.
	HeartbeatAge *float64 `json:"heartbeat_age_s,omitempty"`
	// RunningTasks are a worker's running task instances, from PostgreSQL.
	RunningTasks []int64 `json:"running_tasks,omitempty"`
	// Error and Raw are set when the znode's data does not parse.
	Error string `json:"error,omitempty"`
	Raw   string `json:"raw,omitempty"`
}

type markerJSON struct {
	ID     string                `json:"id"`
	Role   registry.Role         `json:"role"`
	Record *registry.FenceRecord `json:"record,omitempty"`
	Error  string                `json:"error,omitempty"`
	Raw    string                `json:"raw,omitempty"`
}

func (s *Server) apiCluster(w http.ResponseWriter, r *http.Request) error {
	v, err := s.loadCluster(r)
	if err != nil {
		return err
	}
	if v.Err != nil {
		return errorf(http.StatusServiceUnavailable, "zookeeper could not be read: %v", v.Err)
	}
	now := time.Now()
	node := func(n nodeView) nodeJSON {
		j := nodeJSON{ID: n.ID, Leader: n.Leader, Info: n.Info, RunningTasks: n.RunningTasks}
		if n.Err != nil {
			j.Error, j.Raw = n.Err.Error(), string(n.Raw)
		} else if n.Info != nil && !n.Info.HeartbeatAt.IsZero() {
			age := now.Sub(n.Info.HeartbeatAt).Seconds()
			j.HeartbeatAge = &age
		}
		return j
	}
	out := map[string]any{"masters": []nodeJSON{}, "workers": []nodeJSON{}, "fenced": []markerJSON{}}
	if v.Leader != "" {
		out["leader"] = v.Leader
	} else {
		out["leader"] = nil
	}
	var masters, workers []nodeJSON
	for _, n := range v.Masters {
		masters = append(masters, node(n))
	}
	for _, n := range v.Workers {
		workers = append(workers, node(n))
	}
	var fenced []markerJSON
	for _, m := range v.Fenced {
		j := markerJSON{ID: m.ID, Role: m.Role}
		if m.Err != nil {
			j.Error, j.Raw = m.Err.Error(), string(m.Raw)
		} else {
			rec := m.Record
			j.Record = &rec
		}
		fenced = append(fenced, j)
	}
	if masters != nil {
		out["masters"] = masters
	}
	if workers != nil {
		out["workers"] = workers
	}
	if fenced != nil {
		out["fenced"] = fenced
	}
	out["failovers"] = failoversJSON(v.Failovers)
	out["zookeeper"] = append([]registry.Member{}, v.ZooKeeper...)
	out["postgres"] = append([]registry.Member{}, v.Postgres...)
	writeJSON(w, http.StatusOK, out)
	return nil
}

type failoverEventJSON struct {
	ID                int64      `json:"id"`
	NodeID            string     `json:"node_id"`
	Role              string     `json:"role"`
	LostAt            time.Time  `json:"lost_at"`
	FencedAt          time.Time  `json:"fenced_at"`
	FinishedAt        *time.Time `json:"finished_at"`
	Leader            string     `json:"leader"`
	TasksRequeued     int        `json:"tasks_requeued"`
	WorkflowsReleased int        `json:"workflows_released"`
}

func failoversJSON(evs []dao.FailoverEvent) []failoverEventJSON {
	out := make([]failoverEventJSON, 0, len(evs))
	for _, e := range evs {
		out = append(out, failoverEventJSON(e))
	}
	return out
}

func (s *Server) apiFailoverEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r.URL.Query(), "limit")
	if err != nil {
		return err
	}
	limit, err := q.intRange("limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	evs, err := s.db.FailoverEventList(r.Context(), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": failoversJSON(evs)})
	return nil
}

// decodeJSON reads a JSON request body strictly: unknown fields and trailing data are errors.
func decodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, "content type %q: send application/json", ct)
		}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("malformed JSON body: data after the object")
	}
	return nil
}
