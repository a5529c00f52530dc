package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"
)

// This file holds the read queries of the web UI and the HTTP API about task instances. The
// lists are newest first with keyset pagination on id: a page is found by walking an index
// from a cursor, never by OFFSET, so the last page costs what the first does on a table of
// millions of rows (the indexes are in migration 00004).

// TaskFilter selects task instances. Zero fields do not filter.
type TaskFilter struct {
	State              TaskState
	WorkflowInstanceID int64
	// Name is a task name, matched exactly.
	Name string
	// WorkerID is the worker of the latest attempt, matched exactly.
	WorkerID string
	// QueuedFrom and QueuedTo bound queued_at, the time the task last entered the queue:
	// QueuedFrom <= queued_at < QueuedTo.
	QueuedFrom, QueuedTo time.Time
}

// PageCursor says where a page starts. With Before set the page holds the newest rows with an
// id below it (the next, older page); with After set, the oldest rows with an id above it (the
// previous, newer page). Neither: the newest rows.
type PageCursor struct {
	Before, After int64
	// Limit is the page size, 1..1000.
	Limit int
}

// TaskRow is a task instance as the lists show it: no params or output, which can be large,
// and the workflow's name.
type TaskRow struct {
	ID                 int64      `db:"id" json:"id"`
	WorkflowInstanceID int64      `db:"workflow_instance_id" json:"workflow_instance_id"`
	WorkflowName       string     `db:"workflow_name" json:"workflow_name"`
	Name               string     `db:"name" json:"name"`
	Type               string     `db:"type" json:"type"`
	State              TaskState  `db:"state" json:"state"`
	WorkerGroup        string     `db:"worker_group" json:"worker_group"`
	WorkerID           *string    `db:"worker_id" json:"worker_id"`
	Attempt            int        `db:"attempt" json:"attempt"`
	Retries            int        `db:"retries" json:"retries"`
	FailoverCount      int        `db:"failover_count" json:"failover_count"`
	KillRequested      bool       `db:"kill_requested" json:"kill_requested"`
	QueuedAt           time.Time  `db:"queued_at" json:"queued_at"`
	StartedAt          *time.Time `db:"started_at" json:"started_at"`
	EndedAt            *time.Time `db:"ended_at" json:"ended_at"`
	// EndReason is why the task ended when something other than its own result ended it.
	EndReason *EndReason `db:"end_reason" json:"end_reason"`
}

// Page is one page of a keyset-paginated list, newest first.
type Page[T any] struct {
	Items []T
	// Older is the cursor of the next, older page (PageCursor.Before); 0 when there is none.
	Older int64
	// Newer is the cursor of the previous, newer page (PageCursor.After); 0 when there is none.
	Newer int64
}

// TaskListPage returns one page of the task instances that match f, newest first.
func (q *Queries) TaskListPage(ctx context.Context, f TaskFilter, c PageCursor) (Page[TaskRow], error) {
	filter := []any{string(f.State), f.WorkflowInstanceID, f.Name, f.WorkerID, nullTime(f.QueuedFrom), nullTime(f.QueuedTo)}
	page, err := keysetPage(ctx, q, taskList, filter, c, func(r TaskRow) int64 { return r.ID })
	if err != nil {
		return page, fmt.Errorf("list task instances: %w", err)
	}
	return page, nil
}

// nullTime is t as a parameter, NULL when zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// taskList is the task list's statements.
var taskList = keysetList{older: taskListOlderSQL, newer: taskListNewerSQL,
	anyOlder: taskListAnyOlderSQL, anyNewer: taskListAnyNewerSQL}

