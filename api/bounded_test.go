package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/zksched/zksched/workflow"
	"github.com/zksched/zksched/workflow/workflowtest"
)

// maxErrorAnswer is the most an answer to a hostile workflow file may take.
const maxErrorAnswer = 64 << 10

// TestHostileDefinitionIsRefusedSmall posts hostile workflow files of up to 1 MiB: each is
// refused with a 400 whose body stays under 64 KiB, and nothing is stored.
func TestHostileDefinitionIsRefusedSmall(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	shapes := append(workflowtest.All(1<<20-4096),
		workflowtest.Hostile{Name: "the reported attack", YAML: workflowtest.AliasBomb(900<<10, 300)},
		workflowtest.Hostile{Name: "many errors of angle brackets", YAML: []byte(strings.ReplaceAll(string(workflowtest.ManyErrors(1<<20-4096)), "k", "<"))})
	for _, h := range shapes {
		t.Run(h.Name, func(t *testing.T) {
			r := b.do(t, "POST", "/api/v1/definitions", string(h.YAML), "Content-Type", "application/yaml")
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400; body %.300s", r.status, r.body)
			}
			if len(r.body) >= maxErrorAnswer {
				t.Errorf("the answer is %d bytes; want under %d", len(r.body), maxErrorAnswer)
			}
			if msg := r.errorMessage(t); !strings.HasPrefix(msg, "the workflow file is rejected, nothing stored:") {
				t.Errorf("message %.300q", msg)
			}
		})
	}
	if r := b.do(t, "GET", "/api/v1/definitions", ""); !strings.Contains(r.body, `"items": []`) {
		t.Errorf("a hostile file was stored: %s", r.body)
	}
}

