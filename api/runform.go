package api

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// A definition's page shows its versions, its schedule and its declared params and, for who
// may run it, a form drawn from those params. The form's values are text, as on the command
// line (`--param k=v`): they go to submitStored, the API's submission, which checks and
// converts them by their declared types (workflow.Spec.RunParams), so the form, the API and
// the CLI take the same values and refuse the same ones with the same messages. A refused
// form comes back with what was typed and each problem beside its field.
//
// A scheduled workflow's form (of its schedule's version) runs as a trigger of the schedule
// instead, as `zksched schedule trigger --param` does: its tasks get the fire's fire_time and
// fire_date as its fires give them, and the trail records a trigger.

// paramFieldPrefix starts the name of a declared param's form field: param.<name>.
const paramFieldPrefix = "param."

// versionsShown is how many of a definition's newest versions its page lists; the API has
// the rest.
const versionsShown = 20

// definitionPage is a definition's page.
type definitionPage struct {
	base
	Name string
	// Versions are the newest versionsShown versions; MoreVersions says there are older ones.
	Versions     []dao.DefinitionVersionRow
	MoreVersions bool
	Latest       int
	// Version is the version whose params are shown and which the form runs.
	Version     int
	Description string
	Params      []workflow.ParamView
	ParamsExtra bool
	// Schedule is the workflow's schedule; nil for none.
	Schedule *lifecycle.ScheduleView
	// OnAssets are the assets whose events start a run of the version shown; nil for none.
	OnAssets *workflow.OnAssets
	// AssetWaits are, for a workflow whose latest version declares on-assets, its assets with
	// their events not yet taken and their latest event; nil for none.
	AssetWaits *dao.AssetConsumerWaits
	// CanRun shows the run form: Fields are its inputs, one per declared param, and Extra
	// the text of its undeclared ones (k=v lines, with params-extra: allow).
	CanRun bool
	// Trigger says that the form runs as a trigger of the workflow's schedule.
	Trigger     bool
	Fields      []paramField
	Extra       string
	ExtraErrors []string
	// Problems are every reason the last submission was refused, for the summary above the
	// form.
	Problems []string
}

// paramField is a declared param's input in the run form.
type paramField struct {
	workflow.ParamView
	// ID is the input's element id; its field's name is paramFieldPrefix+Name.
	ID string
	// Input is how it is entered: text, number (Step is its step), select (from Options),
	// or textarea (json).
	Input   string
	Step    string
	Value   string
	Options []paramOption
	// Errors are the problems the last submission found with it.
	Errors []string
}

type paramOption struct {
	Value, Label string
	Selected     bool
}

// newParamField is the input of p holding value.
func newParamField(p workflow.ParamView, value string) paramField {
	f := paramField{ParamView: p, ID: "param-" + p.Name, Input: "text", Value: value}
	choices := p.Enum
	switch {
	case len(p.Enum) > 0:
	case p.Type == workflow.ParamBoolean:
		choices = []string{"true", "false"}
	case p.Type == workflow.ParamInteger:
		f.Input, f.Step = "number", "1"
		return f
	case p.Type == workflow.ParamNumber:
		f.Input, f.Step = "number", "any"
		return f
	case p.Type == workflow.ParamJSON:
		f.Input = "textarea"
		return f
	default:
		return f
	}
	f.Input = "select"
	// A param without default may be left out (or must be chosen, when required): the empty
	// choice gives no value. A value typed elsewhere that is no choice is kept, so that its
	// refusal shows beside what was given.
	if p.Default == nil {
		label := "(none)"
		if p.Required {
			label = "choose…"
		}
		f.Options = append(f.Options, paramOption{Value: "", Label: label, Selected: value == ""})
	}
	if value != "" && !slices.Contains(choices, value) {
		f.Options = append(f.Options, paramOption{Value: value, Label: value, Selected: true})
	}
	for _, c := range choices {
		f.Options = append(f.Options, paramOption{Value: c, Label: c, Selected: c == value})
	}
	return f
}