// taskListOlderSQL, taskListNewerSQL, taskListAnyOlderSQL and taskListAnyNewerSQL are the task
// list's statements (keysetList): $1-$6 the filter (TaskFilter's state, workflow instance,
// name, worker, queued from and to; "", 0 and NULL do not filter), $7 the cursor, $8 the
// page's size (not in the any statements). A filter left out is a
// condition that PostgreSQL, which plans these statements for their parameters' values,
// reduces to true before it plans, so each page is planned as though the statement held only
// the filters given.
//
// The list indexes (migration 00010) leave out the running tasks, which the list reads through
// task_instance_running: each page is the best of the rows of the two sides, each side read in
// id order up to the page's size (PostgreSQL does not flatten the members of a UNION ALL that
// have a WHERE, so it has no ordered plan for the two filtered scans, and a first page would
// read and sort every task). A filter on state reads only the side that can match: the other
// side's condition on $1 is false before planning.
const (
	taskListOlderSQL = `
		SELECT t.id, t.workflow_instance_id, w.workflow_name, t.name, t.type, t.state,
			t.worker_group, t.worker_id, t.attempt, t.retries, t.failover_count, t.kill_requested,
			t.queued_at, t.started_at, t.ended_at, t.end_reason
		FROM (
			(SELECT t.* FROM task_instance t
			 WHERE t.state <> 'running' AND $1::text <> 'running'
			   AND ($1 = '' OR t.state = $1) AND ($2::bigint = 0 OR t.workflow_instance_id = $2)
			   AND ($3::text = '' OR t.name = $3) AND ($4::text = '' OR t.worker_id = $4)
			   AND ($5::timestamptz IS NULL OR t.queued_at >= $5) AND ($6::timestamptz IS NULL OR t.queued_at < $6)
			   AND ($7::bigint = 0 OR t.id < $7)
			 ORDER BY t.id DESC LIMIT $8)
			UNION ALL
			(SELECT t.* FROM task_instance t
			 WHERE t.state = 'running' AND $1 IN ('', 'running')
			   AND ($1 = '' OR t.state = $1) AND ($2 = 0 OR t.workflow_instance_id = $2)
			   AND ($3 = '' OR t.name = $3) AND ($4 = '' OR t.worker_id = $4)
			   AND ($5 IS NULL OR t.queued_at >= $5) AND ($6 IS NULL OR t.queued_at < $6)
			   AND ($7 = 0 OR t.id < $7)
			 ORDER BY t.id DESC LIMIT $8)
			ORDER BY id DESC LIMIT $8) t
		JOIN workflow_instance w ON w.id = t.workflow_instance_id
		ORDER BY t.id DESC`
	taskListNewerSQL = `
		SELECT t.id, t.workflow_instance_id, w.workflow_name, t.name, t.type, t.state,
			t.worker_group, t.worker_id, t.attempt, t.retries, t.failover_count, t.kill_requested,
			t.queued_at, t.started_at, t.ended_at, t.end_reason
		FROM (
			(SELECT t.* FROM task_instance t
			 WHERE t.state <> 'running' AND $1::text <> 'running'
			   AND ($1 = '' OR t.state = $1) AND ($2::bigint = 0 OR t.workflow_instance_id = $2)
			   AND ($3::text = '' OR t.name = $3) AND ($4::text = '' OR t.worker_id = $4)
			   AND ($5::timestamptz IS NULL OR t.queued_at >= $5) AND ($6::timestamptz IS NULL OR t.queued_at < $6)
			   AND t.id > $7::bigint
			 ORDER BY t.id ASC LIMIT $8)
			UNION ALL
			(SELECT t.* FROM task_instance t
			 WHERE t.state = 'running' AND $1 IN ('', 'running')
			   AND ($1 = '' OR t.state = $1) AND ($2 = 0 OR t.workflow_instance_id = $2)
			   AND ($3 = '' OR t.name = $3) AND ($4 = '' OR t.worker_id = $4)
			   AND ($5 IS NULL OR t.queued_at >= $5) AND ($6 IS NULL OR t.queued_at < $6)
			   AND t.id > $7
			 ORDER BY t.id ASC LIMIT $8)
			ORDER BY id ASC LIMIT $8) t
		JOIN workflow_instance w ON w.id = t.workflow_instance_id
		ORDER BY t.id ASC`
	taskListAnyOlderSQL = `
		SELECT EXISTS (
			SELECT 1 FROM task_instance t
			WHERE t.state <> 'running' AND $1::text <> 'running'
			  AND ($1 = '' OR t.state = $1) AND ($2::bigint = 0 OR t.workflow_instance_id = $2)
			  AND ($3::text = '' OR t.name = $3) AND ($4::text = '' OR t.worker_id = $4)
			  AND ($5::timestamptz IS NULL OR t.queued_at >= $5) AND ($6::timestamptz IS NULL OR t.queued_at < $6)
			  AND t.id < $7::bigint)
		OR EXISTS (
			SELECT 1 FROM task_instance t
			WHERE t.state = 'running' AND $1 IN ('', 'running')
			  AND ($1 = '' OR t.state = $1) AND ($2 = 0 OR t.workflow_instance_id = $2)
			  AND ($3 = '' OR t.name = $3) AND ($4 = '' OR t.worker_id = $4)
			  AND ($5 IS NULL OR t.queued_at >= $5) AND ($6 IS NULL OR t.queued_at < $6)
			  AND t.id < $7)`
	taskListAnyNewerSQL = `
		SELECT EXISTS (
			SELECT 1 FROM task_instance t
			WHERE t.state <> 'running' AND $1::text <> 'running'
			  AND ($1 = '' OR t.state = $1) AND ($2::bigint = 0 OR t.workflow_instance_id = $2)
			  AND ($3::text = '' OR t.name = $3) AND ($4::text = '' OR t.worker_id = $4)
			  AND ($5::timestamptz IS NULL OR t.queued_at >= $5) AND ($6::timestamptz IS NULL OR t.queued_at < $6)
			  AND t.id > $7::bigint)
		OR EXISTS (
			SELECT 1 FROM task_instance t
			WHERE t.state = 'running' AND $1 IN ('', 'running')
			  AND ($1 = '' OR t.state = $1) AND ($2 = 0 OR t.workflow_instance_id = $2)
			  AND ($3 = '' OR t.name = $3) AND ($4 = '' OR t.worker_id = $4)
			  AND ($5 IS NULL OR t.queued_at >= $5) AND ($6 IS NULL OR t.queued_at < $6)
			  AND t.id > $7)`
)

