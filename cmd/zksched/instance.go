package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zksched/zksched/api"
	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// The commands on one instance (status, logs, kill, rerun, stop, signal) act either through a
// master's API (--server, ZKSCHED_SERVER), with the role of the token's user and the audit row
// the master writes, or straight on the database as the other operator commands do, as an
// admin with an audit row of the command line's (cliAudit). Both print the same text and the
// same JSON, whose fields are named as the API names them.

// instances is where the commands act: a master's API or the database.
type instances interface {
	Status(ctx context.Context, id int64) (*statusJSON, error)
	// Log reads attempt's log (0: the latest) from chunk fromSeq on.
	Log(ctx context.Context, id int64, attempt, fromSeq int) (logPart, error)
	Kill(ctx context.Context, id int64) (killJSON, error)
	RerunTask(ctx context.Context, id int64) (rerunJSON, error)
	RerunWorkflow(ctx context.Context, id int64) (rerunJSON, error)
	Stop(ctx context.Context, id int64) (stopJSON, error)
	Signal(ctx context.Context, id int64, output string, fail bool) (signalJSON, error)
	// Attempts reads the attempts of a task instance, oldest first.
	Attempts(ctx context.Context, id int64) ([]attemptStatusJSON, error)
	// EmitAsset writes an event of the asset name, with output (nil for none).
	EmitAsset(ctx context.Context, name string, output *string) (assetEmitJSON, error)
}

// statusJSON is a workflow instance with its tasks, as `zksched status --json` prints it.
type statusJSON struct {
	ID              int64             `json:"id"`
	WorkflowName    string            `json:"workflow_name"`
	WorkflowVersion int               `json:"workflow_version"`
	State           dao.WorkflowState `json:"state"`
	Owner           *string           `json:"owner"`
	Error           *string           `json:"error"`
	CreatedAt       time.Time         `json:"created_at"`
	StartedAt       *time.Time        `json:"started_at"`
	EndedAt         *time.Time        `json:"ended_at"`
	// EndReason is why the instance ended when something other than its tasks' ends ended it.
	EndReason *dao.EndReason `json:"end_reason"`
	// ParentWorkflowInstanceID and ParentTaskInstanceID are the workflow task that started
	// this instance, when one did.
	ParentWorkflowInstanceID *int64           `json:"parent_workflow_instance_id,omitempty"`
	ParentTaskInstanceID     *int64           `json:"parent_task_instance_id,omitempty"`
	Tasks                    []taskStatusJSON `json:"tasks"`
	// Waiting are the tasks in state waiting and what each waits for.
	Waiting []waitingJSON `json:"waiting"`
}

type taskStatusJSON struct {
	// TaskView is the task as the API's views show it, field for field.
	api.TaskView
	// Attempts are the attempts of a task that has been retried or waits for a retry, with
	// their errors; absent for the others.
	Attempts []attemptStatusJSON `json:"attempts,omitempty"`
}

// attemptStatusJSON is one attempt of a task, as the API's task view names its fields.
type attemptStatusJSON struct {
	Attempt  int        `json:"attempt"`
	EndedAt  *time.Time `json:"ended_at"`
	Outcome  *string    `json:"outcome"`
	ExitCode *int       `json:"exit_code"`
	Error    *string    `json:"error"`
}

// waitingJSON is a waiting task and, in words, what it waits for.
type waitingJSON struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	For  string `json:"for"`
}

// logPart is part of an attempt's log (the API's /log answer).
type logPart struct {
	TaskInstance int64 `json:"task_instance"`
	dao.LogTail
	// Running is whether the attempt was running when the log was read: once it is not, the
	// log is whole.
	Running   bool          `json:"running"`
	TaskState dao.TaskState `json:"task_state"`
}

type killJSON struct {
	TaskInstance int64         `json:"task_instance"`
	State        dao.TaskState `json:"state"`
	Attempt      int           `json:"attempt"`
	Worker       *string       `json:"worker,omitempty"`
}

