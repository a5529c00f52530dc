package api

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// staticHandler serves the embedded CSS and script. They change only with the binary, so
// browsers may keep them for an hour. Only files are served: a folder (/static/ itself) is a
// 404, not a listing.
func (s *Server) staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/static/")
		if fi, err := fs.Stat(sub, name); err != nil || fi.IsDir() {
			s.fail(w, r, errorf(http.StatusNotFound, "no file %s", r.URL.Path))
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// pages are the parsed templates, one set per page, each with the shared layout.
type pages struct {
	sets map[string]*template.Template
}

var pageNames = []string{"tasks", "task", "workflows", "workflow", "cluster", "definitions", "login", "error", "audit", "notifications", "assets",
	"definition", "schedules",
	"overview", "hooks", "triggers",
}

func newPages() (*pages, error) {
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", name, err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// base is what every page's layout shows.
type base struct {
	Title   string
	Nav     string
	NodeID  string
	Version string
	AuthOn  bool
	// User and Role are who is logged in, shown in the layout; empty before a login.
	User  string
	Role  Role
	CSRF  string
	Flash string
	Now   time.Time
}

// pageData lets render fill in the base of any page.
type pageData interface{ fill(b base) }

func (b *base) fill(v base) {
	title, nav, flash := b.Title, b.Nav, b.Flash
	*b = v
	b.Title, b.Nav, b.Flash = title, nav, flash
}

// render writes a page, or one template of it (tmpl "rows" of "tasks"), buffered so that a
// template error becomes a 500 instead of half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, data pageData) {
	s.renderTemplate(w, r, status, page, "layout", data)
}

func (s *Server) renderTemplate(w http.ResponseWriter, r *http.Request, status int, page, tmpl string, data pageData) {
	csrf, err := s.csrfToken(w, r)
	if err != nil {
		// The page is shown all the same; its forms will ask for a reload.
		logFor(r).Error().Err(err).Msg("csrf token")
	}
	b := base{NodeID: s.cfg.NodeID, Version: s.cfg.Version, AuthOn: s.auth.enabled, CSRF: csrf,
		Now: time.Now().UTC()}
	if p, ok := r.Context().Value(principalKey{}).(Principal); ok {
		b.User, b.Role = p.Name, p.Role
	}
	data.fill(b)
	var buf bytes.Buffer
	if err := s.pages.sets[page].ExecuteTemplate(&buf, tmpl, data); err != nil {
		logFor(r).Error().Err(err).Str("page", page).Msg("render page")
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	// Only the page's own script and styles run: an injected <script> would not, even if
	// escaping failed somewhere.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// flashes are the messages an action's redirect may ask a page to show.
var flashes = map[string]string{
	"killed":         "Killed: the task had not started yet.",
	"kill-requested": "Kill requested: the worker is stopping the attempt; the task becomes killed when it has.",
	"rerun":          "Rerun: the task is queued again.",
	"approved":       "Approved: the task succeeded with your text as its output; the workflow goes on.",
	"rejected":       "Rejected: the task failed with your text as its reason.",
	"resumed":        "Approved: your text is the output of the step that waited; the agent is queued to go on from the next step.",
	"rerun-workflow": "Rerun: the failed and killed tasks are queued again.",
	"stopped":        "Stopped: queued tasks were killed and the running ones are being stopped.",

	"submitted":         "Submitted: the workflow instance is created with the params shown below.",
	"schedule-enabled":  "Enabled: the schedule fires again from its next fire time.",
	"schedule-disabled": "Disabled: the schedule does not fire until it is enabled (or its file is stored again).",
	"triggered":         "Triggered: the schedule's workflow runs now, with its default params.",
	"triggered-run":     "Triggered: the schedule's workflow runs now, with the params shown below and the fire's.",
}

type errorPage struct {
	base
	Status     int
	StatusText string
	Message    string
}

type loginPage struct {
	base
	Next  string
	Error string
}

// taskFilterForm is the filter form's fields as the user typed them.
type taskFilterForm struct {
	State, Workflow, Task, Worker, From, To string
}

type tasksPage struct {
	base
	Form     taskFilterForm
	States   []dao.TaskState
	Rows     []dao.TaskRow
	OlderURL string
	NewerURL string
	Error    string
	// Filtered is set when any filter is on.
	Filtered bool
}

func (s *Server) pageTasks(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	partial := v.Get("partial") == "rows"
	v.Del("partial")
	p := &tasksPage{base: base{Title: "Task instances", Nav: "tasks"}, States: taskStates,
		Form: taskFilterForm{State: v.Get("state"), Workflow: v.Get("workflow"), Task: v.Get("task"),
			Worker: v.Get("worker"), From: v.Get("from"), To: v.Get("to")}}
	// An empty field of the filter form arrives as "param=": drop them, for clean URLs.
	for k, vals := range v {
		if len(vals) == 1 && vals[0] == "" {
			v.Del(k)
		}
	}
	status := http.StatusOK
	page, f, err := s.loadTaskList(r.Context(), v)
	if err == nil {
		p.Rows = page.Items
		p.OlderURL = pageURL("/tasks", v, "before", page.Older)
		p.NewerURL = pageURL("/tasks", v, "after", page.Newer)
	} else {
		status, p.Error = classify(err)
		if status >= 500 {
			logFor(r).Error().Err(err).Msg("task list")
		}
	}
	p.Filtered = f != (dao.TaskFilter{})
	if partial {
		s.renderTemplate(w, r, status, "tasks", "rows", p)
		return nil
	}
	s.render(w, r, status, "tasks", p)
	return nil
}

// pageURL is the list at path with the filters of v and a cursor; "" without a cursor.
func pageURL(path string, v url.Values, key string, cursor int64) string {
	if cursor == 0 {
		return ""
	}
	u := url.Values{}
	for k, vals := range v {
		if k != "before" && k != "after" {
			u[k] = vals
		}
	}
	u.Set(key, strconv.FormatInt(cursor, 10))
	return path + "?" + u.Encode()
}

type taskPage struct {
	base
	*taskDetail
	Log        *dao.LogTail
	LogAttempt int
	// MoreLogURL shows more of the log's beginning; "" when all of it is shown.
	MoreLogURL string
	CanKill    bool
	CanRerun   bool
	CanSignal  bool
	// PausedFor says what a task paused at a step waits for (pausedFor).
	PausedFor string
	// NextAttemptAt is when the next attempt of a task queued for a retry is due, and
	// NextAttemptIn how long from now (empty once it is due); nil otherwise.
	NextAttemptAt *time.Time
	NextAttemptIn string
}

const maxTailBytes = 64 << 20

func (s *Server) pageTask(w http.ResponseWriter, r *http.Request) error {
	d, q, err := s.loadTask(r, "attempt", "log_bytes", "done")
	if err != nil {
		return err
	}
	id := d.Task.ID
	p := &taskPage{base: base{Title: fmt.Sprintf("Task %d %s", id, d.Task.Name), Nav: "tasks",
		Flash: flashes[r.URL.Query().Get("done")]}, taskDetail: d}
	st := d.Task.State
	forEach := d.Task.ItemCount != nil
	p.CanKill = (st == dao.TaskQueued || st == dao.TaskRunning || (st == dao.TaskWaiting && forEach && !d.Task.KillRequested)) &&
		s.may(r, "POST /tasks/{id}/kill")
	p.CanRerun = (st == dao.TaskFailed || st == dao.TaskKilled) && s.may(r, "POST /tasks/{id}/rerun")
	if p.NextAttemptAt = d.Task.NextAttemptAt(); p.NextAttemptAt != nil {
		if in := time.Until(*p.NextAttemptAt); in > 0 {
			p.NextAttemptIn = humanDuration(in)
		}
	}
	// A wait task, a time sensor and an agent paused for a person wait for a signal; a
	// for-each's parent waits for its items, a workflow task for its child, an agent at
	// tool-child:CALL for its tool's child, another sensor for its next check.
	p.PausedFor = pausedFor(d.Task.PausedStep)
	p.CanSignal = st == dao.TaskWaiting && s.may(r, "POST /tasks/{id}/signal") &&
		(d.Task.Type == workflow.TypeWait || d.Task.Type == workflow.TypeSensor && d.Task.PausedStep == nil ||
			d.Task.Type != workflow.TypeSensor && p.PausedFor == "a signal")
	if d.Task.Attempt > 0 {
		if p.LogAttempt, err = q.intRange("attempt", d.Task.Attempt, 1, d.Task.Attempt); err != nil {
			return err
		}
		tailBytes, err := q.intRange("log_bytes", defaultTailBytes, 1, maxTailBytes)
		if err != nil {
			return err
		}
		tail, err := s.db.TaskLogTail(r.Context(), id, p.LogAttempt, -1, tailBytes)
		if err != nil {
			return err
		}
		p.Log = &tail
		if tail.Earlier && tailBytes < maxTailBytes {
			p.MoreLogURL = fmt.Sprintf("/tasks/%d?attempt=%d&log_bytes=%d#log", id, p.LogAttempt, min(tailBytes*4, maxTailBytes))
		}
	}
	s.render(w, r, http.StatusOK, "task", p)
	return nil
}

func (s *Server) formTaskKill(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	id, err := pathID(r, "task instance")
	if err != nil {
		return err
	}
	res, err := s.killTask(r, id)
	if err != nil {
		return err
	}
	done := "kill-requested"
	if res.State == dao.TaskKilled {
		done = "killed"
	}
	http.Redirect(w, r, fmt.Sprintf("/tasks/%d?done=%s", id, done), http.StatusSeeOther)
	return nil
}

func (s *Server) formTaskRerun(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	id, err := pathID(r, "task instance")
	if err != nil {
		return err
	}
	if _, _, err := s.rerunTask(r, id); err != nil {
		return err
	}
	http.Redirect(w, r, fmt.Sprintf("/tasks/%d?done=rerun", id), http.StatusSeeOther)
	return nil
}

// formTaskSignal is the task page's Approve and Reject: a signal of the waiting task with the
// text box as its output (approve) or its reason (reject).
func (s *Server) formTaskSignal(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	id, err := pathID(r, "task instance")
	if err != nil {
		return err
	}
	var body signalJSON
	switch r.PostForm.Get("decision") {
	case "approve":
	case "reject":
		body.Fail = true
	default:
		return badRequest("decision must be approve or reject")
	}
	body.Output = r.PostForm.Get("output")
	res, err := s.signalTask(r, id, body)
	if err != nil {
		return err
	}
	done := "approved"
	switch {
	case body.Fail:
		done = "rejected"
	case res.PausedStep != nil:
		done = "resumed"
	}
	http.Redirect(w, r, fmt.Sprintf("/tasks/%d?done=%s", id, done), http.StatusSeeOther)
	return nil
}

type workflowsPage struct {
	base
	Form     struct{ State, Name string }
	States   []dao.WorkflowState
	Rows     []dao.WorkflowRow
	OlderURL string
	NewerURL string
	Error    string
}

func (s *Server) pageWorkflows(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	for k, vals := range v {
		if len(vals) == 1 && vals[0] == "" {
			v.Del(k)
		}
	}
	p := &workflowsPage{base: base{Title: "Workflow instances", Nav: "workflows"}, States: workflowStates}
	p.Form.State, p.Form.Name = v.Get("state"), v.Get("name")
	status := http.StatusOK
	page, err := s.loadWorkflowList(r.Context(), v)
	if err == nil {
		p.Rows = page.Items
		p.OlderURL = pageURL("/workflows", v, "before", page.Older)
		p.NewerURL = pageURL("/workflows", v, "after", page.Newer)
	} else {
		status, p.Error = classify(err)
	}
	s.render(w, r, status, "workflows", p)
	return nil
}

type workflowPage struct {
	base
	*workflowDetail
	CanStop  bool
	CanRerun bool
	// Counts are the instance's tasks counted by state, in the order of the states; Total
	// is all of them.
	Counts []stateCount
	Total  int
	// States are the task states the filter offers.
	States []dao.TaskState
	// NextURL and PrevURL are the next and previous pages of its tasks; "" for none.
	NextURL, PrevURL string
	// Timeline is the Gantt chart of its first tasks' attempts.
	Timeline timeline
	// Assets are the asset events that started the run; none for a run no asset started.
	Assets []dao.AssetEvent
}

// stateCount is how many tasks are in State, and the page of them.
type stateCount struct {
	State dao.TaskState
	N     int
	URL   string
}

func (s *Server) pageWorkflow(w http.ResponseWriter, r *http.Request) error {
	d, err := s.loadWorkflow(r, "done")
	if err != nil {
		return err
	}
	p := &workflowPage{base: base{Title: fmt.Sprintf("Workflow %d %s", d.Workflow.ID, d.Workflow.WorkflowName), Nav: "workflows",
		Flash: flashes[r.URL.Query().Get("done")]}, workflowDetail: d, States: taskStates}
	p.CanStop = !d.Workflow.State.Terminal() && s.may(r, "POST /workflows/{id}/stop")
	p.CanRerun = d.TaskStates[dao.TaskFailed]+d.TaskStates[dao.TaskKilled] > 0 && s.may(r, "POST /workflows/{id}/rerun")
	path := fmt.Sprintf("/workflows/%d", d.Workflow.ID)
	for _, st := range taskStates {
		if n := d.TaskStates[st]; n > 0 {
			p.Counts = append(p.Counts, stateCount{State: st, N: n, URL: path + "?" + url.Values{"state": {string(st)}}.Encode() + "#tasks"})
			p.Total += n
		}
	}
	v := url.Values{}
	if d.TaskCursor.State != "" {
		v.Set("state", string(d.TaskCursor.State))
	}
	if q := r.URL.Query().Get("limit"); q != "" {
		v.Set("limit", q)
	}
	p.NextURL = pageURL(path, v, "after", d.Tasks.Next)
	p.PrevURL = pageURL(path, v, "before", d.Tasks.Prev)
	tasks, err := s.db.TaskTimelineOfWorkflow(r.Context(), d.Workflow.ID, maxTimelineTasks)
	if err != nil {
		return err
	}
	p.Timeline = buildTimeline(tasks, p.Total, time.Now().UTC())
	if p.Assets, err = s.db.AssetEventsOfRun(r.Context(), d.Workflow.ID); err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "workflow", p)
	return nil
}

func (s *Server) formWorkflowStop(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	id, err := pathID(r, "workflow instance")
	if err != nil {
		return err
	}
	if _, err := s.stopWorkflow(r, id); err != nil {
		return err
	}
	http.Redirect(w, r, fmt.Sprintf("/workflows/%d?done=stopped", id), http.StatusSeeOther)
	return nil
}

func (s *Server) formWorkflowRerun(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	id, err := pathID(r, "workflow instance")
	if err != nil {
		return err
	}
	if _, err := s.rerunWorkflow(r, id); err != nil {
		return err
	}
	http.Redirect(w, r, fmt.Sprintf("/workflows/%d?done=rerun-workflow", id), http.StatusSeeOther)
	return nil
}

type clusterPage struct {
	base
	*clusterView
}

func (s *Server) pageCluster(w http.ResponseWriter, r *http.Request) error {
	v, err := s.loadCluster(r)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "cluster", &clusterPage{base: base{Title: "Cluster", Nav: "cluster"}, clusterView: v})
	return nil
}

type definitionsPage struct {
	base
	Definitions []dao.DefinitionSummary
	// Next is the name after which the next page starts; "" on the last page.
	Next string
	// Schedules are the workflows' schedules by name, with their next fire times.
	Schedules map[string]lifecycle.ScheduleView
}

func (s *Server) pageDefinitions(w http.ResponseWriter, r *http.Request) error {
	defs, next, err := s.definitionPage(r, r.URL.Query())
	if err != nil {
		return err
	}
	views, err := lifecycle.Schedules(r.Context(), s.db, 3)
	if err != nil {
		return err
	}
	scheds := make(map[string]lifecycle.ScheduleView, len(views))
	for _, v := range views {
		scheds[v.WorkflowName] = v
	}
	s.render(w, r, http.StatusOK, "definitions", &definitionsPage{base: base{Title: "Workflow definitions", Nav: "definitions"},
		Definitions: defs, Next: next, Schedules: scheds})
	return nil
}

// funcs are the templates' helpers. html/template escapes everything they return (none
// returns template.HTML), so a task name, a log or an output is always shown as text.
var funcs = template.FuncMap{
	"when":     when,
	"took":     took,
	"dur":      humanDuration,
	"logtext":  logText,
	"prettyjs": prettyJSON,
	"cut":      cut,
	"isterm":   func(s dao.TaskState) bool { return s.Terminal() },
	"add":      func(a, b int) int { return a + b },
	"div":      func(a, b int) int { return a / b },
	"deref": func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	},
	"age": func(now, t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return humanDuration(now.Sub(t))
	},
	"join": strings.Join,
}