// loadDefinitionPage reads the page of definition name, its form for version (0: the
// latest), for the request's principal.
func (s *Server) loadDefinitionPage(r *http.Request, name string, version int) (*definitionPage, error) {
	ctx := r.Context()
	latest, err := s.db.DefinitionLatest(ctx, name)
	if err != nil {
		return nil, err
	}
	if latest == 0 {
		return nil, errorf(http.StatusNotFound, "no workflow definition %q", clipName(name))
	}
	if version == 0 {
		version = latest
	}
	spec, err := s.specs.Get(ctx, s.db.Queries, name, version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errorf(http.StatusNotFound, "workflow definition %q has no version %d", clipName(name), version)
	}
	if err != nil {
		return nil, err
	}
	versions, err := s.db.DefinitionVersionPage(ctx, name, dao.PageCursor{Limit: versionsShown})
	if err != nil {
		return nil, err
	}
	p := &definitionPage{base: base{Title: "Definition " + name, Nav: "definitions"}, Name: name,
		Versions: versions.Items, MoreVersions: versions.Older != 0, Latest: latest, Version: version,
		Description: spec.Description, Params: spec.DeclaredParams(), ParamsExtra: spec.ParamsExtra == workflow.ParamsExtraAllow,
		OnAssets: spec.OnAssets, CanRun: s.may(r, "POST /definitions/{name}/run")}
	views, err := lifecycle.Schedules(ctx, s.db, 3)
	if err != nil {
		return nil, err
	}
	for _, v := range views {
		if v.WorkflowName == name {
			p.Schedule = &v
			p.Trigger = v.WorkflowVersion == version
		}
	}
	waits, err := s.db.AssetConsumerWaits(ctx, name, 1)
	if err != nil {
		return nil, err
	}
	if len(waits) == 1 {
		p.AssetWaits = &waits[0]
	}
	return p, nil
}

// pageDefinition is GET /definitions/{name}: the form runs ?version= (default the latest).
func (s *Server) pageDefinition(w http.ResponseWriter, r *http.Request) error {
	q, err := newQuery(r.URL.Query(), "version")
	if err != nil {
		return err
	}
	version, err := q.intRange("version", 0, 1, 1<<31-1)
	if err != nil {
		return err
	}
	p, err := s.loadDefinitionPage(r, r.PathValue("name"), version)
	if err != nil {
		return err
	}
	for _, pv := range p.Params {
		value := ""
		if pv.Default != nil {
			value = *pv.Default
		}
		p.Fields = append(p.Fields, newParamField(pv, value))
	}
	s.render(w, r, http.StatusOK, "definition", p)
	return nil
}

// formDefinitionRun is POST /definitions/{name}/run: the run form submitted. A field left
// empty gives no value (the param's default applies); the extra text gives undeclared params
// as k=v lines. Refused params bring the form back with 400.
func (s *Server) formDefinitionRun(w http.ResponseWriter, r *http.Request) error {
	if err := s.checkCSRF(r); err != nil {
		return err
	}
	name := r.PathValue("name")
	version, err := strconv.Atoi(r.PostForm.Get("version"))
	if err != nil || version <= 0 {
		return badRequest("version %q is not a version number", clipName(r.PostForm.Get("version")))
	}
	body := workflowCreateJSON{Name: name, Version: version, Params: map[string]string{}}
	entered := map[string]string{}
	for k, vals := range r.PostForm {
		if pname, ok := strings.CutPrefix(k, paramFieldPrefix); ok && len(vals) > 0 {
			entered[pname] = vals[0]
			if vals[0] != "" {
				body.Params[pname] = vals[0]
			}
		}
	}
	extra := r.PostForm.Get("extra")
	extraNames, extraProblems := parseExtraParams(extra, body.Params)
	auditOf(r).setParams(body)
	var refused error
	if len(extraProblems) > 0 {
		// Nothing is submitted, but the fields are checked all the same, by the submission's
		// own check, so that every problem is told at once.
		var problems []error
		for _, msg := range extraProblems {
			problems = append(problems, &workflow.Error{Msg: msg})
		}
		spec, err := s.specs.Get(r.Context(), s.db.Queries, name, version)
		if errors.Is(err, sql.ErrNoRows) {
			return errorf(http.StatusNotFound, "workflow definition %q has no version %d", clipName(name), version)
		}
		if err != nil {
			return err
		}
		if _, err := spec.RunParams(body.Params); err != nil {
			problems = append(problems, err)
		}
		refused = paramsRefused(errors.Join(problems...))
	} else {
		var id int64
		var done string
		id, done, refused = s.runStored(r, body)
		if refused == nil {
			http.Redirect(w, r, fmt.Sprintf("/workflows/%d?done=%s", id, done), http.StatusSeeOther)
			return nil
		}
	}
	var he *httpError
	if !errors.As(refused, &he) || he.status != http.StatusBadRequest {
		return refused
	}
	// The form comes back, so the route's audit sees no error: the refusal is recorded here.
	st := auditOf(r)
	s.auditRefusal(r, st, refused)
	st.recorded = true

	p, err := s.loadDefinitionPage(r, name, version)
	if err != nil {
		return err
	}
	p.Extra, p.ExtraErrors = extra, extraProblems
	byParam := map[string][]string{}
	for _, e := range paramErrors(refused) {
		switch {
		case e.Param != "" && !extraNames[e.Param]:
			byParam[e.Param] = append(byParam[e.Param], e.Msg)
		case e.Param != "":
			p.ExtraErrors = append(p.ExtraErrors, e.Msg)
		}
		p.Problems = append(p.Problems, e.Msg)
	}
	if len(p.Problems) == 0 {
		p.Problems = []string{he.msg}
	}
	declared := map[string]bool{}
	for _, pv := range p.Params {
		declared[pv.Name] = true
		f := newParamField(pv, entered[pv.Name])
		f.Errors = byParam[pv.Name]
		p.Fields = append(p.Fields, f)
	}
	// The problem of a field this version does not declare (from a form of another version)
	// is shown with the extra params'.
	for _, pname := range slices.Sorted(maps.Keys(byParam)) {
		if !declared[pname] {
			p.ExtraErrors = append(p.ExtraErrors, byParam[pname]...)
		}
	}
	s.render(w, r, http.StatusBadRequest, "definition", p)
	return nil
}