type rerunJSON struct {
	WorkflowInstance int64   `json:"workflow_instance"`
	Requeued         []int64 `json:"requeued"`
	DeletedSkipped   int     `json:"deleted_skipped"`
	Reopened         bool    `json:"reopened"`
}

type stopJSON struct {
	WorkflowInstance int64             `json:"workflow_instance"`
	State            dao.WorkflowState `json:"state"`
	Killed           int               `json:"killed"`
	KillRequested    int               `json:"kill_requested"`
}

type signalJSON struct {
	TaskInstance     int64         `json:"task_instance"`
	WorkflowInstance int64         `json:"workflow_instance"`
	State            dao.TaskState `json:"state"`
	PausedStep       *string       `json:"paused_step,omitempty"`
}

// noSuchError is an instance id that names nothing.
type noSuchError struct {
	kind string // "task" or "workflow"
	id   int64
	hint string // why it may be gone, "" for none
}

func (e noSuchError) Error() string {
	if e.hint != "" {
		return fmt.Sprintf("no such %s instance %d: %s", e.kind, e.id, e.hint)
	}
	return fmt.Sprintf("no such %s instance %d", e.kind, e.id)
}

// instanceFlags are the flags every command on an instance takes.
type instanceFlags struct {
	config, server, tokenFile *string
	asJSON                    *bool
}

func addInstanceFlags(fs *flag.FlagSet) instanceFlags {
	return instanceFlags{
		config: configFlag(fs),
		server: fs.String("server", os.Getenv("ZKSCHED_SERVER"),
			"a master's URL (http://host:5678): act through its API, with the role of the token's user (default: ZKSCHED_SERVER; none: on the database, as an admin)"),
		tokenFile: fs.String("token-file", "", "with --server: a file holding the API token (default: the ZKSCHED_TOKEN variable, else the token a master of this user generated, api-token in the state folder)"),
		asJSON:    fs.Bool("json", false, "print JSON"),
	}
}

// parseInstance parses args with fs and returns the one instance id they give.
func parseInstance(fs *flag.FlagSet, args []string, what string) (int64, error) {
	arg, rest, err := parseNamed(fs, args)
	if err != nil {
		return 0, err
	}
	if len(rest) > 0 {
		return 0, usageError{fmt.Errorf("unexpected arguments %v", rest)}
	}
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError{fmt.Errorf("want the id of a %s, got %q", what, arg)}
	}
	return id, nil
}

// parse parses args with fs, whose flags f are, and opens where to act: it returns the one
// instance id the arguments give (what it should be says an error), the instances to act on
// and a function that closes them.
func (f instanceFlags) parse(ctx context.Context, fs *flag.FlagSet, args []string, what string, stderr io.Writer) (int64, instances, func(), error) {
	id, err := parseInstance(fs, args, what)
	if err != nil {
		return 0, nil, nil, err
	}
	inst, done, err := f.open(ctx, stderr)
	return id, inst, done, err
}

// open returns where to act: the master of --server, or else the database of --config.
func (f instanceFlags) open(ctx context.Context, stderr io.Writer) (instances, func(), error) {
	if *f.server != "" {
		c, err := newAPIClient(*f.server, *f.tokenFile)
		return c, func() {}, err
	}
	if *f.tokenFile != "" {
		return nil, nil, usageError{errors.New("--token-file goes with --server (or ZKSCHED_SERVER): without one the command acts on the database")}
	}
	cfg, err := loadConfig(*f.config)
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	db, err := openDB(cctx, cfg, newLogger(cfg.Log, stderr))
	cancel()
	if err != nil {
		return nil, nil, err
	}
	return &dbInstances{db: db, retention: cfg.Retention.Instances}, func() { db.Close() }, nil
}

