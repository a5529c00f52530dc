package workflow

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestCheckParams(t *testing.T) {
	t.Parallel()
	many := make(map[string]string, MaxParams+1)
	for i := range MaxParams + 1 {
		many[fmt.Sprintf("p%d", i)] = "v"
	}
	name128 := strings.Repeat("n", 128)
	tests := []struct {
		name   string
		params map[string]string
		want   []string
		// notInFile is set where YAML cannot write the value (it reads "\xff" as ÿ).
		notInFile bool
	}{
		{"none", nil, nil, false},
		{"the largest", map[string]string{name128: strings.Repeat("v", MaxParamValue)}, nil, false},
		{"too many", many, []string{"params: 101 of them; a run has at most 100"}, false},
		{"a name too long", map[string]string{name128 + "n": "v"}, []string{fmt.Sprintf(
			`params: name "%s" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`, name128+"n")}, false},
		{"a name that is no variable", map[string]string{"my-day": "v"}, []string{
			`params: name "my-day" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`}, false},
		{"a value too long", map[string]string{"big": strings.Repeat("v", MaxParamValue+1)}, []string{
			"params: big is 65537 bytes; a value is at most 65536"}, false},
		{"NUL", map[string]string{"a": "x\x00y"}, []string{"params: a is not text: a value is UTF-8 without NUL"}, false},
		{"not UTF-8", map[string]string{"a": "\xff"}, []string{"params: a is not text: a value is UTF-8 without NUL"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := problems(t, CheckParams(tt.params)); !slices.Equal(got, tt.want) {
				t.Errorf("CheckParams:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
			if tt.notInFile {
				return
			}
			// A file's params follow the same rule, with the line of params.
			var doc strings.Builder
			doc.WriteString("name: w\nparams:\n")
			for k, v := range tt.params {
				fmt.Fprintf(&doc, "  %s: %q\n", k, v)
			}
			doc.WriteString("tasks: [{name: a, type: noop}]\n")
			_, err := Parse([]byte(doc.String()))
			var want []string
			for _, w := range tt.want {
				want = append(want, "line 2: "+w)
			}
			if got := problems(t, err); !slices.Equal(got, want) {
				t.Errorf("Parse:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
		})
	}
}

func TestNamesAtMost128Bytes(t *testing.T) {
	t.Parallel()
	n128, n129 := strings.Repeat("n", 128), strings.Repeat("n", 129)
	if _, err := Parse([]byte("name: " + n128 + "\ntasks: [{name: " + n128 + ", type: noop, group: " + n128 + ", pool: " + n128 + "}]\n")); err != nil {
		t.Errorf("names of 128 bytes refused: %v", err)
	}
	_, err := Parse([]byte("name: " + n129 + "\ntasks: [{name: " + n129 + ", type: noop, group: " + n129 + ", pool: " + n129 + "}]\n"))
	want := []string{
		fmt.Sprintf(`line 1: workflow name "%s" is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`, n129),
		fmt.Sprintf(`line 2: task "%s": name is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`, n129),
		fmt.Sprintf(`line 2: task "%s": group "%s" is invalid: use 1 to 128 letters, digits, '_', '.' or '-'`, n129, n129),
		fmt.Sprintf(`line 2: task "%s": pool "%s" is invalid: use 1 to 128 letters, digits, '_', '.' or '-'`, n129, n129),
	}
	if got := problems(t, err); !slices.Equal(got, want) {
		t.Errorf("Parse:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// stringParams declares params by their defaults alone, as a file's `params: {region: eu}`.
func stringParams(defaults map[string]string) map[string]Param {
	params := make(map[string]Param, len(defaults))
	for name, v := range defaults {
		params[name] = Param{Type: ParamString, Default: &v}
	}
	return params
}

// typedSpec parses the params of a workflow file with one noop task.
func typedSpec(t *testing.T, params string) *Spec {
	t.Helper()
	s, err := Parse([]byte("name: w\n" + params + "tasks: [{name: a, type: noop}]\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

// TestParamsBothForms: a param declared by its default alone is a string param with that
// default; a mapping declares type, default, enum, required, description and pattern, the
// default and enum written as tasks read them.
func TestParamsBothForms(t *testing.T) {
	t.Parallel()
	s, err := ParseFile(filepath.Join("testdata", "typed-params.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	str := func(v string) *string { return &v }
	want := map[string]Param{
		"region": {Type: ParamString, Default: str("eu")},
		"empty":  {Type: ParamString, Default: str("")},
		"size":   {Type: ParamInteger, Default: str("7"), Description: "How many parts."},
		"ratio":  {Type: ParamNumber, Default: str("2.5e-1")},
		"dry":    {Type: ParamBoolean, Default: str("true")},
		"opts":   {Type: ParamJSON, Default: str(`{"keep":[1,2],"note":"a b"}`)},
		"tier":   {Type: ParamString, Default: str("silver"), Enum: []string{"gold", "silver"}},
		"day":    {Type: ParamString, Required: true, Pattern: `\d{4}-\d{2}-\d{2}`},
		"level":  {Type: ParamInteger, Enum: []string{"1", "2", "3"}},
	}
	if !reflect.DeepEqual(s.Params, want) {
		t.Errorf("Params:\ngot  %+v\nwant %+v", s.Params, want)
	}
	if s.ParamsExtra != ParamsExtraAllow {
		t.Errorf("ParamsExtra = %q; want allow", s.ParamsExtra)
	}
	wantDefaults := map[string]string{"region": "eu", "empty": "", "size": "7", "ratio": "2.5e-1", "dry": "true",
		"opts": `{"keep":[1,2],"note":"a b"}`, "tier": "silver"}
	if got := s.Defaults(); !maps.Equal(got, wantDefaults) {
		t.Errorf("Defaults = %v; want %v", got, wantDefaults)
	}
}

// TestRunParams checks a run's params against the declarations: each type's values taken
// (and written as tasks read them) and refused, enum, pattern, required, and an undeclared
// param refused with the declared names and the closest one.
func TestRunParams(t *testing.T) {
	t.Parallel()
	s := typedSpec(t, `params:
  region: eu
  size: {type: integer}
  ratio: {type: number}
  dry: {type: boolean}
  opts: {type: json}
  tier: {enum: [gold, silver]}
  day: {required: true, pattern: '\d{4}-\d{2}-\d{2}'}
`)
	day := "2026-11-01"
	tests := []struct {
		name  string
		given map[string]string
		want  map[string]string
		errs  []string
	}{
		{"only the required one", map[string]string{"day": day}, map[string]string{"day": day}, nil},
		{"every type", map[string]string{"day": day, "region": "us", "size": "-42", "ratio": "-1.5e3", "dry": "false",
			"opts": `[1, {"a": null}]`, "tier": "gold"},
			map[string]string{"day": day, "region": "us", "size": "-42", "ratio": "-1.5e3", "dry": "false",
				"opts": `[1,{"a":null}]`, "tier": "gold"}, nil},
		{"written as tasks read them", map[string]string{"day": day, "size": "+007", "dry": "1"},
			map[string]string{"day": day, "size": "7", "dry": "true"}, nil},
		{"an empty string", map[string]string{"day": day, "region": ""}, map[string]string{"day": day, "region": ""}, nil},
		{"the required one missing", map[string]string{"region": "us"}, nil,
			[]string{"params: day is required: the workflow gives it no default"}},
		{"an undeclared one", map[string]string{"day": day, "regoin": "us"}, nil,
			[]string{`params: "regoin" is not a param of workflow w (did you mean "region"?): it declares day, dry, opts, ratio, region, size, tier`}},
		{"an undeclared one far from any", map[string]string{"day": day, "colour": "red"}, nil,
			[]string{`params: "colour" is not a param of workflow w: it declares day, dry, opts, ratio, region, size, tier`}},
		{"a fire's params on a workflow without schedule", map[string]string{"day": day, "fire_time": "x"}, nil,
			[]string{`params: "fire_time" is not a param of workflow w: it declares day, dry, opts, ratio, region, size, tier`}},
		{"ill-typed values", map[string]string{"day": "tomorrow", "size": "3.5", "ratio": "0x10", "dry": "yes",
			"opts": "{a: 1}", "tier": "bronze"}, nil, []string{
			`params: day must match the pattern "\\d{4}-\\d{2}-\\d{2}", not "tomorrow"`,
			`params: dry must be true or false, not "yes"`,
			`params: opts must be JSON, not "{a: 1}"`,
			`params: ratio must be a number, written as in JSON (3, -1.5, 2e10), not "0x10"`,
			`params: size must be an integer (decimal, 64 bits), not "3.5"`,
			`params: tier must be one of "gold", "silver", not "bronze"`,
		}},
		{"out of range", map[string]string{"day": day, "size": "9223372036854775808", "ratio": "1e400"}, nil, []string{
			`params: ratio must be a number, written as in JSON (3, -1.5, 2e10), not "1e400"`,
			`params: size must be an integer (decimal, 64 bits), not "9223372036854775808"`,
		}},
		{"the rule of every run first", map[string]string{"my-day": "x"}, nil, []string{
			`params: name "my-day" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.RunParams(tt.given)
			if errs := problems(t, err); !slices.Equal(errs, tt.errs) {
				t.Errorf("RunParams errors:\n\t%s\nwant:\n\t%s", strings.Join(errs, "\n\t"), strings.Join(tt.errs, "\n\t"))
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("RunParams = %v; want %v", got, tt.want)
			}
		})
	}
	none := typedSpec(t, "")
	if _, err := none.RunParams(map[string]string{"region": "eu"}); !slices.Equal(problems(t, err),
		[]string{`params: "region" is not a param of workflow w: it declares none`}) {
		t.Errorf("RunParams of a workflow declaring none: %v", err)
	}
	if got, err := none.RunParams(nil); err != nil || len(got) != 0 {
		t.Errorf("RunParams(nil) = %v, %v; want none", got, err)
	}
}

// TestRunParamsExtra: params-extra: allow takes undeclared params as given; a scheduled
// workflow takes its fires' params whatever it declares.
func TestRunParamsExtra(t *testing.T) {
	t.Parallel()
	allow := typedSpec(t, "params: {size: {type: integer}}\nparams-extra: allow\n")
	given := map[string]string{"size": "3", "anything": "goes"}
	if got, err := allow.RunParams(given); err != nil || !maps.Equal(got, given) {
		t.Errorf("RunParams with params-extra: allow = %v, %v; want %v", got, err, given)
	}
	if _, err := allow.RunParams(map[string]string{"size": "x"}); err == nil {
		t.Error("params-extra: allow took an ill-typed declared param")
	}
	scheduled := typedSpec(t, "params: {region: eu}\nschedule: {cron: '@daily'}\n")
	fire := map[string]string{ParamFireTime: "2026-11-01T00:00:00Z", ParamFireDate: "2026-11-01", "region": "us"}
	if got, err := scheduled.RunParams(fire); err != nil || !maps.Equal(got, fire) {
		t.Errorf("RunParams of a fire = %v, %v; want %v", got, err, fire)
	}
	if _, err := scheduled.RunParams(map[string]string{"other": "x"}); err == nil {
		t.Error("a scheduled workflow took an undeclared param that is no fire's")
	}
}

// TestRunParamsNameTheirParam: each problem of a run's params names the param it is about,
// so a form can show it beside its field; one about all of them names none.
func TestRunParamsNameTheirParam(t *testing.T) {
	t.Parallel()
	s := typedSpec(t, "params:\n  size: {type: integer}\n  day: {required: true}\n")
	many := make(map[string]string, MaxParams+1)
	for i := range MaxParams + 1 {
		many[fmt.Sprintf("p%d", i)] = "v"
	}
	for _, tt := range []struct {
		name  string
		given map[string]string
		want  []string
	}{
		{"ill-typed, undeclared and missing", map[string]string{"size": "x", "sise": "3"}, []string{"sise", "size", "day"}},
		{"the rule of every run", map[string]string{"day": "d", "my-day": "x", "size": strings.Repeat("9", MaxParamValue+1)},
			[]string{"my-day", "size"}},
		{"too many", many, []string{""}},
	} {
		_, err := s.RunParams(tt.given)
		var got []string
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			got = append(got, e.(*Error).Param)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: the problems name %q; want %q (%v)", tt.name, got, tt.want, err)
		}
	}
}

// TestParamsRefusedAtDefine: the declarations are checked when the file is read, each
// problem with the line of its param: defaults and enum entries against the type, enum and
// pattern, unknown types and fields, and what a schedule's fires cannot give.
func TestParamsRefusedAtDefine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, params string
		want         []string
	}{
		{"a default of the wrong type", "params:\n  n: {type: integer, default: ten}\n",
			[]string{`line 3: params: n: the default must be an integer (decimal, 64 bits), not "ten"`}},
		{"a default outside the enum", "params:\n  r: {enum: [eu, us], default: ap}\n",
			[]string{`line 3: params: r: the default must be one of "eu", "us", not "ap"`}},
		{"a default against the pattern", "params:\n  d: {pattern: '[a-z]+', default: A1}\n",
			[]string{`line 3: params: d: the default must match the pattern "[a-z]+", not "A1"`}},
		{"a json default that is no JSON", "params:\n  o: {type: json, default: '{a'}\n",
			[]string{`line 3: params: o: the default must be JSON, not "{a"`}},
		{"an enum entry of the wrong type", "params:\n  b: {type: boolean, enum: [true, maybe]}\n",
			[]string{`line 3: params: b: enum entry must be true or false, not "maybe"`}},
		{"an unknown type", "params:\n  n: {type: strng}\n",
			[]string{`line 3: params: n: type "strng" is unknown: use string, integer, number, boolean, json (did you mean "string"?)`}},
		{"an unknown field", "params:\n  n: {type: integer, defualt: 3}\n",
			[]string{`line 3: unknown field "defualt" in params: n (did you mean "default"?)`}},
		{"a bad pattern", "params:\n  p: {pattern: '('}\n",
			[]string{"line 3: params: p: pattern \"(\" is not a regular expression: error parsing regexp: missing closing ): `^(?:()$`"}},
		{"a pattern on an integer", "params:\n  n: {type: integer, pattern: '[0-9]'}\n",
			[]string{`line 3: params: n: a pattern is for string params, not for an integer param`}},
		{"required with a default", "params:\n  r: {required: true, default: x}\n",
			[]string{`line 3: params: r: a required param has no default: a run must give it (leave out required, or the default)`}},
		{"required not true or false", "params:\n  r: {required: maybe}\n",
			[]string{`line 3: params: r: required must be true or false, not "maybe"`}},
		{"an unknown params-extra", "params-extra: alow\n",
			[]string{`line 2: params-extra "alow" is unknown: use allow or refuse`}},
		{"a list", "params:\n  l: [a, b]\n",
			[]string{`line 3: params: l must be a default or a mapping declaring the param (type, default, ...), not a list`}},
		{"required in a scheduled workflow", "schedule: {cron: '@daily'}\nparams:\n  r: {required: true}\n",
			[]string{`line 4: params: r: it is required, but the schedule's fires give only fire_time and fire_date: give it a default instead`}},
		{"a fire's param typed", "schedule: {cron: '@daily'}\nparams:\n  fire_date: {type: json}\n",
			[]string{`line 4: params: fire_date: the schedule's fires give it as text: declare it as a string without enum or pattern`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("name: w\n" + tt.params + "tasks: [{name: a, type: noop}]\n"))
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
	// A fire's param declared as a plain string default is fine: it gives runs by hand one.
	typedSpec(t, "schedule: {cron: '@daily'}\nparams: {fire_date: '2026-01-01', r: {default: x}}\n")
}

// TestParamsJSON: the stored spec keeps a param declared by its default alone as older
// versions stored it (a string), any other as an object, and both read back the same; a
// stored spec of an older version loads, its params strings with defaults.
func TestParamsJSON(t *testing.T) {
	t.Parallel()
	s := typedSpec(t, "params:\n  region: eu\n  n: {type: integer, default: 3, required: false, enum: [1, 3]}\n  o: {type: json}\n")
	got, err := json.Marshal(s.Params)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"n":{"type":"integer","default":"3","enum":["1","3"]},"o":{"type":"json"},"region":"eu"}`
	if string(got) != want {
		t.Errorf("json.Marshal:\ngot  %s\nwant %s", got, want)
	}
	var back map[string]Param
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, s.Params) {
		t.Errorf("json.Unmarshal = %+v, %v; want %+v", back, err, s.Params)
	}

	old := `{"name":"w","params":{"day":"2026-11-01","empty":"","region":"eu"},"tasks":[{"name":"a","type":"noop","group":"default"}]}`
	var spec Spec
	if err := json.Unmarshal([]byte(old), &spec); err != nil {
		t.Fatalf("an older stored spec: %v", err)
	}
	if want := stringParams(map[string]string{"region": "eu", "day": "2026-11-01", "empty": ""}); !reflect.DeepEqual(spec.Params, want) {
		t.Errorf("an older stored spec's params = %+v; want %+v", spec.Params, want)
	}
	if err := spec.Validate(); err != nil {
		t.Errorf("an older stored spec does not validate: %v", err)
	}
	again, err := json.Marshal(&spec)
	if err != nil || string(again) != old {
		t.Errorf("an older stored spec written again:\ngot  %s\nwant %s", again, old)
	}
	if err := json.Unmarshal([]byte(`{"n": 3}`), &back); err == nil {
		t.Error("a number took as a param")
	}
}

// TestDeclaredParams: the API's view of the params, sorted by name.
func TestDeclaredParams(t *testing.T) {
	t.Parallel()
	s := typedSpec(t, "params:\n  region: eu\n  n: {type: integer, required: true, description: How many., enum: [1, 2]}\n")
	eu := "eu"
	want := []ParamView{
		{Name: "n", Type: ParamInteger, Enum: []string{"1", "2"}, Required: true, Description: "How many."},
		{Name: "region", Type: ParamString, Default: &eu},
	}
	if got := s.DeclaredParams(); !reflect.DeepEqual(got, want) {
		t.Errorf("DeclaredParams = %+v; want %+v", got, want)
	}
}

// TestParamDefaultBomb: a json default written as YAML is read within the budget aliases
// cannot get around.
func TestParamDefaultBomb(t *testing.T) {
	t.Parallel()
	var doc strings.Builder
	doc.WriteString("name: w\nparams:\n  o:\n    type: json\n    default:\n      l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&doc, "      l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	doc.WriteString("tasks: [{name: a, type: noop}]\n")
	_, err := Parse([]byte(doc.String()))
	if err == nil || !strings.Contains(err.Error(), "through aliases") {
		t.Errorf("Parse of a default expanding to 10^9 values: %v; want the budget's refusal", err)
	}
}
