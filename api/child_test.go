package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// TestChildWorkflowLinks: a workflow task and the child it started link to each other, in the
// API's JSON and on their pages.
func TestChildWorkflowLinks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	f := b.seed(t, 6)
	child := daotest.Submit(t, b.db, "child", map[string]any{"name": "child", "tasks": []map[string]any{{"name": "x", "type": "noop"}}})
	task, err := b.db.TaskCreateWaitingOnChild(b.ctx, dao.NewTask{WorkflowInstanceID: f.wf, Name: "publish",
		Type: "workflow", Group: "g"}, child)
	if err != nil {
		t.Fatal(err)
	}

	var tj struct {
		Child *int64 `json:"child_workflow_instance_id"`
	}
	if r := b.do(t, "GET", fmt.Sprintf("/api/v1/task-instances/%d", task), ""); r.status != 200 {
		t.Fatalf("task: %d %s", r.status, r.body)
	} else if r.json(t, &tj); tj.Child == nil || *tj.Child != child {
		t.Errorf("task's child_workflow_instance_id = %v, want %d", tj.Child, child)
	}
	var cj struct {
		ParentWorkflow *int64 `json:"parent_workflow_instance_id"`
		ParentTask     *int64 `json:"parent_task_instance_id"`
	}
	if r := b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d", child), ""); r.status != 200 {
		t.Fatalf("child: %d %s", r.status, r.body)
	} else if r.json(t, &cj); cj.ParentWorkflow == nil || *cj.ParentWorkflow != f.wf || cj.ParentTask == nil || *cj.ParentTask != task {
		t.Errorf("child's parent = %v, %v; want task %d of %d", cj.ParentWorkflow, cj.ParentTask, task, f.wf)
	}
	var pj struct {
		Parent *int64 `json:"parent_workflow_instance_id"`
		Tasks  []struct {
			Name  string `json:"name"`
			Child *int64 `json:"child_workflow_instance_id"`
		} `json:"tasks"`
	}
	if r := b.do(t, "GET", fmt.Sprintf("/api/v1/workflow-instances/%d", f.wf), ""); r.status != 200 {
		t.Fatalf("parent: %d %s", r.status, r.body)
	} else {
		r.json(t, &pj)
	}
	for _, tk := range pj.Tasks {
		if want := tk.Name == "publish"; (tk.Child != nil) != want || (want && *tk.Child != child) {
			t.Errorf("parent's task %s names child %v", tk.Name, tk.Child)
		}
	}
	if pj.Parent != nil {
		t.Errorf("a submitted instance names parent %d", *pj.Parent)
	}

	for _, c := range []struct {
		path string
		want []string
	}{
		{fmt.Sprintf("/tasks/%d", task), []string{fmt.Sprintf(`<a href="/workflows/%d" id="child-workflow">`, child)}},
		{fmt.Sprintf("/workflows/%d", child), []string{fmt.Sprintf(`<a href="/tasks/%d">%d publish</a>`, task, task),
			fmt.Sprintf(`<a href="/workflows/%d">workflow %d wf</a>`, f.wf, f.wf)}},
		{fmt.Sprintf("/workflows/%d", f.wf), []string{fmt.Sprintf(`→ <a href="/workflows/%d">workflow %d</a>`, child, child)}},
	} {
		r := b.do(t, "GET", c.path, "")
		for _, w := range c.want {
			if r.status != 200 || !strings.Contains(r.body, w) {
				t.Errorf("%s: %d, lacks %s", c.path, r.status, w)
			}
		}
	}
}
