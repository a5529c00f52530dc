package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// The task states and workflow states a filter accepts.
var (
	taskStates = []dao.TaskState{dao.TaskQueued, dao.TaskWaiting, dao.TaskRunning, dao.TaskSucceeded, dao.TaskFailed,
		dao.TaskKilled, dao.TaskSkipped}
	workflowStates = []dao.WorkflowState{dao.WorkflowSubmitted, dao.WorkflowRunning, dao.WorkflowSucceeded,
		dao.WorkflowFailed, dao.WorkflowStopped}
)

const defaultPageSize = 50

// checkText refuses, with 400, a request whose path or query parameters (names or values)
// hold a NUL byte or bytes that are not UTF-8. PostgreSQL's text takes neither, so such a
// filter would fail in the database as an internal error; checked here, before any route
// reads its parameters, no route and no new filter has to remember it.
func (s *Server) checkText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := textError("the path", r.URL.Path); err != nil {
			s.fail(w, r, err)
			return
		}
		for k, vals := range r.URL.Query() {
			name := "parameter " + strconv.QuoteToASCII(k)
			if err := textError(name+"'s name", k); err != nil {
				s.fail(w, r, err)
				return
			}
			for _, v := range vals {
				if err := textError(name, v); err != nil {
					s.fail(w, r, err)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// textError says what is wrong with text for a filter, or returns nil.
func textError(what, text string) error {
	switch {
	case strings.IndexByte(text, 0) >= 0:
		return badRequest("%s holds a NUL byte (%%00), which no text filter takes", what)
	case !utf8.ValidString(text):
		return badRequest("%s is not UTF-8: percent-encode text as UTF-8", what)
	}
	return nil
}

// query reads URL parameters strictly: an unknown parameter or a value given twice is an
// error, so a typo in a filter is reported instead of silently listing everything.
type query struct {
	v url.Values
}

func newQuery(v url.Values, allowed ...string) (query, error) {
	var unknown []string
	for k, vals := range v {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
			continue
		}
		if len(vals) > 1 {
			return query{}, badRequest("parameter %q is given %d times", k, len(vals))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return query{}, badRequest("unknown parameter %q; known: %s", unknown[0], strings.Join(allowed, ", "))
	}
	return query{v: v}, nil
}

func (q query) str(key string, maxLen int) (string, error) {
	s := strings.TrimSpace(q.v.Get(key))
	if len(s) > maxLen {
		return "", badRequest("%s is longer than %d bytes", key, maxLen)
	}
	return s, nil
}

// id reads a positive integer id; empty means 0.
func (q query) id(key string) (int64, error) {
	s := strings.TrimSpace(q.v.Get(key))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%s: %q is not a positive integer id", key, s)
	}
	return n, nil
}

func (q query) intRange(key string, def, lo, hi int) (int, error) {
	s := strings.TrimSpace(q.v.Get(key))
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s: %q is not an integer in %d..%d", key, s, lo, hi)
	}
	return n, nil
}

// timeLayouts are the forms a time filter takes: RFC 3339, or what an HTML datetime-local or
// date input sends (read as UTC).
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

func (q query) time(key string) (time.Time, error) {
	s := strings.TrimSpace(q.v.Get(key))
	if s == "" {
		return time.Time{}, nil
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badRequest("%s: %q is not a time; write 2026-11-22T03:00:00Z (RFC 3339) or 2026-11-22T03:00 (UTC)", key, s)
}

func (q query) cursor() (dao.PageCursor, error) {
	var c dao.PageCursor
	var err error
	if c.Before, err = q.id("before"); err != nil {
		return c, err
	}
	if c.After, err = q.id("after"); err != nil {
		return c, err
	}
	if c.Before != 0 && c.After != 0 {
		return c, badRequest("give before or after, not both")
	}
	c.Limit, err = q.intRange("limit", defaultPageSize, 1, 1000)
	return c, err
}

// taskListParams are the parameters of the task list; the UI adds its own.
var taskListParams = []string{"state", "workflow", "task", "worker", "from", "to", "before", "after", "limit"}

// taskFilter reads the filters and cursor of a task list.
func taskFilter(q query) (dao.TaskFilter, dao.PageCursor, error) {
	var f dao.TaskFilter
	var err error
	if f.State, err = taskStateParam(q); err != nil {
		return f, dao.PageCursor{}, err
	}
	if f.WorkflowInstanceID, err = q.id("workflow"); err != nil {
		return f, dao.PageCursor{}, err
	}
	if f.Name, err = q.str("task", 200); err != nil {
		return f, dao.PageCursor{}, err
	}
	if f.WorkerID, err = q.str("worker", 300); err != nil {
		return f, dao.PageCursor{}, err
	}
	if f.QueuedFrom, err = q.time("from"); err != nil {
		return f, dao.PageCursor{}, err
	}
	if f.QueuedTo, err = q.time("to"); err != nil {
		return f, dao.PageCursor{}, err
	}
	if !f.QueuedFrom.IsZero() && !f.QueuedTo.IsZero() && !f.QueuedFrom.Before(f.QueuedTo) {
		return f, dao.PageCursor{}, badRequest("from must be before to")
	}
	c, err := q.cursor()
	return f, c, err
}

// taskStateParam reads ?state=, a task state or nothing.
func taskStateParam(q query) (dao.TaskState, error) {
	state, err := q.str("state", 32)
	if err != nil || state == "" {
		return "", err
	}
	if !slices.Contains(taskStates, dao.TaskState(state)) {
		return "", badRequest("state: unknown task state %q; want one of %s", state, joinStates(taskStates))
	}
	return dao.TaskState(state), nil
}

// workflowListParams are the parameters of the workflow list.
var workflowListParams = []string{"state", "name", "before", "after", "limit"}

func workflowFilter(q query) (dao.WorkflowFilter, dao.PageCursor, error) {
	var f dao.WorkflowFilter
	state, err := q.str("state", 32)
	if err != nil {
		return f, dao.PageCursor{}, err
	}
	if state != "" {
		if !slices.Contains(workflowStates, dao.WorkflowState(state)) {
			return f, dao.PageCursor{}, badRequest("state: unknown workflow state %q; want one of %s", state, joinStates(workflowStates))
		}
		f.State = dao.WorkflowState(state)
	}
	if f.Name, err = q.str("name", 200); err != nil {
		return f, dao.PageCursor{}, err
	}
	c, err := q.cursor()
	return f, c, err
}

func joinStates[S ~string](states []S) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// pathID reads the {id} of a path.
func pathID(r *http.Request, what string) (int64, error) {
	s := r.PathValue("id")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%q is not a valid %s id: want a positive integer", s, what)
	}
	return n, nil
}

// pathRules are the rules of the wildcards of the route patterns. route checks a request's
// path values against them before anything else, the role included, so that a value breaking
// its rule is refused with 400 before it reaches a log line, the audit trail or a statement.
// The refusal states the rule and does not echo the value, which may be 60 KB long; its
// message is the same for every bad value, so a flood of them folds into one audit row.
var pathRules = map[string]func(string) error{
	"name": func(v string) error {
		if !workflow.ValidName(v) {
			return badRequest("the workflow name in the path is invalid: %s", workflow.NameRule)
		}
		return nil
	},
	"id":      pathNumber,
	"version": pathNumber,
}

// maxPathNumber is the most characters of an id or a version in a path: an int64's 19 digits
// and a sign.
const maxPathNumber = 20

// pathNumber refuses an id or a version too long to be one; pathID and the handlers read a
// shorter one and say what is wrong with it, quoting it.
func pathNumber(v string) error {
	if len(v) > maxPathNumber {
		return badRequest("the number in the path is over %d characters long: ids and versions are positive integers", maxPathNumber)
	}
	return nil
}

// pathCheck returns the check of the path values of the requests of pattern. A wildcard
// without a rule in pathRules stops the master at start: no route takes a path value
// unchecked.
func pathCheck(pattern string) func(*http.Request) error {
	var names []string
	for _, seg := range strings.Split(pattern, "/") {
		if !strings.HasPrefix(seg, "{") || !strings.HasSuffix(seg, "}") || seg == "{$}" {
			continue
		}
		name := strings.TrimSuffix(seg[1:len(seg)-1], "...")
		if pathRules[name] == nil {
			panic(fmt.Sprintf("api: route %s: no rule for the path value {%s}", pattern, name))
		}
		names = append(names, name)
	}
	return func(r *http.Request) error {
		for _, n := range names {
			if err := pathRules[n](r.PathValue(n)); err != nil {
				return err
			}
		}
		return nil
	}
}
