package api_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/zksched/zksched/workflow"
)

// TestRunParamsThroughTheAPI: a definition version shows its declared params, as a form to
// run it needs them; a submission or a trigger whose params the workflow does not declare, or
// of the wrong type, is a 400 that lists the problems and creates nothing.
func TestRunParamsThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	yaml := "name: typed\nparams:\n  region: eu\n  size: {type: integer, required: true, enum: [1, 2], description: How many.}\n" +
		"tasks:\n  - {name: a, type: noop}\n"
	if r := b.do(t, "POST", "/api/v1/definitions", yaml, "Content-Type", "application/yaml"); r.status != 200 {
		t.Fatalf("store: %d %s", r.status, r.body)
	}
	var version struct {
		Params      []workflow.ParamView `json:"params"`
		ParamsExtra bool                 `json:"params_extra"`
		Spec        json.RawMessage      `json:"spec"`
	}
	b.do(t, "GET", "/api/v1/definitions/typed/versions/1", "").json(t, &version)
	eu := "eu"
	want := []workflow.ParamView{
		{Name: "region", Type: "string", Default: &eu},
		{Name: "size", Type: "integer", Enum: []string{"1", "2"}, Required: true, Description: "How many."},
	}
	if !reflect.DeepEqual(version.Params, want) || version.ParamsExtra || len(version.Spec) == 0 {
		t.Errorf("version 1 = %+v; want its spec and params %+v", version, want)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"name": "typed", "params": {"size": "1", "regoin": "us"}}`,
			"the params are rejected, nothing submitted:\n" + `params: "regoin" is not a param of workflow typed (did you mean "region"?): it declares region, size`},
		{`{"name": "typed", "params": {"size": "3"}}`, `params: size must be one of "1", "2", not "3"`},
		{`{"name": "typed", "params": {"size": "one"}}`, `params: size must be an integer (decimal, 64 bits), not "one"`},
		{`{"name": "typed"}`, "params: size is required: the workflow gives it no default"},
	} {
		r := b.do(t, "POST", "/api/v1/workflow-instances", tc.body)
		if msg := r.errorMessage(t); r.status != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("submit %s: %d %q; want 400 saying %q", tc.body, r.status, msg, tc.want)
		}
	}
	if id, err := b.db.WorkflowLastID(b.ctx); err != nil || id != 0 {
		t.Errorf("after refused submissions the last instance is %d, %v; want none", id, err)
	}
	if r := b.do(t, "POST", "/api/v1/workflow-instances", `{"name": "typed", "params": {"size": "+2"}}`); r.status != 201 {
		t.Errorf("submit of good params: %d %s", r.status, r.body)
	}

	cron := "name: cron\nparams: {region: eu}\nschedule: {cron: '@daily'}\ntasks:\n  - {name: a, type: noop}\n"
	if r := b.do(t, "POST", "/api/v1/definitions", cron, "Content-Type", "application/yaml"); r.status != 200 {
		t.Fatalf("store: %d %s", r.status, r.body)
	}
	r := b.do(t, "POST", "/api/v1/schedules/cron/trigger", `{"params": {"regoin": "us"}}`)
	want400 := "the params are rejected, nothing triggered:\n" + `params: "regoin" is not a param of workflow cron (did you mean "region"?): it declares region`
	if msg := r.errorMessage(t); r.status != 400 || msg != want400 {
		t.Errorf("trigger with an undeclared param: %d %q; want 400 %q", r.status, msg, want400)
	}
	if r := b.do(t, "POST", "/api/v1/schedules/cron/trigger", `{"params": {"region": "us"}}`); r.status != 201 {
		t.Errorf("trigger with a declared param: %d %s", r.status, r.body)
	}
}
