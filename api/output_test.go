package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestTruncatedOutputIsMarked: a task whose output was truncated at its output-limit says so
// in the API's task view, in the workflow view's tasks (what `zksched status` reads), on its
// page and in its row of its workflow's page; a whole output is not marked.
func TestTruncatedOutputIsMarked(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	wf := daotest.Submit(t, b.db, "cut", map[string]any{"name": "cut"})
	if _, err := b.db.TaskCreateMany(b.ctx, []dao.NewTask{
		{WorkflowInstanceID: wf, Name: "cut", Type: "shell", State: dao.TaskQueued, Group: "cut"},
		{WorkflowInstanceID: wf, Name: "whole", Type: "shell", State: dao.TaskQueued, Group: "cut"}}); err != nil {
		t.Fatal(err)
	}
	claimed, err := b.db.TaskClaimQueued(b.ctx, "w1", []string{"cut"}, 2)
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	ids := map[string]int64{}
	for _, c := range claimed {
		ids[c.Name] = c.ID
		out := strings.Repeat("c", 1024)
		res := dao.AttemptResult{Outcome: dao.OutcomeSucceeded, Next: dao.TaskSucceeded, Output: &out, OutputTruncated: c.Name == "cut"}
		if err := b.db.TaskFinishIfRunning(b.ctx, c.Token(), res); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{"cut": `"output_truncated": true`, "whole": `"output_truncated": false`} {
		if got := b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", ids[name]), ""); !strings.Contains(got.body, want) {
			t.Errorf("task %s's view lacks %s:\n%.400s", name, want, got.body)
		}
	}
	var st struct {
		Tasks []struct {
			Name            string `json:"name"`
			OutputTruncated bool   `json:"output_truncated"`
		} `json:"tasks"`
	}
	b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d", wf), "").json(t, &st)
	if len(st.Tasks) != 2 {
		t.Fatalf("workflow view's tasks: %+v", st.Tasks)
	}
	for _, task := range st.Tasks {
		if task.OutputTruncated != (task.Name == "cut") {
			t.Errorf("workflow view: task %s output_truncated %v", task.Name, task.OutputTruncated)
		}
	}
	if page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", ids["cut"]), ""); !strings.Contains(page.body, `id="output-truncated"`) {
		t.Errorf("the truncated task's page does not say so:\n%s", between(page.body, "<h2>Output</h2>", "<h2>Attempts</h2>"))
	}
	if page := b.do(t, "GET", fmt.Sprintf("/tasks/%d", ids["whole"]), ""); strings.Contains(page.body, `id="output-truncated"`) {
		t.Error("the whole task's page says its output is truncated")
	}
	page := b.do(t, "GET", fmt.Sprintf("/workflows/%d", wf), "").body
	rows := between(page, `id="wf-tasks"`, "</table>")
	if n := strings.Count(rows, `class="badge truncated"`); n != 1 {
		t.Errorf("the workflow page marks %d tasks as truncated, want 1 (cut):\n%s", n, rows)
	}
}
