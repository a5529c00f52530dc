package workflow

import (
	"strings"
	"testing"
)

func TestOutputFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		task string
		err  string // "" for none
	}{
		{"{name: a, type: shell, command: x, output-limit: 4096, output-overflow: truncate}", ""},
		{"{name: a, type: llm, provider: p, prompt: x, output-limit: 67108864, output-overflow: fail}", ""},
		{"{name: a, type: shell, command: x, output-limit: 67108865}", "output-limit 67108865 is out of range"},
		{"{name: a, type: shell, command: x, output-limit: -1}", "output-limit -1 is out of range"},
		{"{name: a, type: shell, command: x, output-overflow: cut}", `unknown output-overflow "cut" (known: fail, truncate)`},
		{"{name: a, type: wait, output-limit: 10}", "output-limit bounds the output of tasks that run on workers"},
	} {
		spec, err := Parse([]byte("name: w\ntasks:\n  - " + tc.task + "\n"))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.task, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.task, err, tc.err)
		case tc.err == "" && (spec.Tasks[0].OutputLimit == 0 || spec.Tasks[0].OutputOverflow == ""):
			t.Errorf("%s: read as %+v", tc.task, spec.Tasks[0])
		}
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"abc", 5, "abc"}, {"abcdef", 3, "abc"}, {"aé", 2, "a"}, {"aé", 3, "aé"}, {"日本", 4, "日"}, {"x", 0, ""},
	} {
		if got := Truncate(tc.in, tc.limit); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}
