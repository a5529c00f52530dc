package workflow

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// dag builds a Spec of noop tasks from "name:dep,dep" entries, in file order.
func dag(tasks ...string) *Spec {
	s := &Spec{Name: "w"}
	for _, entry := range tasks {
		name, deps, _ := strings.Cut(entry, ":")
		t := Task{Name: name, Type: "noop", Group: DefaultGroup}
		if deps != "" {
			t.DependsOn = strings.Split(deps, ",")
		}
		s.Tasks = append(s.Tasks, t)
	}
	return s
}

func TestOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec *Spec
		want []string
	}{
		{"chain", dag("a", "b:a", "c:b", "d:c"), []string{"a", "b", "c", "d"}},
		{"chain written backwards", dag("d:c", "c:b", "b:a", "a"), []string{"a", "b", "c", "d"}},
		{"no dependencies keep file order", dag("z", "y", "x"), []string{"z", "y", "x"}},
		{"diamond", dag("top", "left:top", "right:top", "bottom:left,right"), []string{"top", "left", "right", "bottom"}},
		{"diamond written bottom up", dag("bottom:left,right", "right:top", "left:top", "top"), []string{"top", "right", "left", "bottom"}},
		{"stacked diamonds", dag("a", "b1:a", "b2:a", "c:b1,b2", "d1:c", "d2:c", "e:d1,d2"),
			[]string{"a", "b1", "b2", "c", "d1", "d2", "e"}},
		// Ties go to the task written first, even when a later root becomes ready first.
		{"ties in file order", dag("late:early", "other", "early"), []string{"other", "early", "late"}},
		{"fan-out and fan-in", dag("s", "a:s", "b:s", "c:s", "j:c,a,b"), []string{"s", "a", "b", "c", "j"}},
		{"two independent chains interleave by file order", dag("a1", "b1", "a2:a1", "b2:b1"), []string{"a1", "b1", "a2", "b2"}},
		{"dependency listed twice", dag("a", "b:a,a"), []string{"a", "b"}},
		{"unknown dependency ignored", dag("a:ghost", "b:a"), []string{"a", "b"}},
		{"cycle left out", dag("a", "b:a,c", "c:b", "d:a"), []string{"a", "d"}},
		{"empty", &Spec{}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.spec.Order(); !slices.Equal(got, tt.want) {
				t.Errorf("Order() = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestOrderLongChain(t *testing.T) {
	t.Parallel()
	// The longest chain the limits allow, written backwards: the worst case for both Order
	// and the cycle check in Validate.
	var entries []string
	for i := MaxTasks - 1; i > 0; i-- {
		entries = append(entries, taskName(i)+":"+taskName(i-1))
	}
	entries = append(entries, taskName(0))
	s := dag(entries...)
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	order := s.Order()
	if len(order) != MaxTasks || order[0] != taskName(0) || order[MaxTasks-1] != taskName(MaxTasks-1) {
		t.Errorf("Order() has %d tasks from %s to %s; want %d from %s to %s", len(order), order[0], order[len(order)-1],
			MaxTasks, taskName(0), taskName(MaxTasks-1))
	}
}

func taskName(i int) string { return fmt.Sprintf("t%05d", i) }

func TestRootsAndDownstream(t *testing.T) {
	t.Parallel()
	s := dag("extract", "config", "a:extract", "b:extract,config", "c:extract", "load:a,b,c", "done:load")
	if got, want := s.Roots(), []string{"extract", "config"}; !slices.Equal(got, want) {
		t.Errorf("Roots() = %v; want %v", got, want)
	}
	tests := []struct {
		task string
		want []string
	}{
		{"extract", []string{"a", "b", "c"}},
		{"config", []string{"b"}},
		{"b", []string{"load"}},
		{"done", nil},
		{"missing", nil},
	}
	for _, tt := range tests {
		if got := s.Downstream(tt.task); !slices.Equal(got, tt.want) {
			t.Errorf("Downstream(%q) = %v; want %v", tt.task, got, tt.want)
		}
	}
}

func TestTask(t *testing.T) {
	t.Parallel()
	s := dag("a", "b:a")
	got, ok := s.Task("b")
	if !ok || got.Name != "b" || !slices.Equal(got.DependsOn, []string{"a"}) {
		t.Fatalf("Task(%q) = %+v, %v; want task b", "b", got, ok)
	}
	got.Priority = 7
	if s.Tasks[1].Priority != 7 {
		t.Errorf("a change through Task's pointer did not reach the spec")
	}
	if got, ok := s.Task("c"); ok || got != nil {
		t.Errorf("Task(%q) = %+v, %v; want nil, false", "c", got, ok)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "examples", "demo.yaml"))
	for _, file := range files {
		if filepath.Base(file) == "bad.yaml" {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			want, err := ParseFile(file)
			if err != nil {
				t.Fatalf("ParseFile: %v", err)
			}

			// YAML → Spec → JSON → Spec, as submit stores it and the master reads it.
			data, err := json.Marshal(want)
			if err != nil {
				t.Fatalf("json.Marshal: %v", err)
			}
			var fromJSON Spec
			if err := json.Unmarshal(data, &fromJSON); err != nil {
				t.Fatalf("json.Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(&fromJSON, want) {
				t.Errorf("after a JSON round trip:\ngot  %+v\nwant %+v\nJSON %s", &fromJSON, want, data)
			}

			// Spec → YAML → Parse: what the package writes, it reads back.
			out, err := yaml.Marshal(want)
			if err != nil {
				t.Fatalf("yaml.Marshal: %v", err)
			}
			fromYAML, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse of yaml.Marshal output: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(fromYAML, want) {
				t.Errorf("after a YAML round trip:\ngot  %+v\nwant %+v\nYAML:\n%s", fromYAML, want, out)
			}
		})
	}
}

func TestJSONReadsLikeTheFile(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(wf("  - name: a", "    type: shell", "    command: ls",
		"    retry-interval: 90s", "    retries: 1", "    depends-on: [b]", "  - {name: b, type: noop}")))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	want := `{"name":"w","tasks":[` +
		`{"name":"a","type":"shell","depends-on":["b"],"retries":1,"retry-interval":"1m30s","group":"default","command":"ls"},` +
		`{"name":"b","type":"noop","group":"default"}]}`
	if string(got) != want {
		t.Errorf("json.Marshal:\ngot  %s\nwant %s", got, want)
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Duration
		wantErr bool
	}{
		{`"30s"`, Duration(30 * time.Second), false},
		{`"1h30m"`, Duration(90 * time.Minute), false},
		{`"1.5s"`, Duration(1500 * time.Millisecond), false},
		{`"0s"`, 0, false},
		{`"0"`, 0, false},
		{`"-5m"`, Duration(-5 * time.Minute), false},
		{`"30"`, 0, true},
		{`"soon"`, 0, true},
		{`30000000000`, 0, true},
	}
	for _, tt := range tests {
		var got Duration
		err := json.Unmarshal([]byte(tt.in), &got)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("json.Unmarshal(%s) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if tt.wantErr {
			continue
		}
		var fromYAML Duration
		if err := yaml.Unmarshal([]byte(strings.Trim(tt.in, `"`)), &fromYAML); err != nil || fromYAML != tt.want {
			t.Errorf("yaml.Unmarshal(%s) = %v, %v; want %v", tt.in, fromYAML, err, tt.want)
		}
	}

	for _, d := range []Duration{0, Duration(time.Second), Duration(90 * time.Minute), Duration(-time.Millisecond)} {
		j, err := json.Marshal(d)
		if err != nil || string(j) != `"`+time.Duration(d).String()+`"` {
			t.Errorf("json.Marshal(%v) = %s, %v; want a quoted Go duration", d, j, err)
		}
		y, err := yaml.Marshal(d)
		if err != nil || string(y) != time.Duration(d).String()+"\n" {
			t.Errorf("yaml.Marshal(%v) = %q, %v; want a Go duration", d, y, err)
		}
	}
}
