package workflow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// problems returns the messages of the *Errors joined in err, failing the test if err holds
// anything else.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var msgs []string
	for _, e := range errs {
		var we *Error
		if !errors.As(e, &we) {
			t.Fatalf("error %q (%T) is not a *workflow.Error", e, e)
		}
		msgs = append(msgs, e.Error())
	}
	return msgs
}

// wf wraps task lines in a minimal valid workflow header: the tasks start on line 3.
func wf(tasks ...string) string {
	return "name: w\ntasks:\n" + strings.Join(tasks, "\n") + "\n"
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		// The YAML itself.
		{"malformed YAML", "name: w\ntasks: [\n", []string{
			"line 2: malformed YAML: did not find expected node content"}},
		{"tab indentation", "name: w\ntasks:\n\t- name: a\n", []string{
			"line 3: malformed YAML: found character that cannot start any token (YAML is indented with spaces; this line starts with a tab)"}},
		{"empty file", "", []string{"the file is empty: a workflow needs a name and tasks"}},
		{"only comments", "# nothing yet\n", []string{"the file is empty: a workflow needs a name and tasks"}},
		{"list document", "- name: a\n- name: b\n", []string{
			"line 1: a workflow must be a YAML mapping with a name and tasks, not a list"}},
		{"scalar document", "hello\n", []string{
			`line 1: a workflow must be a YAML mapping with a name and tasks, not "hello"`}},
		{"two documents", "name: a\n---\nname: b\n", []string{
			"line 2: a second YAML document starts here: a workflow file holds one"}},
		{"malformed second document", "name: a\n---\nname: [\n", []string{
			"line 3: malformed YAML: did not find expected node content"}},
		{"unknown workflow field", "name: w\ntaks: []\n", []string{
			`line 2: unknown field "taks" in the workflow (did you mean "tasks"?)`}},
		{"unknown task field", wf("  - name: extract", "    type: shell", "    comand: ./x.sh"), []string{
			`line 5: unknown field "comand" in task "extract" (did you mean "command"?)`}},
		{"unknown field far from any", wf("  - name: a", "    type: noop", "    colour: red"), []string{
			`line 5: unknown field "colour" in task "a"`}},
		{"unknown field in unnamed task", wf("  - type: noop", "    nmae: a"), []string{
			`line 4: unknown field "nmae" in task #1 (did you mean "name"?)`}},
		{"duplicate workflow key", "name: a\nname: b\ntasks: []\n", []string{
			`line 2: duplicate key "name" in the workflow (first at line 1)`}},
		{"duplicate task key", wf("  - name: a", "    type: shell", "    command: x", "    command: y"), []string{
			`line 6: duplicate key "command" in task "a" (first at line 5)`}},
		{"duplicate env key", wf("  - name: a", "    type: noop", "    env: {A: 1, A: 2}"), []string{
			`line 5: duplicate key "A" in task "a": env (first at line 5)`}},
		{"duplicate param", "name: w\nparams:\n  a: 1\n  a: 2\ntasks: []\n", []string{
			`line 4: duplicate key "a" in params (first at line 3)`}},
		{"tasks not a list", "name: w\ntasks: {a: b}\n", []string{
			"line 2: tasks must be a list of tasks, not a mapping"}},
		{"task not a mapping", wf("  - extract"), []string{
			`line 3: task #1 must be a mapping of fields (name, type, ...), not "extract"`}},
		{"name a list", "name: [a]\ntasks: []\n", []string{
			"line 1: workflow name must be a string, not a list"}},
		{"command a list", wf("  - name: a", "    type: shell", "    command: [ls, -l]"), []string{
			`line 5: task "a": command must be a string, not a list`}},
		{"depends-on a string", wf("  - name: a", "    type: noop", "    depends-on: b"), []string{
			`line 5: task "a": depends-on must be a list of task names, like [a, b], not "b"`}},
		{"depends-on of mappings", wf("  - name: a", "    type: noop", "    depends-on: [{b: c}]"), []string{
			`line 5: task "a": depends-on entries must be task names, not a mapping`}},
		{"env a list", wf("  - name: a", "    type: noop", "    env: [A=1]"), []string{
			`line 5: task "a": env must be a mapping of names to values, like {A: b}, not a list`}},
		{"env value a mapping", wf("  - name: a", "    type: noop", "    env: {A: {b: c}}"), []string{
			`line 5: task "a": env: A must be a string, not a mapping`}},
		{"params a string", "name: w\nparams: region=eu\ntasks: []\n", []string{
			`line 2: params must be a mapping of names to defaults or declarations, like {region: eu} or {size: {type: integer, default: 3}}, not "region=eu"`}},
		{"retries not a number", wf("  - name: a", "    type: noop", "    retries: often"), []string{
			`line 5: task "a": retries must be an integer, not "often"`}},
		{"retries quoted", wf("  - name: a", "    type: noop", `    retries: "2"`), []string{
			`line 5: task "a": retries must be an integer, not "2"`}},
		{"priority a float", wf("  - name: a", "    type: noop", "    priority: 1.5"), []string{
			`line 5: task "a": priority must be an integer, not "1.5"`}},
		{"priority overflows", wf("  - name: a", "    type: noop", "    priority: 99999999999999999999"), []string{
			`line 5: task "a": priority must be an integer, not "99999999999999999999"`}},
		{"duration without unit", wf("  - name: a", "    type: noop", "    timeout: 30"), []string{
			`line 5: task "a": timeout "30" is not a duration: write a Go duration such as "30s", "10m" or "1h30m"`}},
		{"duration not a duration", wf("  - name: a", "    type: noop", "    retry-interval: soon"), []string{
			`line 5: task "a": retry-interval "soon" is not a duration: write a Go duration such as "30s", "10m" or "1h30m"`}},
		{"merge of a scalar", wf("  - <<: x", "    name: a", "    type: noop"), []string{
			`line 3: a merge key (<<) in task "a" must bring in a mapping, not "x"`}},
		{"list as a key", wf("  - name: a", "    type: noop", "    ? [x]", "    : y"), []string{
			`line 5: keys in task "a" must be names, not a list`}},
		{"several YAML problems", wf("  - name: a", "    type: noop", "    tiemout: 5s", "  - name: b", "    type: noop", "    retries: x"), []string{
			`line 5: unknown field "tiemout" in task "a" (did you mean "timeout"?)`,
			`line 8: task "b": retries must be an integer, not "x"`,
		}},

		// The workflow it describes.
		{"no tasks key", "name: w\n", []string{"the workflow has no tasks"}},
		{"empty task list", "name: w\ntasks: []\n", []string{"line 2: the workflow has no tasks"}},
		{"null tasks", "name: w\ntasks:\n", []string{"line 2: the workflow has no tasks"}},
		{"no workflow name", "tasks:\n  - {name: a, type: noop}\n", []string{"workflow name is required"}},
		{"invalid workflow name", "name: nightly report\ntasks:\n  - {name: a, type: noop}\n", []string{
			`line 1: workflow name "nightly report" is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`}},
		{"workflow name starting with a dash", "name: -w\ntasks:\n  - {name: a, type: noop}\n", []string{
			`line 1: workflow name "-w" is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`}},
		{"workflow name too long", "name: " + strings.Repeat("w", 129) + "\ntasks:\n  - {name: a, type: noop}\n", []string{
			`line 1: workflow name "` + strings.Repeat("w", 129) + `" is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`}},
		{"bad param names", "name: w\nparams: {'': x, my-day: y, ok_1: z}\ntasks:\n  - {name: a, type: noop}\n", []string{
			`line 2: params: name "" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`,
			`line 2: params: name "my-day" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`,
		}},
		{"no task name", wf("  - type: noop"), []string{"line 3: task #1: name is required"}},
		{"invalid task name", wf("  - name: a/b", "    type: noop"), []string{
			`line 3: task "a/b": name is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`}},
		{"duplicate task name", wf("  - {name: a, type: noop}", "  - {name: b, type: noop}", "  - {name: a, type: noop}"), []string{
			`line 5: task #3: name "a" is already used by task #1`}},
		{"no type", wf("  - name: a"), []string{
			`line 3: task "a": type is required (known types: agent, llm, noop, sensor, shell, wait, workflow)`}},
		{"unknown type", wf("  - name: a", "    type: bash"), []string{
			`line 4: task "a": unknown type "bash" (known types: agent, llm, noop, sensor, shell, wait, workflow)`}},
		{"shell without command", wf("  - name: a", "    type: shell"), []string{
			`line 3: task "a": command is required for a shell task`}},
		{"shell with a blank command", wf("  - name: a", "    type: shell", `    command: "  "`), []string{
			`line 5: task "a": command is required for a shell task`}},
		{"command on a noop task", wf("  - name: a", "    type: noop", "    command: ls"), []string{
			`line 5: task "a": command is a field of shell tasks, not of a noop task`}},
		{"workdir on a noop task", wf("  - name: a", "    type: noop", "    workdir: /tmp"), []string{
			`line 5: task "a": workdir is a field of agent and shell tasks, not of a noop task`}},
		{"missing dependency", wf("  - {name: extract, type: noop}", "  - name: load", "    type: noop", "    depends-on: [extrct]"), []string{
			`line 6: task "load" depends on "extrct", which is not a task of this workflow`}},
		{"self dependency", wf("  - name: a", "    type: noop", "    depends-on: [a]"), []string{
			`line 5: task "a" depends on itself`}},
		{"dependency listed twice", wf("  - {name: a, type: noop}", "  - {name: b, type: noop, depends-on: [a, a]}"), []string{
			`line 4: task "b" lists dependency "a" twice`}},
		{"retries below range", wf("  - {name: a, type: noop, retries: -1}"), []string{
			`line 3: task "a": retries -1 is out of range 0..100`}},
		{"retries above range", wf("  - {name: a, type: noop, retries: 101}"), []string{
			`line 3: task "a": retries 101 is out of range 0..100`}},
		{"priority below range", wf("  - {name: a, type: noop, priority: -1001}"), []string{
			`line 3: task "a": priority -1001 is out of range -1000..1000`}},
		{"priority above range", wf("  - {name: a, type: noop, priority: 1001}"), []string{
			`line 3: task "a": priority 1001 is out of range -1000..1000`}},
		{"negative timeout", wf("  - {name: a, type: noop, timeout: -1s}"), []string{
			`line 3: task "a": timeout -1s is negative`}},
		{"negative retry interval", wf("  - {name: a, type: noop, retry-interval: -1m30s}"), []string{
			`line 3: task "a": retry-interval -1m30s is negative`}},
		{"bad env names", wf("  - name: a", "    type: noop", "    env: {1X: a, A-B: b, '': c, OK_1: d}"), []string{
			`line 5: task "a": env name "" is invalid: use letters, digits and '_', not starting with a digit`,
			`line 5: task "a": env name "1X" is invalid: use letters, digits and '_', not starting with a digit`,
			`line 5: task "a": env name "A-B" is invalid: use letters, digits and '_', not starting with a digit`,
		}},
		{"invalid group", wf("  - {name: a, type: noop, group: gpu hosts}"), []string{
			`line 3: task "a": group "gpu hosts" is invalid: use 1 to 128 letters, digits, '_', '.' or '-'`}},
		{"invalid pool", wf("  - {name: a, type: noop, pool: 'db/main'}"), []string{
			`line 3: task "a": pool "db/main" is invalid: use 1 to 128 letters, digits, '_', '.' or '-'`}},
		{"several problems, in file order", "name: w\ntasks:\n" +
			"  - name: load\n    type: shell\n    depends-on: [extract]\n" +
			"  - name: extract\n    type: noop\n    retries: 200\n" +
			"  - name: load\n    type: sh\n", []string{
			`line 3: task "load": command is required for a shell task`,
			`line 8: task "extract": retries 200 is out of range 0..100`,
			`line 9: task #3: name "load" is already used by task #1`,
			`line 10: task "load": unknown type "sh" (known types: agent, llm, noop, sensor, shell, wait, workflow)`,
		}},

		// Cycles, named in run order from the task written first.
		{"2-cycle", wf("  - {name: a, type: noop, depends-on: [b]}", "  - {name: b, type: noop, depends-on: [a]}"), []string{
			"line 3: dependency cycle: a -> b -> a (each task depends on the one before it)"}},
		{"3-cycle", wf(
			"  - {name: a, type: noop, depends-on: [c]}",
			"  - {name: b, type: noop, depends-on: [a]}",
			"  - {name: c, type: noop, depends-on: [b]}"), []string{
			"line 3: dependency cycle: a -> b -> c -> a (each task depends on the one before it)"}},
		{"3-cycle written backwards", wf(
			"  - {name: a, type: noop, depends-on: [b]}",
			"  - {name: b, type: noop, depends-on: [c]}",
			"  - {name: c, type: noop, depends-on: [a]}"), []string{
			"line 3: dependency cycle: a -> c -> b -> a (each task depends on the one before it)"}},
		{"cycle not containing the first task", wf(
			"  - {name: start, type: noop}",
			"  - {name: x, type: noop, depends-on: [start, z]}",
			"  - {name: y, type: noop, depends-on: [x]}",
			"  - {name: z, type: noop, depends-on: [y]}",
			"  - {name: end, type: noop, depends-on: [z]}"), []string{
			"line 4: dependency cycle: x -> y -> z -> x (each task depends on the one before it)"}},
		{"two separate cycles", wf(
			"  - {name: a, type: noop, depends-on: [b]}",
			"  - {name: b, type: noop, depends-on: [a]}",
			"  - {name: c, type: noop, depends-on: [d]}",
			"  - {name: d, type: noop, depends-on: [c]}"), []string{
			"line 3: dependency cycle: a -> b -> a (each task depends on the one before it)",
			"line 5: dependency cycle: c -> d -> c (each task depends on the one before it)",
		}},
		{"tangle reported once, by its shortest cycle", wf(
			"  - {name: a, type: noop, depends-on: [c, b]}",
			"  - {name: b, type: noop, depends-on: [a]}",
			"  - {name: c, type: noop, depends-on: [b]}"), []string{
			"line 3: dependency cycle: a -> b -> a (each task depends on the one before it)"}},
		{"self dependency is not also a cycle", wf("  - {name: a, type: noop, depends-on: [a, b]}", "  - {name: b, type: noop}"), []string{
			`line 3: task "a" depends on itself`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse([]byte(tt.yaml))
			if s != nil {
				t.Errorf("Parse returned a spec along with errors: %+v", s)
			}
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	manyTasks := func(n int) string {
		var b strings.Builder
		b.WriteString("name: w\ntasks:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: t%d, type: noop}\n", i)
		}
		return b.String()
	}
	// padded is a valid workflow of size bytes, filled up with a comment.
	padded := func(size int) string {
		head := "name: w\ntasks: [{name: a, type: noop}]\n#"
		return head + strings.Repeat("x", size-len(head)-1) + "\n"
	}
	// Each level merges the one before ten times: 10^7 keys to look at in six short lines.
	aliasBomb := "name: w\nx-defs:\n  - &e0 {A: x, B: x, C: x, D: x, E: x, F: x, G: x, H: x, I: x, J: x}\n"
	for i := 1; i <= 6; i++ {
		prev := fmt.Sprintf("*e%d", i-1)
		aliasBomb += fmt.Sprintf("  - &e%d {<<: [%s]}\n", i, strings.TrimSuffix(strings.Repeat(prev+", ", 10), ", "))
	}
	aliasBomb += "tasks:\n  - {name: a, type: noop, env: *e6}\n"

	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"largest file", padded(MaxFileSize), nil},
		{"file too large", padded(MaxFileSize + 1), []string{
			"the file is larger than 1048576 bytes (1 MiB), the limit for a workflow file"}},
		{"most tasks", manyTasks(MaxTasks), nil},
		{"too many tasks", manyTasks(MaxTasks + 1), []string{"line 3: the workflow has 10001 tasks; the limit is 10000"}},
		{"alias bomb", aliasBomb, []string{
			`line 2: unknown field "x-defs" in the workflow`,
			"the document expands to more than 524288 YAML nodes through aliases (*name) and merge keys (<<)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.yaml))
			if got := problems(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("Parse errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func TestParseSamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want *Spec
	}{
		{"fan-out-fan-in.yaml", &Spec{
			Name:        "nightly-report",
			Description: "Extract once, transform in three parallel parts, load the result.",
			Params:      stringParams(map[string]string{"region": "eu", "day": "2026-11-01"}),
			Tasks: []Task{
				{Name: "extract", Type: "shell", Command: "./extract.sh", Retries: 2,
					RetryInterval: Duration(30 * time.Second), Timeout: Duration(10 * time.Minute), Group: "default"},
				{Name: "transform-a", Type: "shell", Command: "./transform.sh a", DependsOn: []string{"extract"}, Group: "default"},
				{Name: "transform-b", Type: "shell", Command: "./transform.sh b", DependsOn: []string{"extract"},
					Env: map[string]string{"PART": "b"}, Group: "default"},
				{Name: "transform-c", Type: "shell", Command: "./transform.sh c", DependsOn: []string{"extract"}, Group: "default"},
				{Name: "load", Type: "shell", Command: "./load.sh a b c\necho loaded\n", Workdir: "/srv/report",
					DependsOn: []string{"transform-a", "transform-b", "transform-c"}, Priority: 10, Group: "db-hosts", Pool: "warehouse"},
				{Name: "done", Type: "noop", DependsOn: []string{"load"}, Group: "default"},
			},
		}},
		{"all-fields.yaml", &Spec{
			Name:        "Every_field.v1",
			Description: "A workflow that sets every field,\non two lines.\n",
			Params:      stringParams(map[string]string{"region": "eu", "day": "2026-11-01", "port": "8080", "empty": ""}),
			Tasks: []Task{
				{Name: "first", Type: "noop", Retries: 100, RetryInterval: Duration(90 * time.Minute),
					Timeout: Duration(1500 * time.Millisecond), Priority: -1000, Group: "gpu_hosts", Pool: "pool.1",
					Env: map[string]string{"_UNDERSCORE": "1", "HOME_DIR": "~/x", "EMPTY": ""}},
				{Name: "second", Type: "shell", Command: `printf "%s\n" "$HOME_DIR"`, Workdir: "/tmp",
					DependsOn: []string{"first"}, Retries: 16, Priority: 1000, Group: "default"},
			},
		}},
		{"merge-keys.yaml", &Spec{
			Name: "merge-keys",
			Tasks: []Task{
				{Name: "one", Type: "shell", Command: "./step.sh one", Retries: 3, Group: "batch",
					Env: map[string]string{"STAGE": "prod"}},
				{Name: "two", Type: "shell", Command: "./step.sh two", Retries: 3, Group: "batch",
					Env: map[string]string{"STAGE": "prod"}, DependsOn: []string{"one"}},
				{Name: "three", Type: "shell", Command: "./step.sh one", Retries: 1, Group: "batch",
					Timeout: Duration(5 * time.Minute), Env: map[string]string{"STAGE": "prod"}, DependsOn: []string{"one"}},
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			got, err := ParseFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatalf("ParseFile: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseFile:\ngot  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	got, err := Parse([]byte("name: w\nparams: {}\ntasks:\n  - name: a\n    type: noop\n    depends-on: []\n    env: {}\n    group: ''\n    timeout:\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	// Empty lists and maps become nil, as they come back from JSON.
	want := &Spec{Name: "w", Tasks: []Task{{Name: "a", Type: "noop", Group: DefaultGroup}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\ngot  %+v\nwant %+v", got, want)
	}
}

func TestParseFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path func(t *testing.T) string
		want []string
	}{
		{"problems carry the file name", func(*testing.T) string { return filepath.Join("testdata", "bad.yaml") }, []string{
			`testdata/bad.yaml: line 5: unknown field "comand" in task "extract" (did you mean "command"?)`,
			`testdata/bad.yaml: line 10: task "load": retries must be an integer, not "often"`,
		}},
		{"too large", func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "big.yaml")
			if err := os.WriteFile(path, make([]byte, MaxFileSize+10), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}, []string{"the file is larger than 1048576 bytes (1 MiB), the limit for a workflow file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path(t)
			_, err := ParseFile(path)
			got := problems(t, err)
			want := tt.want
			if !strings.HasPrefix(want[0], "testdata/") {
				want = []string{path + ": " + want[0]}
			}
			if !slices.Equal(got, want) {
				t.Errorf("ParseFile errors:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
		})
	}
}

func TestParseFileMissing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := ParseFile(path)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ParseFile(%q) = %v; want an error wrapping os.ErrNotExist", path, err)
	}
	if err != nil && !strings.Contains(err.Error(), path) {
		t.Errorf("ParseFile(%q) = %v; want the error to name the file", path, err)
	}
}

func TestDemoParses(t *testing.T) {
	t.Parallel()
	s, err := ParseFile(filepath.Join("..", "examples", "demo.yaml"))
	if err != nil {
		t.Fatalf("ParseFile: %v", err)
	}
	// The demo is meant to show a fan-out, a fan-in and a noop.
	if got := s.Roots(); len(got) != 1 {
		t.Errorf("Roots() = %v; want one root", got)
	}
	root, _ := s.Task(s.Roots()[0])
	fanOut := s.Downstream(root.Name)
	if len(fanOut) < 3 {
		t.Errorf("Downstream(%q) = %v; want a fan-out of at least 3 tasks", root.Name, fanOut)
	}
	order := s.Order()
	last, _ := s.Task(order[len(order)-1])
	if !slices.Equal(last.DependsOn, fanOut) {
		t.Errorf("last task %q depends on %v; want the fan-in of %v", last.Name, last.DependsOn, fanOut)
	}
	var types []string
	for _, task := range s.Tasks {
		types = append(types, task.Type)
	}
	if !slices.Contains(types, "noop") || !slices.Contains(types, "shell") || !slices.Contains(types, "agent") {
		t.Errorf("task types %v; want shell, noop and agent tasks", types)
	}
}

func TestTypes(t *testing.T) {
	t.Parallel()
	if got, want := Types(), []string{"agent", "llm", "noop", "sensor", "shell", "wait", "workflow"}; !slices.Equal(got, want) {
		t.Errorf("Types() = %v; want %v", got, want)
	}
}