// runStored runs the form's body: a trigger of the workflow's schedule when the body's
// version is the schedule's, else a submission (submitStored). It returns the instance and
// the flash of its page.
func (s *Server) runStored(r *http.Request, body workflowCreateJSON) (int64, string, error) {
	sched, err := s.db.ScheduleGet(r.Context(), body.Name)
	switch {
	case errors.Is(err, dao.ErrNoSchedule):
	case err != nil:
		return 0, "", err
	case sched.WorkflowVersion == body.Version:
		// The route's audit row is a submission's until here: it becomes the trigger's, as
		// POST /api/v1/schedules/{name}/trigger records it.
		st := auditOf(r)
		st.action, st.target = dao.AuditScheduleTrigger, "schedule/"+body.Name
		st.setParams(map[string]any{"params": body.Params})
		ev := s.auditEvent(r)
		res, err := lifecycle.TriggerSchedule(r.Context(), s.db, body.Name, body.Params, "ui:"+s.cfg.NodeID, time.Now(), &ev)
		if errors.As(err, new(*lifecycle.ParamsError)) || errors.As(err, new(*workflow.Error)) {
			return 0, "", paramsRefused(err)
		}
		if err != nil {
			return 0, "", err
		}
		auditDone(r)
		if res.Instance == 0 {
			return 0, "", errorf(http.StatusConflict, "trigger of %s created no instance: %s", body.Name, res.Skipped)
		}
		logFor(r).Info().Str("workflow", body.Name).Int64("workflow_instance", res.Instance).Msg("schedule triggered")
		return res.Instance, "triggered-run", nil
	}
	id, _, _, err := s.submitStored(r, body)
	return id, "submitted", err
}

// parseExtraParams adds the params of text, k=v lines (as `--param k=v`; blank lines are
// skipped), to params, and returns their names and the lines it refuses.
func parseExtraParams(text string, params map[string]string) (names map[string]bool, problems []string) {
	names = map[string]bool{}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok || k == "":
			problems = append(problems, fmt.Sprintf("params: want k=v, got %q", line))
		case names[k]:
			problems = append(problems, fmt.Sprintf("params: %s is given twice", k))
		case params[k] != "":
			problems = append(problems, fmt.Sprintf("params: %s has a field of its own above", k))
		default:
			names[k] = true
			params[k] = v
		}
	}
	return names, problems
}

// paramErrors are the problems of refused params in err, each naming its param.
func paramErrors(err error) []*workflow.Error {
	var out []*workflow.Error
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *workflow.Error:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := e.Unwrap(); x != nil {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}