// instanceError turns the failure of an action into the command's message and exit code:
// an unknown id exits with exitUnknown; a refusal (a conflict with the instance's state, a
// role too low) says so and exits with exitFailed.
func instanceError(verb string, err error) error {
	var ns noSuchError
	var conflict *dao.ConflictError
	var ae *apiError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ns):
		return exitError{code: exitUnknown, msg: fmt.Sprintf("%s: %v", verb, ns)}
	case errors.As(err, &conflict):
		return exitError{code: exitFailed, msg: fmt.Sprintf("%s: %v", verb, conflict)}
	case errors.As(err, &ae):
		return exitError{code: exitFailed, msg: fmt.Sprintf("%s: %v", verb, ae)}
	}
	return err
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runStatus is `zksched status WORKFLOW_INSTANCE`.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stdout)
	f := addInstanceFlags(fs)
	id, inst, done, err := f.parse(ctx, fs, args, "workflow instance", stderr)
	if err != nil {
		return err
	}
	defer done()
	st, err := inst.Status(ctx, id)
	if err != nil {
		return instanceError("no status", err)
	}
	st.Waiting = waitingTasks(st.Tasks)
	if err := addAttempts(ctx, inst, st); err != nil {
		return instanceError("no status", err)
	}
	if *f.asJSON {
		return writeJSON(stdout, st)
	}
	return writeStatus(stdout, st)
}

// addAttempts reads the attempts of the tasks of st that have been retried or wait for a
// retry, for status to show their errors.
func addAttempts(ctx context.Context, inst instances, st *statusJSON) error {
	for i, t := range st.Tasks {
		if t.Attempt > 1 || t.NextAttemptAt != nil {
			as, err := inst.Attempts(ctx, t.ID)
			if err != nil {
				return err
			}
			st.Tasks[i].Attempts = as
		}
	}
	return nil
}

// waitingTasks are the waiting tasks of tasks with what each waits for.
func waitingTasks(tasks []taskStatusJSON) []waitingJSON {
	out := []waitingJSON{}
	for _, t := range tasks {
		if t.State != dao.TaskWaiting {
			continue
		}
		w := waitingJSON{ID: t.ID, Name: t.Name}
		switch {
		case t.Type == workflow.TypeSensor && t.PausedStep != nil && strings.HasPrefix(*t.PausedStep, workflow.WorkflowRunStep):
			w.For = "a run of " + strings.TrimPrefix(*t.PausedStep, workflow.WorkflowRunStep) + " to end: a workflow sensor, on no worker"
		case t.Type == workflow.TypeSensor:
			w.For = "its condition: a sensor, holding no slot until its next check"
		case t.PausedStep != nil:
			w.For = fmt.Sprintf("a signal at its step %s: zksched signal %d --output TEXT [--fail]", *t.PausedStep, t.ID)
		case t.Type == workflow.TypeWait:
			w.For = fmt.Sprintf("a signal: zksched signal %d --output TEXT [--fail]", t.ID)
		case t.ChildWorkflowInstanceID != nil:
			w.For = fmt.Sprintf("its child, workflow instance %d: zksched status %d", *t.ChildWorkflowInstanceID, *t.ChildWorkflowInstanceID)
		case t.ItemCount != nil:
			w.For = fmt.Sprintf("its %d items", *t.ItemCount)
		default:
			w.For = "its start"
		}
		out = append(out, w)
	}
	return out
}

