package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/registry"
	"github.com/zksched/zksched/workflow"
)

// This file loads what the API and the pages show: each view is read from the request and
// loaded here once, and both render the same structures.

// notFoundError is a task or workflow instance that is not there: what is "task instance" or
// "workflow instance". explainMissing adds a word on retention when its id was issued.
type notFoundError struct {
	what string
	id   int64
}

func (e *notFoundError) Error() string { return fmt.Sprintf("%s %d not found", e.what, e.id) }

func notFound(what string, id int64) error {
	return &notFoundError{what: what, id: id}
}

// missingTables are the tables of the instances notFoundError and dao.InstanceNotFoundError
// name.
var missingTables = map[string]string{"task instance": "task_instance", "workflow instance": "workflow_instance"}

// explainMissing turns err, when it is a task or workflow instance not found, into its 404;
// when retention purges instances and the id is one that was issued, the answer says the
// instance may have been purged, and by which setting. Any other err is returned as it is.
func (s *Server) explainMissing(ctx context.Context, err error) error {
	var what string
	var id int64
	var nf *notFoundError
	var dnf *dao.InstanceNotFoundError
	switch {
	case errors.As(err, &nf):
		what, id = nf.what, nf.id
	case errors.As(err, &dnf):
		what, id = dnf.Kind, dnf.ID
	default:
		return err
	}
	msg := err.Error()
	if keep := s.cfg.InstanceRetention; keep > 0 && id > 0 {
		issued, qerr := s.db.MaxIssuedID(ctx, missingTables[what])
		if qerr == nil && id <= issued {
			msg = fmt.Sprintf("%s: it may have been purged; retention deletes finished workflow instances, with their tasks, "+
				"%s after they end (retention.instances)", msg, conf.FormatDuration(keep))
		}
	}
	return errorf(http.StatusNotFound, "%s", msg)
}

// taskDetail is everything about one task instance but its log.
type taskDetail struct {
	Task     dao.TaskInstance
	Workflow dao.WorkflowInstance
	// Params is the task's spec and the workflow's parameters, as the worker reads them; nil
	// when they do not parse (then Task.Params has them raw).
	Params      *workflow.TaskParams
	Attempts    []attemptView
	Checkpoints []checkpointView
	// Usage is the token usage of the task's result (LLM and agent tasks): the task's own
	// record, or else the sum of its checkpoints.
	Usage tokenUsage
	// Child is the instance a workflow task started; nil for none.
	Child *int64
	// Loop is a tool-calling agent's conversation; nil for other tasks.
	Loop *agentLoopJSON
}

// attemptView is one attempt with what its failover, if any, was.
type attemptView struct {
	dao.TaskAttempt
	// Failover explains a failed_over outcome: the leader fenced the attempt's worker.
	Failover *dao.FailoverEvent
}

// Tokens is the attempt's own token usage.
func (a attemptView) Tokens() tokenUsage {
	if a.Usage == nil {
		return tokenUsage{}
	}
	return parseUsage(*a.Usage)
}

// Duration is how long the attempt ran; until now while it runs.
func (a attemptView) Duration(now time.Time) time.Duration {
	end := now
	if a.EndedAt != nil {
		end = *a.EndedAt
	}
	return end.Sub(a.StartedAt)
}

type checkpointView struct {
	dao.Checkpoint
	Usage tokenUsage
}

// tokenUsage is the {"prompt_tokens", "completion_tokens", "total_tokens", "calls"} object
// LLM and agent tasks record.
type tokenUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	Calls            int64 `json:"calls"`
	// Cost is what the tokens cost at the provider's prices; 0 when they are not configured.
	Cost float64 `json:"cost,omitempty"`
}

func (u tokenUsage) add(o tokenUsage) tokenUsage {
	return tokenUsage{u.PromptTokens + o.PromptTokens, u.CompletionTokens + o.CompletionTokens,
		u.TotalTokens + o.TotalTokens, u.Calls + o.Calls, u.Cost + o.Cost}
}

// Zero reports whether nothing was used (or nothing recorded).
func (u tokenUsage) Zero() bool { return u == tokenUsage{} }

// parseUsage reads a usage object; whatever does not parse counts as nothing, since usage is
// for display only.
func parseUsage(raw json.RawMessage) tokenUsage {
	var u tokenUsage
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &u)
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// loadTask loads the task instance named by the request's path, after checking that its query
// holds only params; it returns the query for the caller to read them.
func (s *Server) loadTask(r *http.Request, params ...string) (*taskDetail, query, error) {
	id, err := pathID(r, "task instance")
	if err != nil {
		return nil, query{}, err
	}
	q, err := newQuery(r.URL.Query(), params...)
	if err != nil {
		return nil, query{}, err
	}
	d, err := s.taskByID(r.Context(), id)
	return d, q, err
}