// keysetList is a list's statements. Each takes the list's filter as its first parameters,
// then a cursor: older returns the rows with keys below the cursor (0: every row), newest
// first, and newer those with keys above it, oldest first, each at most the page's size, its
// last parameter; anyOlder and anyNewer say whether there is any such row.
type keysetList struct {
	older, newer       string
	anyOlder, anyNewer string
}

// keysetPage runs a newest-first keyset query of list with the filter's parameters. It reads
// one row more than the page to learn whether a further page exists in the direction of
// travel, and checks the other direction with an EXISTS on the same index.
func keysetPage[T any](ctx context.Context, q *Queries, list keysetList, filter []any,
	c PageCursor, id func(T) int64) (Page[T], error) {
	var page Page[T]
	limit := min(max(c.Limit, 1), 1000)
	query, cursor := list.older, c.Before
	if c.After > 0 {
		query, cursor = list.newer, c.After
	}
	if err := sqlxSelect(ctx, q, &page.Items, query, slices.Concat(filter, []any{cursor, limit + 1})...); err != nil {
		return page, err
	}
	more := len(page.Items) > limit
	if more {
		page.Items = page.Items[:limit]
	}
	if c.After > 0 {
		slices.Reverse(page.Items)
	}
	if len(page.Items) == 0 {
		return page, nil
	}
	first, last := id(page.Items[0]), id(page.Items[len(page.Items)-1])
	// The direction of travel is known from the extra row; the other one is known to have rows
	// when the page was reached by a cursor, unless rows were deleted since: check.
	switch {
	case c.After > 0:
		if more {
			page.Newer = first
		}
		older, err := exists(ctx, q, list.anyOlder, filter, last)
		if err != nil {
			return page, err
		}
		if older {
			page.Older = last
		}
	default:
		if more {
			page.Older = last
		}
		if c.Before > 0 {
			newer, err := exists(ctx, q, list.anyNewer, filter, first)
			if err != nil {
				return page, err
			}
			if newer {
				page.Newer = first
			}
		}
	}
	return page, nil
}