func writeStatus(w io.Writer, st *statusJSON) error {
	fmt.Fprintf(w, "workflow instance %d: %s version %d, %s\n", st.ID, st.WorkflowName, st.WorkflowVersion, st.State)
	fmt.Fprintf(w, "  created %s, started %s, ended %s\n", stamp(&st.CreatedAt), stamp(st.StartedAt), stamp(st.EndedAt))
	if st.Owner != nil {
		fmt.Fprintf(w, "  owner: %s\n", *st.Owner)
	}
	if st.EndReason != nil {
		fmt.Fprintf(w, "  ended because: %s (%s)\n", st.EndReason.Describe(), *st.EndReason)
	}
	if st.Error != nil {
		fmt.Fprintf(w, "  error: %s\n", *st.Error)
	}
	if st.ParentWorkflowInstanceID != nil {
		from := ""
		if st.ParentTaskInstanceID != nil {
			from = fmt.Sprintf(" (its task instance %d)", *st.ParentTaskInstanceID)
		}
		fmt.Fprintf(w, "  parent: workflow instance %d%s\n", *st.ParentWorkflowInstanceID, from)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK INSTANCE\tNAME\tTYPE\tSTATE\tATTEMPT\tWORKER\tSTARTED\tENDED\tNOTE")
	for _, t := range st.Tasks {
		worker := "-"
		if t.WorkerID != nil {
			worker = *t.WorkerID
		}
		var note []string
		if t.ChildWorkflowInstanceID != nil {
			note = append(note, fmt.Sprintf("child: workflow instance %d", *t.ChildWorkflowInstanceID))
		}
		if t.KillRequested && !t.State.Terminal() {
			note = append(note, "kill requested")
		}
		if t.EndReason != nil && t.State.Terminal() {
			note = append(note, t.EndReason.Describe())
		}
		if t.Error != nil {
			note = append(note, oneLine(*t.Error))
		}
		if t.NextAttemptAt != nil {
			note = append(note, fmt.Sprintf("attempt %d due %s", t.Attempt+1, stamp(t.NextAttemptAt)))
		}
		if t.OutputTruncated {
			note = append(note, "output truncated at its output-limit")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Type, t.State, t.Attempt, worker,
			stamp(t.StartedAt), stamp(t.EndedAt), strings.Join(note, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeAttempts(w, st.Tasks)
	if len(st.Waiting) > 0 {
		fmt.Fprintln(w, "\nwaiting:")
		for _, t := range st.Waiting {
			fmt.Fprintf(w, "  %s (task instance %d) waits for %s\n", t.Name, t.ID, t.For)
		}
	}
	return nil
}

// writeAttempts lists the attempts of the tasks that have them (retried, or waiting for a
// retry): how each ended, its error, and when the next is due.
func writeAttempts(w io.Writer, tasks []taskStatusJSON) {
	header := false
	for _, t := range tasks {
		if len(t.Attempts) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nattempts:")
			header = true
		}
		fmt.Fprintf(w, "  %s (task instance %d)\n", t.Name, t.ID)
		for _, a := range t.Attempts {
			line := fmt.Sprintf("    #%d running", a.Attempt)
			if a.Outcome != nil {
				line = fmt.Sprintf("    #%d %s %s", a.Attempt, strings.ReplaceAll(*a.Outcome, "_", " "), stamp(a.EndedAt))
			}
			if a.Error != nil {
				line += ": " + oneLine(*a.Error)
			}
			fmt.Fprintln(w, line)
		}
		if t.NextAttemptAt != nil {
			fmt.Fprintf(w, "    #%d due %s\n", t.Attempt+1, stamp(t.NextAttemptAt))
		}
	}
}

// stamp prints a time of a status, "-" for none.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// oneLine cuts a message to its first line, for a table.
func oneLine(s string) string {
	if first, _, cut := strings.Cut(s, "\n"); cut {
		return first + " …"
	}
	return s
}

// followPoll is how often `zksched logs --follow` reads the log again.
const followPoll = 300 * time.Millisecond

// runLogs is `zksched logs TASK_INSTANCE [--follow] [--attempt N]`.
func runLogs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("logs", stdout)
	f := addInstanceFlags(fs)
	follow := fs.Bool("follow", false, "print new lines as they come until the attempt ends (a task not started yet: until it has run)")
	attempt := fs.Int("attempt", 0, "the attempt whose log to print (default: the latest)")
	raw := fs.Bool("raw", false, "print the log as the task wrote it, terminal control sequences included (by default they are escaped, ESC as \\x1b)")
	id, err := parseInstance(fs, args, "task instance")
	if err != nil {
		return err
	}
	if *attempt < 0 || (flagSet(fs, "attempt") && *attempt == 0) {
		return usageError{fmt.Errorf("--attempt %d: attempts count from 1", *attempt)}
	}
	inst, done, err := f.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer done()
	tw := &termWriter{w: stdout}
	defer func() { _ = tw.Flush() }()
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	from := 0
	for first := true; ; first = false {
		p, err := inst.Log(ctx, id, *attempt, from)
		if err != nil {
			return instanceError("no log", err)
		}
		ended := p.Attempt > 0 && (!*follow || !p.Running)
		switch {
		case !*f.asJSON && *raw:
			fmt.Fprint(stdout, p.Text)
		case !*f.asJSON:
			if _, err := tw.WriteString(p.Text); err != nil {
				return err
			}
		case p.Text != "" || first || ended:
			// JSON: an object a read with new text, and the first and the last read.
			if err := writeJSON(stdout, p); err != nil {
				return err
			}
		}
		if p.Attempt == 0 && (!*follow || p.TaskState != dao.TaskQueued) {
			fmt.Fprintf(stderr, "task instance %d has not run: it is %s\n", id, p.TaskState)
			return nil
		}
		if ended {
			return nil
		}
		if p.Attempt > 0 {
			// Followed from here on: the attempt named, not whichever is the latest.
			*attempt, from = p.Attempt, p.NextSeq
		}
		select {
		case <-ctx.Done():
			return exitError{code: exitFailed, msg: "interrupted"}
		case <-tick.C:
		}
	}
}

// runKill is `zksched kill TASK_INSTANCE`.
func runKill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("kill", stdout)
	f := addInstanceFlags(fs)
	id, inst, done, err := f.parse(ctx, fs, args, "task instance", stderr)
	if err != nil {
		return err
	}
	defer done()
	k, err := inst.Kill(ctx, id)
	if err != nil {
		return instanceError("not killed", err)
	}
	if *f.asJSON {
		return writeJSON(stdout, k)
	}
	switch k.State {
	case dao.TaskKilled:
		fmt.Fprintf(stdout, "task instance %d killed before it ran\n", id)
	case dao.TaskWaiting:
		fmt.Fprintf(stdout, "task instance %d: kill requested; its queued items are killed, its running ones stopped, and it ends killed once they have\n", id)
	default:
		worker := "its worker"
		if k.Worker != nil {
			worker = *k.Worker
		}
		fmt.Fprintf(stdout, "task instance %d: kill requested; %s stops attempt %d and the task ends killed\n", id, worker, k.Attempt)
	}
	return nil
}

// runRerun is `zksched rerun TASK_INSTANCE` or `zksched rerun --workflow WORKFLOW_INSTANCE`.
func runRerun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rerun", stdout)
	f := addInstanceFlags(fs)
	wf := fs.Bool("workflow", false, "the id is a workflow instance's: rerun every failed or killed task of it")
	id, inst, done, err := f.parse(ctx, fs, args, "task instance (or with --workflow, a workflow instance)", stderr)
	if err != nil {
		return err
	}
	defer done()
	var r rerunJSON
	if *wf {
		r, err = inst.RerunWorkflow(ctx, id)
	} else {
		r, err = inst.RerunTask(ctx, id)
	}
	if err != nil {
		return instanceError("not rerun", err)
	}
	if r.Requeued == nil {
		r.Requeued = []int64{}
	}
	if *f.asJSON {
		return writeJSON(stdout, r)
	}
	ids := make([]string, len(r.Requeued))
	for i, t := range r.Requeued {
		ids[i] = strconv.FormatInt(t, 10)
	}
	msg := fmt.Sprintf("workflow instance %d: task instances %s queued again", r.WorkflowInstance, strings.Join(ids, ", "))
	if len(ids) == 0 {
		msg = fmt.Sprintf("workflow instance %d: the task is created again", r.WorkflowInstance)
	}
	if r.Reopened {
		msg += "; the instance runs again"
	}
	fmt.Fprintln(stdout, msg)
	return nil
}