func (s *Server) taskByID(ctx context.Context, id int64) (*taskDetail, error) {
	t, err := s.db.TaskGet(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("task instance", id)
	}
	if err != nil {
		return nil, err
	}
	d := &taskDetail{Task: *t}
	wf, err := s.db.WorkflowGet(ctx, t.WorkflowInstanceID)
	if err != nil {
		return nil, err
	}
	d.Workflow = *wf
	var p workflow.TaskParams
	if json.Unmarshal(t.Params, &p) == nil {
		d.Params = &p
	}
	atts, err := s.db.AttemptList(ctx, id)
	if err != nil {
		return nil, err
	}
	var lost []string
	for _, a := range atts {
		if a.Outcome != nil && *a.Outcome == dao.OutcomeFailedOver {
			lost = append(lost, a.WorkerID)
		}
	}
	events, err := s.db.FailoverEventsForNodes(ctx, lost)
	if err != nil {
		return nil, err
	}
	for _, a := range atts {
		v := attemptView{TaskAttempt: a}
		if ev, ok := events[a.WorkerID]; ok && a.Outcome != nil && *a.Outcome == dao.OutcomeFailedOver {
			v.Failover = &ev
		}
		d.Attempts = append(d.Attempts, v)
	}
	cps, err := s.db.CheckpointListForTask(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, c := range cps {
		u := parseUsage(c.Usage)
		d.Checkpoints = append(d.Checkpoints, checkpointView{Checkpoint: c, Usage: u})
		d.Usage = d.Usage.add(u)
	}
	if t.Usage != nil {
		d.Usage = parseUsage(*t.Usage)
	}
	if t.Type == "agent" {
		if d.Loop, err = s.loadAgentLoop(ctx, id, cps, t.PausedStep); err != nil {
			return nil, err
		}
	}
	if t.Type == workflow.TypeWorkflow {
		children, err := s.db.TaskChildren(ctx, t.WorkflowInstanceID)
		if err != nil {
			return nil, err
		}
		if c, ok := children[t.ID]; ok {
			d.Child = &c
		}
	}
	return d, nil
}

// spec returns the definition a workflow instance runs.
func (s *Server) spec(ctx context.Context, wf *dao.WorkflowInstance) (*workflow.Spec, error) {
	return s.specs.Get(ctx, s.db.Queries, wf.WorkflowName, wf.WorkflowVersion)
}

// workflowDetail is a workflow instance with a page of its tasks, their counts by state, and
// its graph.
type workflowDetail struct {
	Workflow dao.WorkflowInstance
	// Tasks is the page of its tasks the request asked for (see workflowTaskParams).
	Tasks dao.WorkflowTaskPage
	// TaskStates counts all its tasks by state.
	TaskStates dao.TaskStateCounts
	// TaskCursor is where the page starts, as the request gave it.
	TaskCursor dao.WorkflowTaskCursor
	Graph      graph
	// Spec is nil when the definition does not parse.
	Spec *workflow.Spec
	// Parent is the task that started the instance, if a workflow task did.
	Parent dao.ParentLink
	// Children are the instances its workflow tasks started, by task instance.
	Children map[int64]int64
}

// workflowTaskParams are the query parameters of a page of a workflow instance's tasks:
// ?after= and ?before= (task ids, the cursors of the next and previous pages), ?state= and
// ?limit= (default defaultTaskPage, at most 1000).
var workflowTaskParams = []string{"after", "before", "state", "limit"}

// defaultTaskPage is how many tasks an instance's page and its API answer hold unless asked:
// a screenful, and an answer of some tens of KB however many tasks the instance has.
const defaultTaskPage = 100

// loadWorkflow loads the workflow instance named by the request's path with the page of its
// tasks that workflowTaskParams select, after checking that its query holds only those and
// params.
func (s *Server) loadWorkflow(r *http.Request, params ...string) (*workflowDetail, error) {
	id, err := pathID(r, "workflow instance")
	if err != nil {
		return nil, err
	}
	q, err := newQuery(r.URL.Query(), append(params, workflowTaskParams...)...)
	if err != nil {
		return nil, err
	}
	var c dao.WorkflowTaskCursor
	if c.Limit, err = q.intRange("limit", defaultTaskPage, 1, 1000); err != nil {
		return nil, err
	}
	if c.After, err = q.id("after"); err != nil {
		return nil, err
	}
	if c.Before, err = q.id("before"); err != nil {
		return nil, err
	}
	if c.After != 0 && c.Before != 0 {
		return nil, badRequest("give after or before, not both")
	}
	if c.State, err = taskStateParam(q); err != nil {
		return nil, err
	}
	return s.workflowByID(r.Context(), id, c)
}

func (s *Server) workflowByID(ctx context.Context, id int64, c dao.WorkflowTaskCursor) (*workflowDetail, error) {
	wf, err := s.db.WorkflowGet(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("workflow instance", id)
	}
	if err != nil {
		return nil, err
	}
	d := &workflowDetail{Workflow: *wf, TaskCursor: c}
	if d.Tasks, err = s.db.TaskPageOfWorkflow(ctx, id, c); err != nil {
		return nil, err
	}
	if d.TaskStates, err = s.db.TaskStateCountsOfWorkflow(ctx, id); err != nil {
		return nil, err
	}
	if d.Parent, err = s.db.WorkflowParent(ctx, id); err != nil {
		return nil, err
	}
	if d.Children, err = s.db.TaskChildren(ctx, id); err != nil {
		return nil, err
	}
	spec, err := s.spec(ctx, wf)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Int64("workflow_instance", id).Msg("definition does not parse; no graph")
		spec = nil
	}
	d.Spec = spec
	briefs, err := s.db.TaskBriefsOfWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	d.Graph = buildGraph(spec, briefs)
	return d, nil
}