// exists runs query, an any statement of a keysetList.
func exists(ctx context.Context, q *Queries, query string, filter []any, cursor int64) (bool, error) {
	var ok bool
	err := sqlxGet(ctx, q, &ok, query, slices.Concat(filter, []any{cursor})...)
	return ok, err
}

// LogTail is part of one attempt's log.
type LogTail struct {
	Attempt int `json:"attempt"`
	// FirstSeq is the seq of the first chunk returned; NextSeq the one after the last, to
	// follow the log from there.
	FirstSeq int `json:"first_seq"`
	NextSeq  int `json:"next_seq"`
	// Earlier is set when chunks before FirstSeq exist.
	Earlier bool   `json:"earlier"`
	Text    string `json:"text"`
}

// TaskLogTail returns the end of an attempt's log: from chunk fromSeq on when fromSeq >= 0,
// else the last chunks holding at least tailBytes (whole chunks, so a little more).
func (q *Queries) TaskLogTail(ctx context.Context, taskID int64, attempt, fromSeq, tailBytes int) (LogTail, error) {
	var chunks []struct {
		Seq  int    `db:"seq"`
		Data string `db:"data"`
	}
	err := sqlxSelect(ctx, q, &chunks, `
		SELECT seq, data FROM (
			SELECT seq, data, sum(octet_length(data)) OVER (ORDER BY seq DESC) - octet_length(data) AS after
			FROM task_log WHERE task_instance_id = $1 AND attempt = $2 AND seq >= $3
		) x WHERE $3 >= 0 OR after < $4
		ORDER BY seq`, taskID, attempt, max(fromSeq, -1), tailBytes)
	if err != nil {
		return LogTail{}, fmt.Errorf("read log of task %d attempt %d: %w", taskID, attempt, err)
	}
	tail := LogTail{Attempt: attempt, FirstSeq: max(fromSeq, 0), NextSeq: max(fromSeq, 0)}
	var b strings.Builder
	for i, c := range chunks {
		if i == 0 {
			tail.FirstSeq = c.Seq
		}
		b.WriteString(c.Data)
		tail.NextSeq = c.Seq + 1
	}
	tail.Text = b.String()
	if len(chunks) > 0 && tail.FirstSeq > 0 {
		err := sqlxGet(ctx, q, &tail.Earlier, `SELECT EXISTS (SELECT 1 FROM task_log
			WHERE task_instance_id = $1 AND attempt = $2 AND seq < $3)`, taskID, attempt, tail.FirstSeq)
		if err != nil {
			return LogTail{}, fmt.Errorf("read log of task %d attempt %d: %w", taskID, attempt, err)
		}
	}
	return tail, nil
}

// Checkpoint is a row of task_checkpoint: one completed step of an agent task.
type Checkpoint struct {
	Step      string          `db:"step" json:"step"`
	Attempt   int             `db:"attempt" json:"attempt"`
	Output    string          `db:"output" json:"output"`
	Usage     json.RawMessage `db:"usage" json:"usage"`
	CreatedAt time.Time       `db:"created_at" json:"created_at"`
}

// CheckpointListForTask returns the checkpoints of a task instance in the order they were
// written.
func (q *Queries) CheckpointListForTask(ctx context.Context, taskID int64) ([]Checkpoint, error) {
	var cps []Checkpoint
	if err := sqlxSelect(ctx, q, &cps, `SELECT step, attempt, output, usage, created_at
		FROM task_checkpoint WHERE task_instance_id = $1 ORDER BY created_at, step`, taskID); err != nil {
		return nil, fmt.Errorf("list checkpoints of task %d: %w", taskID, err)
	}
	return cps, nil
}