// runStop is `zksched stop WORKFLOW_INSTANCE`.
func runStop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stop", stdout)
	f := addInstanceFlags(fs)
	id, inst, done, err := f.parse(ctx, fs, args, "workflow instance", stderr)
	if err != nil {
		return err
	}
	defer done()
	s, err := inst.Stop(ctx, id)
	if err != nil {
		return instanceError("not stopped", err)
	}
	if *f.asJSON {
		return writeJSON(stdout, s)
	}
	fmt.Fprintf(stdout, "workflow instance %d stopped: %s killed, %s asked to stop\n", id,
		count(s.Killed, "task", "tasks"), count(s.KillRequested, "running one", "running ones"))
	return nil
}

// count is n with the noun for one or for several: "1 task", "2 tasks", "0 tasks".
func count(n int, one, several string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + several
}

// dbInstances acts on the database, as an admin, with an audit row of the command line's.
type dbInstances struct {
	db *dao.DB
	// specs caches the definitions a rerun reads.
	specs lifecycle.Specs
	// retention is retention.instances: a missing instance whose id was issued may have
	// been purged, as the API says too.
	retention time.Duration
}

// missing is the error of a kind ("task" or "workflow") instance id that is not there, with
// the API's hint when retention may have purged it.
func (d *dbInstances) missing(ctx context.Context, kind string, id int64) error {
	e := noSuchError{kind: kind, id: id}
	if d.retention > 0 && id > 0 {
		if issued, err := d.db.MaxIssuedID(ctx, kind+"_instance"); err == nil && id <= issued {
			e.hint = fmt.Sprintf("it may have been purged; retention deletes finished workflow instances, with their tasks, "+
				"%s after they end (retention.instances)", conf.FormatDuration(d.retention))
		}
	}
	return e
}