// when formats a time (time.Time or *time.Time) in UTC; "–" when unset.
func when(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x != nil {
			t = *x
		}
	}
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// took is how long from start to end, or to now while end is unset; "–" without a start.
func took(now time.Time, start, end *time.Time) string {
	if start == nil {
		return "–"
	}
	e := now
	if end != nil {
		e = *end
	}
	return humanDuration(e.Sub(*start))
}

func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// logText makes terminal control characters visible instead of letting the browser drop
// them: ESC shows as ␛, so an ANSI colour code reads as ␛[31m. Escaping for HTML is the
// template's job.
func logText(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			b.WriteRune(0x2400 + r) // the Control Pictures block: ␀ ␁ … ␛ …
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' }

func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// pausedFor says what a task paused at step waits for: a signal, unless the step is one a
// task leaves by itself (a tool's child ending, a workflow sensor's run ending, a sensor's
// next check).
func pausedFor(step *string) string {
	switch {
	case step == nil:
		return ""
	case strings.HasPrefix(*step, "tool-child:"):
		return "its tool's child workflow to end"
	case strings.HasPrefix(*step, workflow.WorkflowRunStep):
		return "a run of " + strings.TrimPrefix(*step, workflow.WorkflowRunStep) + " to end"
	case *step == "sensor":
		return "its next check"
	case *step == "sensor-timeout":
		return "the masters to end it at its timeout"
	}
	return "a signal"
}
