package workflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zksched/zksched/workflow/workflowtest"
)

// FuzzParse checks that no input makes Parse panic, that whatever it refuses is refused within
// the bounds of a rejection (MaxErrors, MaxQuoted), and that whatever it accepts is valid and
// survives the JSON round trip the master depends on. The seeds are the sample files and
// small hostile ones.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range append(files, filepath.Join("..", "examples", "demo.yaml")) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("name: w\ntasks:\n  - {name: a, type: noop, depends-on: [b]}\n  - {name: b, type: noop, depends-on: [a]}\n"))
	for _, h := range workflowtest.All(4 << 10) {
		f.Add(h.YAML)
	}
	f.Add([]byte("name: w\ntasks: [{name: a, type: noop, env: &e {A: x, <<: *e}}]\n"))
	f.Add([]byte("name: w\ntasks: [{name: a, type: agent, provider: p, prompt: hi, tools: [{name: t, description: d, type: shell, " +
		"command: x, arguments: &s {type: object, properties: {a: {type: [string, 'null'], <<: *s}}, required: [a, 1]}}]}]\n"))
	f.Add([]byte("name: w\ntasks: [{name: a, type: llm, provider: p, prompt: '{{range 2000000000}}x{{end}}'}]\n"))
	f.Add([]byte("name: w\ntasks: [{name: a, type: llm, provider: p, prompt: '{{range 10}}{{range $.params}}{{printf \"%5d\" 1}}{{end}}{{end}}'}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned a spec and an error: %v", err)
			}
			checkBounded(t, err)
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse accepted a spec that Validate refuses: %v", err)
		}
		if got := len(s.Order()); got != len(s.Tasks) {
			t.Fatalf("Order() has %d of %d tasks of an accepted spec", got, len(s.Tasks))
		}
		j, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		var back Spec
		if err := json.Unmarshal(j, &back); err != nil {
			t.Fatalf("json.Unmarshal: %v", err)
		}
		if !reflect.DeepEqual(&back, s) {
			t.Fatalf("JSON round trip changed the spec:\ngot  %+v\nwant %+v", &back, s)
		}
	})
}