func taskTarget(id int64) string     { return fmt.Sprintf("task-instance/%d", id) }
func workflowTarget(id int64) string { return fmt.Sprintf("workflow-instance/%d", id) }

func (d *dbInstances) Status(ctx context.Context, id int64) (*statusJSON, error) {
	wf, err := d.db.WorkflowGet(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, d.missing(ctx, "workflow", id)
	}
	if err != nil {
		return nil, err
	}
	tasks, err := d.db.TaskListByWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	parent, err := d.db.WorkflowParent(ctx, id)
	if err != nil {
		return nil, err
	}
	children, err := d.db.TaskChildren(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &statusJSON{ID: wf.ID, WorkflowName: wf.WorkflowName, WorkflowVersion: wf.WorkflowVersion, State: wf.State,
		Owner: wf.Owner, Error: wf.Error, CreatedAt: wf.CreatedAt, StartedAt: wf.StartedAt, EndedAt: wf.EndedAt,
		EndReason: wf.EndReason, ParentWorkflowInstanceID: parent.Workflow, ParentTaskInstanceID: parent.Task, Tasks: []taskStatusJSON{}}
	for _, t := range tasks {
		j := taskStatusJSON{TaskView: api.TaskViewOf(t, wf.WorkflowName)}
		if c, ok := children[t.ID]; ok {
			j.ChildWorkflowInstanceID = &c
		}
		st.Tasks = append(st.Tasks, j)
	}
	return st, nil
}

func (d *dbInstances) Attempts(ctx context.Context, id int64) ([]attemptStatusJSON, error) {
	as, err := d.db.AttemptList(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]attemptStatusJSON, len(as))
	for i, a := range as {
		out[i] = attemptStatusJSON{Attempt: a.Attempt, EndedAt: a.EndedAt, ExitCode: a.ExitCode, Error: a.Error}
		if a.Outcome != nil {
			o := string(*a.Outcome)
			out[i].Outcome = &o
		}
	}
	return out, nil
}

func (d *dbInstances) Log(ctx context.Context, id int64, attempt, fromSeq int) (logPart, error) {
	// The task is read before its log: a log read after the attempt was seen ended is whole.
	t, err := d.db.TaskGet(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return logPart{}, d.missing(ctx, "task", id)
	}
	if err != nil {
		return logPart{}, err
	}
	if attempt > t.Attempt {
		return logPart{}, usageError{fmt.Errorf("--attempt %d: task instance %d has had %d attempts", attempt, id, t.Attempt)}
	}
	if attempt == 0 {
		attempt = t.Attempt
	}
	p := logPart{TaskInstance: id, LogTail: dao.LogTail{FirstSeq: fromSeq, NextSeq: fromSeq},
		Running: t.State == dao.TaskRunning && t.Attempt == attempt, TaskState: t.State}
	if attempt == 0 {
		return p, nil
	}
	if p.LogTail, err = d.db.TaskLogTail(ctx, id, attempt, fromSeq, 0); err != nil {
		return logPart{}, err
	}
	return p, nil
}