// TestParamsFromTheAPIFollowTheFileRules: POST workflow-instances and a schedule trigger
// refuse params a workflow file could not have, with a 400 naming the problem, and create
// nothing.
func TestParamsFromTheAPIFollowTheFileRules(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	file := "name: nightly\nschedule: {cron: '30 2 * * *'}\ntasks:\n  - {name: t, type: noop}\n"
	if r := b.do(t, "POST", "/api/v1/definitions", file, "Content-Type", "application/yaml"); r.status != http.StatusOK {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	many := make([]string, workflow.MaxParams+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"p%d": "v"`, i)
	}
	for _, tc := range []struct{ name, params, msg string }{
		{"a name that is no variable", `{"my-day": "x"}`, `params: name "my-day" is invalid`},
		{"a name over 128 bytes", `{"` + strings.Repeat("n", 129) + `": "x"}`, "use 1 to 128 letters"},
		{"a value over 64 KiB", `{"big": "` + strings.Repeat("v", 64<<10+1) + `"}`, "params: big is 65537 bytes; a value is at most 65536"},
		{"NUL", `{"a": "x\u0000y"}`, "params: a is not text"},
		{"too many", "{" + strings.Join(many, ", ") + "}", "params: 101 of them; a run has at most 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []struct{ path, body string }{
				{"/api/v1/workflow-instances", `{"name": "nightly", "params": ` + tc.params + `}`},
				{"/api/v1/schedules/nightly/trigger", `{"params": ` + tc.params + `}`},
			} {
				r := b.do(t, "POST", req.path, req.body, "Content-Type", "application/json")
				if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), tc.msg) {
					t.Errorf("%s: %d %.300s; want 400 with %q", req.path, r.status, r.body, tc.msg)
				}
			}
		})
	}
	if r := b.do(t, "GET", "/api/v1/workflow-instances", ""); !strings.Contains(r.body, `"items": []`) {
		t.Errorf("an instance was created: %s", r.body)
	}
}

// TestDefinitionVersionsArePaged stores 3,000 versions of one definition and walks them a
// page at a time, older then newer: every version once, newest first, no gap.
func TestDefinitionVersionsArePaged(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	const n = 3000
	if _, err := b.db.SQL().Exec(`INSERT INTO workflow_definition (name, version, spec, task_count, has_timeout, when_full_skip)
		SELECT 'many', v, jsonb_build_object('name', 'many', 'tasks', jsonb_build_array(jsonb_build_object('name', 't', 'type', 'noop'))),
		       1, false, false
		FROM generate_series(1, $1) v`, n); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Name  string `json:"name"`
		Items []struct {
			Version int             `json:"version"`
			Spec    json.RawMessage `json:"spec"`
		} `json:"items"`
		Older int `json:"older"`
		Newer int `json:"newer"`
	}
	var got []int
	var p page
	path := "/api/v1/definitions/many?limit=700"
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not end")
		}
		r := b.do(t, "GET", path, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		p = page{}
		r.json(t, &p)
		for _, it := range p.Items {
			if it.Spec != nil {
				t.Fatalf("the list carries specs")
			}
			got = append(got, it.Version)
		}
		if p.Older == 0 {
			break
		}
		path = fmt.Sprintf("/api/v1/definitions/many?limit=700&before=%d", p.Older)
	}
	if len(got) != n {
		t.Fatalf("%d versions listed, want %d", len(got), n)
	}
	for i, v := range got {
		if v != n-i {
			t.Fatalf("version #%d is %d, want %d: a gap or a duplicate", i, v, n-i)
		}
	}
	// Back up from the last page with after=.
	var back []int
	for p.Newer != 0 {
		p = page{}
		b.do(t, "GET", fmt.Sprintf("/api/v1/definitions/many?limit=700&after=%d", got[len(got)-1-len(back)]), "").json(t, &p)
		for i := len(p.Items) - 1; i >= 0; i-- {
			back = append(back, p.Items[i].Version)
		}
		if len(back) > n {
			t.Fatal("paging back does not end")
		}
	}
	if len(back) != n-1 || back[0] != 2 || back[len(back)-1] != n {
		t.Errorf("paging back listed %d versions from %v; want 2..%d", len(back), back[:min(len(back), 3)], n)
	}
	if r := b.do(t, "GET", "/api/v1/definitions/many/versions/1234", ""); r.status != http.StatusOK || !strings.Contains(r.body, `"version": 1234`) ||
		!strings.Contains(r.body, `"spec"`) {
		t.Errorf("version 1234: %d %.300s", r.status, r.body)
	}
	for path, status := range map[string]int{
		"/api/v1/definitions/many/versions/3001": http.StatusNotFound,
		"/api/v1/definitions/ghost":              http.StatusNotFound,
		"/api/v1/definitions/many?limit=1001":    http.StatusBadRequest,
		"/api/v1/definitions/many?bogus=1":       http.StatusBadRequest,
	} {
		if r := b.do(t, "GET", path, ""); r.status != status {
			t.Errorf("%s: %d, want %d", path, r.status, status)
		}
	}
}

// TestDefinitionListIsPaged stores 120 definitions and walks the list 50 at a time by name:
// each once, in order; the page of the UI links to the next one.
func TestDefinitionListIsPaged(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	if _, err := b.db.SQL().Exec(`INSERT INTO workflow_definition (name, version, spec, has_timeout, when_full_skip)
		SELECT format('wf-%s', lpad(i::text, 3, '0')), v, '{}'::jsonb, false, false
		FROM generate_series(1, 120) i, generate_series(1, 2) v`); err != nil {
		t.Fatal(err)
	}
	var names []string
	path := "/api/v1/definitions?limit=50"
	for range 10 {
		var p struct {
			Items []struct {
				Name     string `json:"name"`
				Versions int    `json:"versions"`
			} `json:"items"`
			Next string `json:"next"`
		}
		b.do(t, "GET", path, "").json(t, &p)
		for _, it := range p.Items {
			if it.Versions != 2 {
				t.Errorf("%s has %d versions, want 2", it.Name, it.Versions)
			}
			names = append(names, it.Name)
		}
		if p.Next == "" {
			break
		}
		path = "/api/v1/definitions?limit=50&after=" + p.Next
	}
	if len(names) != 120 || names[0] != "wf-001" || names[119] != "wf-120" {
		t.Fatalf("listed %d definitions from %v; want wf-001..wf-120", len(names), names[:min(3, len(names))])
	}
	for i := 1; i < len(names); i++ {
		if names[i] <= names[i-1] {
			t.Fatalf("%s after %s: out of order or twice", names[i], names[i-1])
		}
	}
	page := b.do(t, "GET", "/definitions", "").body
	if !strings.Contains(page, `href="/definitions?after=wf-050"`) || strings.Contains(page, "wf-051") {
		t.Errorf("the definitions page does not stop at 50 with a link to the next")
	}
	if r := b.do(t, "GET", "/definitions?after=wf-050", ""); !strings.Contains(r.body, "wf-051") || strings.Contains(r.body, "wf-050<") {
		t.Errorf("the second page of definitions: %d", r.status)
	}
}