// clusterView is the registry as ZooKeeper has it, with each worker's running task instances
// from PostgreSQL and the recent failovers.
type clusterView struct {
	Leader  string
	Masters []nodeView
	Workers []nodeView
	Fenced  []registry.MarkerEntry
	// ZooKeeper are the ensemble's servers with their modes, Postgres the database's servers
	// with their roles.
	ZooKeeper []registry.Member
	Postgres  []registry.Member
	// Err is set when ZooKeeper could not be read; the failovers are still shown.
	Err       error
	Failovers []dao.FailoverEvent
}

type nodeView struct {
	registry.NodeEntry
	Leader bool
	// RunningTasks are the ids of the task instances PostgreSQL has running on the worker.
	RunningTasks []int64
}

const recentFailovers = 20

// loadCluster loads the cluster view for a request without parameters. ZooKeeper not being
// readable is logged here and left in the view's Err for the caller to show.
func (s *Server) loadCluster(r *http.Request) (*clusterView, error) {
	if _, err := newQuery(r.URL.Query()); err != nil {
		return nil, err
	}
	v, err := s.clusterState(r.Context())
	if err != nil {
		return nil, err
	}
	if v.Err != nil {
		logFor(r).Warn().Err(v.Err).Msg("cluster view: zookeeper not readable")
	}
	return v, nil
}

func (s *Server) clusterState(ctx context.Context) (*clusterView, error) {
	v := &clusterView{}
	var err error
	if v.Failovers, err = s.db.FailoverEventList(ctx, recentFailovers); err != nil {
		return nil, err
	}
	v.Postgres = PostgresMembers(ctx, s.db, s.cfg.PatroniURLs)
	if s.cfg.Cluster == nil {
		v.Err = errors.New("no registry client")
		return v, nil
	}
	cl, err := s.cfg.Cluster.Cluster(ctx)
	if err != nil {
		v.Err = err
		return v, nil
	}
	running, err := s.db.TaskRunningByWorker(ctx)
	if err != nil {
		return nil, err
	}
	v.Leader, v.Fenced, v.ZooKeeper = cl.Leader, cl.Fenced, cl.ZooKeeper
	for _, m := range cl.Masters {
		v.Masters = append(v.Masters, nodeView{NodeEntry: m, Leader: m.ID == cl.Leader && cl.Leader != ""})
	}
	for _, w := range cl.Workers {
		v.Workers = append(v.Workers, nodeView{NodeEntry: w, RunningTasks: running[w.ID]})
	}
	return v, nil
}

// loadTaskList reads the task list's filters and cursor from v and loads that page. The
// filter is returned as far as it was read, with an error too.
func (s *Server) loadTaskList(ctx context.Context, v url.Values) (dao.Page[dao.TaskRow], dao.TaskFilter, error) {
	q, err := newQuery(v, taskListParams...)
	if err != nil {
		return dao.Page[dao.TaskRow]{}, dao.TaskFilter{}, err
	}
	f, c, err := taskFilter(q)
	if err != nil {
		return dao.Page[dao.TaskRow]{}, f, err
	}
	page, err := s.db.TaskListPage(ctx, f, c)
	return page, f, err
}

// loadWorkflowList reads the workflow list's filters and cursor from v and loads that page.
func (s *Server) loadWorkflowList(ctx context.Context, v url.Values) (dao.Page[dao.WorkflowRow], error) {
	q, err := newQuery(v, workflowListParams...)
	if err != nil {
		return dao.Page[dao.WorkflowRow]{}, err
	}
	f, c, err := workflowFilter(q)
	if err != nil {
		return dao.Page[dao.WorkflowRow]{}, err
	}
	return s.db.WorkflowListPage(ctx, f, c)
}

// PostgresMembers reads the database's servers with their roles for a cluster view (see
// dao.PostgresNodes). A failed read is one member of unknown role that says why, so the
// rest of the view is shown all the same.
func PostgresMembers(ctx context.Context, db *dao.DB, patroniURLs []string) []registry.Member {
	nodes, err := dao.PostgresNodes(ctx, db, patroniURLs)
	if err != nil {
		return []registry.Member{{Address: "postgresql", Role: dao.RoleUnknown, Error: err.Error()}}
	}
	out := make([]registry.Member, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, registry.Member{Address: n.Address, Role: n.Role, Note: n.Note})
	}
	return out
}