func (d *dbInstances) Kill(ctx context.Context, id int64) (killJSON, error) {
	res, err := lifecycle.Kill(ctx, d.db, id, cliAudit(dao.AuditTaskKill, taskTarget(id), map[string]any{}))
	if errors.Is(err, dao.ErrInstanceNotFound) {
		return killJSON{}, d.missing(ctx, "task", id)
	}
	if err != nil {
		return killJSON{}, err
	}
	k := killJSON{TaskInstance: id, State: res.State, Attempt: res.Attempt}
	if res.State == dao.TaskRunning {
		k.Worker = res.WorkerID
	}
	return k, nil
}

func (d *dbInstances) RerunTask(ctx context.Context, id int64) (rerunJSON, error) {
	res, wf, err := lifecycle.RerunTask(ctx, d.db, &d.specs, id, func(wf int64) *dao.AuditEvent {
		return cliAudit(dao.AuditTaskRerun, taskTarget(id), map[string]any{"workflow_instance": wf})
	})
	if errors.Is(err, sql.ErrNoRows) && wf == 0 {
		return rerunJSON{}, d.missing(ctx, "task", id)
	}
	if err != nil {
		return rerunJSON{}, err
	}
	return rerunJSON{WorkflowInstance: wf, Requeued: res.Requeued, DeletedSkipped: res.Deleted, Reopened: res.Reopened}, nil
}

func (d *dbInstances) RerunWorkflow(ctx context.Context, id int64) (rerunJSON, error) {
	res, err := lifecycle.RerunWorkflow(ctx, d.db, &d.specs, id, func(tasks []int64) *dao.AuditEvent {
		return cliAudit(dao.AuditWorkflowRerun, workflowTarget(id), map[string]any{"task_instances": tasks})
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return rerunJSON{}, d.missing(ctx, "workflow", id)
	case errors.Is(err, lifecycle.ErrNothingToRerun):
		return rerunJSON{}, exitError{code: exitFailed, msg: fmt.Sprintf("not rerun: workflow instance %d has no failed or killed task to rerun", id)}
	case err != nil:
		return rerunJSON{}, err
	}
	return rerunJSON{WorkflowInstance: id, Requeued: res.Requeued, DeletedSkipped: res.Deleted, Reopened: res.Reopened}, nil
}

func (d *dbInstances) Stop(ctx context.Context, id int64) (stopJSON, error) {
	res, err := lifecycle.Stop(ctx, d.db, id, cliAudit(dao.AuditWorkflowStop, workflowTarget(id), map[string]any{}))
	if errors.Is(err, dao.ErrInstanceNotFound) {
		return stopJSON{}, d.missing(ctx, "workflow", id)
	}
	if err != nil {
		return stopJSON{}, err
	}
	return stopJSON{WorkflowInstance: id, State: dao.WorkflowStopped, Killed: res.Killed, KillRequested: res.KillRequested}, nil
}

func (d *dbInstances) Signal(ctx context.Context, id int64, output string, fail bool) (signalJSON, error) {
	ev := cliAudit(dao.AuditTaskSignal, taskTarget(id), map[string]any{"fail": fail, "output_bytes": len(output)})
	res, err := lifecycle.Signal(ctx, d.db, id, output, fail, ev)
	switch {
	case errors.Is(err, dao.ErrInstanceNotFound):
		return signalJSON{}, d.missing(ctx, "task", id)
	case errors.Is(err, lifecycle.ErrSignalTooLarge):
		return signalJSON{}, usageError{err}
	case err != nil:
		return signalJSON{}, err
	}
	return signalJSON{TaskInstance: id, WorkflowInstance: res.WorkflowInstanceID, State: res.State, PausedStep: res.PausedStep}, nil
}