// FailoverEventsForNodes returns the failover events of the given identities, by identity:
// the task page explains a failed-over attempt with the event of its worker.
func (q *Queries) FailoverEventsForNodes(ctx context.Context, ids []string) (map[string]FailoverEvent, error) {
	out := map[string]FailoverEvent{}
	if len(ids) == 0 {
		return out, nil
	}
	var evs []FailoverEvent
	if err := sqlxSelect(ctx, q, &evs, `SELECT id, node_id, role, lost_at, fenced_at, finished_at, leader,
		tasks_requeued, workflows_released FROM failover_event WHERE node_id = ANY($1)`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("read failover events: %w", err)
	}
	for _, ev := range evs {
		out[ev.NodeID] = ev
	}
	return out, nil
}

// TaskRunningByWorker returns the ids of the running task instances of each worker, for the
// cluster view.
func (q *Queries) TaskRunningByWorker(ctx context.Context) (map[string][]int64, error) {
	var rows []struct {
		WorkerID string `db:"worker_id"`
		ID       int64  `db:"id"`
	}
	if err := sqlxSelect(ctx, q, &rows, `SELECT worker_id, id FROM task_instance
		WHERE state = 'running' AND worker_id IS NOT NULL ORDER BY worker_id, id`); err != nil {
		return nil, fmt.Errorf("list running task instances: %w", err)
	}
	out := map[string][]int64{}
	for _, r := range rows {
		out[r.WorkerID] = append(out[r.WorkerID], r.ID)
	}
	return out, nil
}

// TaskQueueDepth returns how many task instances wait in the queue of each worker group,
// counting those held back by a retry interval.
func (q *Queries) TaskQueueDepth(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Group string `db:"worker_group"`
		N     int    `db:"n"`
	}
	if err := sqlxSelect(ctx, q, &rows, `SELECT worker_group, count(*) AS n FROM task_instance
		WHERE state = 'queued' GROUP BY worker_group`); err != nil {
		return nil, fmt.Errorf("count queued task instances: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Group] = r.N
	}
	return out, nil
}

// FailoverEventCount returns how many identities have been failed over, by role.
func (q *Queries) FailoverEventCount(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Role string `db:"role"`
		N    int    `db:"n"`
	}
	if err := sqlxSelect(ctx, q, &rows, `SELECT role, count(*) AS n FROM failover_event GROUP BY role`); err != nil {
		return nil, fmt.Errorf("count failover events: %w", err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.Role] = r.N
	}
	return out, nil
}

// The task instances of one workflow instance, for its page and its API answer, a page at a
// time in id order: an instance can hold thousands of tasks, more than a page or an answer
// should carry whole. The statements walk the instance's rows through its (workflow instance,
// name) index and sort them by id; the page's cursor is a task id, never an OFFSET.

// WorkflowTaskCursor says where a page of a workflow instance's tasks starts: with After set,
// the tasks whose id is above it (the next page); with Before set, those below it (the
// previous page); neither, the first page. State, when set, keeps the tasks in that state.
type WorkflowTaskCursor struct {
	After, Before int64
	State         TaskState
	// Limit is the page size, 1..1000.
	Limit int
}

// WorkflowTaskPage is one page of a workflow instance's task instances, by id.
type WorkflowTaskPage struct {
	Items []TaskInstance
	// Next is the After of the next page; 0 on the last one.
	Next int64
	// Prev is the Before of the previous page; 0 on the first one. A page reached forward
	// names its first task as Prev without reading whether a task is before it: only a rerun
	// deletes tasks, so the previous page is at worst empty.
	Prev int64
}

