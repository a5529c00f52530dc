package workflow

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/zksched/zksched/workflow/workflowtest"
)

// maxAnswer is what the API promises about the answer to a hostile file: the errors Parse
// returns must fit in it with room for the JSON around them.
const maxAnswer = 64 << 10

// quotedRE finds the quoted values of a message.
var quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// checkBounded fails the test unless err is a refusal within the bounds Parse promises: at
// most MaxErrors errors plus the one saying the list stopped, no quoted value longer than
// MaxQuoted bytes (and its ellipsis), and all of it well under maxAnswer.
func checkBounded(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("Parse accepted a hostile file")
	}
	msgs := problems(t, err)
	if len(msgs) > MaxErrors+1 {
		t.Errorf("Parse returned %d errors; want at most %d", len(msgs), MaxErrors+1)
	}
	if n := len(err.Error()); n > maxAnswer/2 {
		t.Errorf("the errors are %d bytes; want at most %d", n, maxAnswer/2)
	}
	for _, m := range msgs {
		for _, q := range quotedRE.FindAllString(m, -1) {
			if len(q) > MaxQuoted+len(`"…"`)+16 {
				t.Errorf("a message quotes %d bytes: %.300s", len(q), m)
			}
		}
	}
	return msgs
}

func TestParseHostile(t *testing.T) {
	t.Parallel()
	for _, h := range workflowtest.All(MaxFileSize) {
		t.Run(h.Name, func(t *testing.T) {
			t.Parallel()
			if len(h.YAML) > MaxFileSize {
				t.Fatalf("the hostile file is %d bytes, over the limit it is meant to stay under", len(h.YAML))
			}
			_, err := Parse(h.YAML)
			checkBounded(t, err)
		})
	}
}

func TestParseStopsAfterMaxErrors(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("name: w\ntasks:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "  - {name: t%d, type: noop, colour%d: red}\n", i, i)
	}
	_, err := Parse([]byte(b.String()))
	msgs := checkBounded(t, err)
	if len(msgs) != MaxErrors+1 {
		t.Fatalf("Parse returned %d errors; want %d and the one that says it stopped:\n%s", len(msgs), MaxErrors,
			strings.Join(msgs, "\n"))
	}
	if want := `line 3: unknown field "colour0" in task "t0"`; msgs[0] != want {
		t.Errorf("first error %q; want %q", msgs[0], want)
	}
	if want := "stopped after 20 errors: fix these and check the file again for more"; msgs[MaxErrors] != want {
		t.Errorf("last error %q; want %q", msgs[MaxErrors], want)
	}

	// Validation problems stop at the same count, in file order.
	b.Reset()
	b.WriteString("name: w\ntasks:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "  - {name: t%d, type: bogus}\n", i)
	}
	_, err = Parse([]byte(b.String()))
	msgs = checkBounded(t, err)
	if len(msgs) != MaxErrors+1 || !strings.HasPrefix(msgs[0], `line 3: task "t0": unknown type "bogus"`) ||
		msgs[MaxErrors] != errStopped {
		t.Errorf("Parse errors:\n%s", strings.Join(msgs, "\n"))
	}
}

func TestParseQuotesAtMost200Bytes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 150) // 300 bytes: the cut must not split a character
	_, err := Parse([]byte(wf("  - {name: a, type: " + long + "}")))
	msgs := checkBounded(t, err)
	want := fmt.Sprintf(`line 3: task "a": unknown type "%s…" (known types: agent, llm, noop, sensor, shell, wait, workflow)`, strings.Repeat("é", 100))
	if len(msgs) != 1 || msgs[0] != want {
		t.Errorf("Parse errors:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), want)
	}

	// Every kind of message quotes values the same way: keys, names, durations, crons.
	key := strings.Repeat("k", 1000)
	for _, doc := range []string{
		"name: w\n" + key + ": 1\ntasks: [{name: a, type: noop}]\n",
		wf("  - {name: a, type: noop, timeout: " + key + "}"),
		wf("  - {name: a, type: noop, depends-on: [" + key + "]}"),
		wf("  - {name: " + key + ", type: noop}"),
		"name: w\nschedule: {cron: " + key + "}\ntasks: [{name: a, type: noop}]\n",
		"name: w\nschedule: {cron: '0 2 * * *', timezone: " + key + "}\ntasks: [{name: a, type: noop}]\n",
		wf("  - {name: a, type: llm, provider: p, prompt: '{{.upstream." + key + ".output}}'}"),
	} {
		_, err := Parse([]byte(doc))
		for _, m := range checkBounded(t, err) {
			if strings.Contains(m, strings.Repeat("k", MaxQuoted+1)) {
				t.Errorf("a message quotes more than %d bytes: %.300s", MaxQuoted, m)
			}
		}
	}
}

func TestParseAliasBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml []byte
		want []string
	}{
		{"the reported attack: 300 aliases of a large value", workflowtest.AliasBomb(900<<10, 300), []string{
			"the document expands to more than 4194304 bytes of values through aliases (*name): a value brought in by an alias counts each time"}},
		{"merge bomb", workflowtest.MergeBomb(7), []string{
			`line 2: unknown field "x-defs" in the workflow`,
			"the document expands to more than 524288 YAML nodes through aliases (*name) and merge keys (<<)"}},
		{"a mapping that merges itself", []byte(wf("  - {name: a, type: noop, env: &e {A: x, <<: *e}}")), []string{
			`line 3: a merge key (<<) in task "a": env brings in a mapping that contains it`}},
		{"merges nested too deep", mergeChain(34), []string{
			// The 33rd merge is refused where it is written: in t1's env, as t33 brings it in.
			`line 4: task "t33": env merges mappings (<<) more than 32 deep`,
			`line 5: task "t34": env merges mappings (<<) more than 32 deep`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.yaml)
			msgs := checkBounded(t, err)
			if !slices.Equal(msgs, tt.want) {
				t.Errorf("Parse errors:\n\t%s\nwant:\n\t%s", strings.Join(msgs, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

// mergeChain is a workflow of n tasks, each of whose env merges the one of the task before.
func mergeChain(n int) []byte {
	var b strings.Builder
	b.WriteString("name: w\ntasks:\n  - {name: t0, type: noop, env: &m0 {A: x}}\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - {name: t%d, type: noop, env: &m%d {<<: *m%d}}\n", i, i, i-1)
	}
	return []byte(b.String())
}

// BenchmarkParseHostile measures Parse on each hostile shape of 1 MiB: the time and the
// memory (B/op, allocated over the whole parse) a refusal costs.
//
//	go test -run '^$' -bench ParseHostile -benchmem ./workflow
func BenchmarkParseHostile(b *testing.B) {
	shapes := append(workflowtest.All(MaxFileSize),
		workflowtest.Hostile{Name: "reported alias bomb", YAML: workflowtest.AliasBomb(900<<10, 300)})
	for _, h := range shapes {
		b.Run(strings.ReplaceAll(h.Name, " ", "-"), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(h.YAML)))
			for b.Loop() {
				if _, err := Parse(h.YAML); err == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}
