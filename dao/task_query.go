package dao

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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
}

// Page is one page of a keyset-paginated list, newest first.
type Page[T any] struct {
	Items []T
	// Older is the cursor of the next, older page (PageCursor.Before); 0 when there is none.
	Older int64
	// Newer is the cursor of the previous, newer page (PageCursor.After); 0 when there is none.
	Newer int64
}

const taskRowColumns = `t.id, t.workflow_instance_id, w.workflow_name, t.name, t.type, t.state,
	t.worker_group, t.worker_id, t.attempt, t.retries, t.failover_count, t.kill_requested,
	t.queued_at, t.started_at, t.ended_at`

// where builds the filter's conditions on task_instance t, numbering parameters after args.
func (f TaskFilter) where(args []any) ([]string, []any) {
	var conds []string
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.State != "" {
		add("t.state = ?", string(f.State))
	}
	if f.WorkflowInstanceID != 0 {
		add("t.workflow_instance_id = ?", f.WorkflowInstanceID)
	}
	if f.Name != "" {
		add("t.name = ?", f.Name)
	}
	if f.WorkerID != "" {
		add("t.worker_id = ?", f.WorkerID)
	}
	if !f.QueuedFrom.IsZero() {
		add("t.queued_at >= ?", f.QueuedFrom)
	}
	if !f.QueuedTo.IsZero() {
		add("t.queued_at < ?", f.QueuedTo)
	}
	return conds, args
}

// keysetSource builds a list's two queries from the conditions of a page (the filter's and the
// cursor's, ANDed): rows returns the rows in the order of idCol, the key, desc or not, at
// most limit of them, and exists whether there is any.
type keysetSource struct {
	idCol  string
	rows   func(where string, desc bool, limit int) string
	exists func(where string) string
}

// plainSource lists the rows of from (a SELECT ... FROM ...) by idCol.
func plainSource(from, idCol string) keysetSource {
	return keysetSource{
		idCol: idCol,
		rows: func(where string, desc bool, limit int) string {
			return from + where + " ORDER BY " + idCol + direction(desc) + " LIMIT " + strconv.Itoa(limit)
		},
		exists: func(where string) string { return `SELECT EXISTS (` + from + where + `)` },
	}
}

// direction is the SQL of an ORDER BY's direction.
func direction(desc bool) string {
	if desc {
		return " DESC"
	}
	return " ASC"
}

// taskListSource lists task instances. The list indexes (migration 00010) leave out the
// running ones, which the lists read through task_instance_running: each page is the best of
// the rows of the two sides, each side read in id order up to the page's size (PostgreSQL does
// not flatten the members of a UNION ALL that have a WHERE, so it has no ordered plan for the
// two filtered scans, and a first page would read and sort every task). A filter on state
// reads only the side that can match.
func taskListSource(state TaskState) keysetSource {
	var sides []string
	if state != TaskRunning {
		sides = append(sides, "t.state <> 'running'")
	}
	if state == "" || state == TaskRunning {
		sides = append(sides, "t.state = 'running'")
	}
	and := func(side, where string) string {
		if where == "" {
			return " WHERE " + side
		}
		return where + " AND " + side
	}
	return keysetSource{
		idCol: "t.id",
		rows: func(where string, desc bool, limit int) string {
			dir, lim := direction(desc), " LIMIT "+strconv.Itoa(limit)
			parts := make([]string, len(sides))
			for i, side := range sides {
				parts[i] = "(SELECT t.* FROM task_instance t" + and(side, where) + " ORDER BY t.id" + dir + lim + ")"
			}
			rows := parts[0]
			if len(parts) > 1 {
				rows = "(" + strings.Join(parts, " UNION ALL ") + " ORDER BY id" + dir + lim + ")"
			}
			return `SELECT ` + taskRowColumns + ` FROM ` + rows + ` t
				JOIN workflow_instance w ON w.id = t.workflow_instance_id ORDER BY t.id` + dir
		},
		exists: func(where string) string {
			parts := make([]string, len(sides))
			for i, side := range sides {
				parts[i] = "EXISTS (SELECT 1 FROM task_instance t" + and(side, where) + ")"
			}
			return `SELECT ` + strings.Join(parts, " OR ")
		},
	}
}

// TaskListPage returns one page of the task instances that match f, newest first.
func (q *Queries) TaskListPage(ctx context.Context, f TaskFilter, c PageCursor) (Page[TaskRow], error) {
	conds, args := f.where(nil)
	page, err := keysetPage[TaskRow](ctx, q, taskListSource(f.State), conds, args, c,
		func(r TaskRow) int64 { return r.ID })
	if err != nil {
		return page, fmt.Errorf("list task instances: %w", err)
	}
	return page, nil
}

// keysetPage runs a newest-first keyset query: src builds it, conds is the filter. It reads
// one row more than the page to learn whether a further page exists in the direction of
// travel, and checks the other direction with an EXISTS on the same index.
func keysetPage[T any](ctx context.Context, q *Queries, src keysetSource, conds []string, args []any,
	c PageCursor, id func(T) int64) (Page[T], error) {
	var page Page[T]
	idCol := src.idCol
	limit := min(max(c.Limit, 1), 1000)
	where := func(extra string) string {
		all := slices.Clone(conds)
		if extra != "" {
			all = append(all, extra)
		}
		if len(all) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(all, " AND ")
	}
	n := strconv.Itoa(len(args) + 1)
	var query string
	var cursor int64
	switch {
	case c.After > 0:
		cursor = c.After
		query = src.rows(where(idCol+" > $"+n), false, limit+1)
	case c.Before > 0:
		cursor = c.Before
		query = src.rows(where(idCol+" < $"+n), true, limit+1)
	default:
		query = src.rows(where(""), true, limit+1)
	}
	qargs := args
	if cursor > 0 {
		qargs = append(slices.Clone(args), cursor)
	}
	if err := sqlxSelect(ctx, q, &page.Items, query, qargs...); err != nil {
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
		older, err := exists(ctx, q, src.exists(where(idCol+" < $"+n)), append(slices.Clone(args), last))
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
			newer, err := exists(ctx, q, src.exists(where(idCol+" > $"+n)), append(slices.Clone(args), first))
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

func exists(ctx context.Context, q *Queries, query string, args []any) (bool, error) {
	var ok bool
	err := sqlxGet(ctx, q, &ok, query, args...)
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