// taskPageOfWorkflowAfterSQL and taskPageOfWorkflowBeforeSQL are TaskPageOfWorkflow's
// statements: $1 the workflow instance, $2 a state ("" for any), $3 the cursor (after: ids
// above it, 0 for the first page; before: ids below it), $4 the number of rows.
const (
	taskPageOfWorkflowAfterSQL = `
		SELECT id, workflow_instance_id, name, type, params, state, priority, worker_group,
			pool, worker_id, attempt, retries, max_retries,
			(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_interval_ms,
			(extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
			not_before, failover_count, kill_requested, output, error, exit_code, queued_at, started_at, ended_at, usage,
			paused_step, item_count, end_reason, output_truncated
		FROM task_instance
		WHERE workflow_instance_id = $1 AND ($2::text = '' OR state = $2) AND id > $3
		ORDER BY id LIMIT $4`
	taskPageOfWorkflowBeforeSQL = `
		SELECT id, workflow_instance_id, name, type, params, state, priority, worker_group,
			pool, worker_id, attempt, retries, max_retries,
			(extract(epoch FROM retry_interval) * 1000)::bigint AS retry_interval_ms,
			(extract(epoch FROM timeout) * 1000)::bigint AS timeout_ms,
			not_before, failover_count, kill_requested, output, error, exit_code, queued_at, started_at, ended_at, usage,
			paused_step, item_count, end_reason, output_truncated
		FROM task_instance
		WHERE workflow_instance_id = $1 AND ($2::text = '' OR state = $2) AND id < $3
		ORDER BY id DESC LIMIT $4`
)

// TaskPageOfWorkflow returns one page of the task instances of workflow instance id, by id.
func (q *Queries) TaskPageOfWorkflow(ctx context.Context, id int64, c WorkflowTaskCursor) (WorkflowTaskPage, error) {
	var page WorkflowTaskPage
	limit := min(max(c.Limit, 1), 1000)
	query, cursor := taskPageOfWorkflowAfterSQL, c.After
	if c.Before > 0 {
		query, cursor = taskPageOfWorkflowBeforeSQL, c.Before
	}
	if err := sqlxSelect(ctx, q, &page.Items, query, id, string(c.State), cursor, limit+1); err != nil {
		return page, fmt.Errorf("page the tasks of workflow instance %d: %w", id, err)
	}
	more := len(page.Items) > limit
	if more {
		page.Items = page.Items[:limit]
	}
	if c.Before > 0 {
		slices.Reverse(page.Items)
	}
	if len(page.Items) == 0 {
		return page, nil
	}
	first, last := page.Items[0].ID, page.Items[len(page.Items)-1].ID
	switch {
	case c.Before > 0:
		page.Next = last
		if more {
			page.Prev = first
		}
	default:
		if more {
			page.Next = last
		}
		if c.After > 0 {
			page.Prev = first
		}
	}
	return page, nil
}

// taskStateCountsOfWorkflowSQL is TaskStateCountsOfWorkflow's statement: $1 the workflow
// instance.
const taskStateCountsOfWorkflowSQL = `
		SELECT state, count(*) AS n FROM task_instance WHERE workflow_instance_id = $1 GROUP BY state`

// TaskStateCountsOfWorkflow counts the task instances of workflow instance id by state.
func (q *Queries) TaskStateCountsOfWorkflow(ctx context.Context, id int64) (TaskStateCounts, error) {
	var rows []struct {
		State TaskState `db:"state"`
		N     int       `db:"n"`
	}
	if err := sqlxSelect(ctx, q, &rows, taskStateCountsOfWorkflowSQL, id); err != nil {
		return nil, fmt.Errorf("count the tasks of workflow instance %d by state: %w", id, err)
	}
	out := make(TaskStateCounts, len(rows))
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out, nil
}

// TaskBrief is a task instance as a workflow instance's graph shows it.
type TaskBrief struct {
	ID    int64     `db:"id"`
	Name  string    `db:"name"`
	State TaskState `db:"state"`
}

// taskBriefsOfWorkflowSQL is TaskBriefsOfWorkflow's statement: $1 the workflow instance.
const taskBriefsOfWorkflowSQL = `
		SELECT id, name, state FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id`

// TaskBriefsOfWorkflow returns the id, name and state of every task instance of workflow
// instance id, by id: what its graph needs, and nothing larger (no params, no output).
func (q *Queries) TaskBriefsOfWorkflow(ctx context.Context, id int64) ([]TaskBrief, error) {
	var out []TaskBrief
	if err := sqlxSelect(ctx, q, &out, taskBriefsOfWorkflowSQL, id); err != nil {
		return nil, fmt.Errorf("list the task states of workflow instance %d: %w", id, err)
	}
	return out, nil
}
