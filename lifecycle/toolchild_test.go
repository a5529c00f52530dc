package lifecycle_test

import (
	"errors"
	"testing"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

// TestToolChildStartsOncePerCall: a workflow tool's call starts one child, linked to the
// agent's task, whatever attempt runs it; a stale token starts nothing; a workflow not stored
// or params it refuses are errors the model is told.
func TestToolChildStartsOncePerCall(t *testing.T) {
	t.Parallel()
	b := setupPause(t, "")
	store(b.ctx, t, b.db, "name: report\nparams: {day: {type: string}}\ntasks:\n  - {name: only, type: noop}\n")
	wf := submit(b.ctx, t, b.db, b.spec)
	got, err := lifecycle.Claim(b.ctx, b.db, "w1", []string{"default"}, 1, true)
	if err != nil || len(got) != 1 || got[0].WorkflowInstanceID != wf {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	tok := got[0].Token()
	child, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-1", "report", 0, map[string]string{"day": "monday"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-1", "report", 0, map[string]string{"day": "monday"})
	if err != nil || again != child {
		t.Fatalf("the call's second start = %d, %v; want its child %d again", again, err, child)
	}
	c, err := b.db.WorkflowGet(b.ctx, child)
	if err != nil || c.WorkflowName != "report" {
		t.Fatalf("child = %+v, %v", c, err)
	}
	if ended, _, _, _, err := lifecycle.ToolChildResult(b.ctx, b.db, child); err != nil || ended {
		t.Errorf("a new child: ended %t, %v; want running", ended, err)
	}
	var refused *lifecycle.ToolChildError
	if _, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-2", "nothing", 0, nil); !errors.As(err, &refused) {
		t.Errorf("a workflow not stored: %v, want a ToolChildError", err)
	}
	var paramsErr *lifecycle.ParamsError
	if _, err := lifecycle.StartToolChild(b.ctx, b.db, tok, "zk-1-1-3", "report", 0, map[string]string{"dya": "x"}); !errors.As(err, &paramsErr) {
		t.Errorf("refused params: %v, want a ParamsError", err)
	}
	stale := tok
	stale.Attempt++
	if _, err := lifecycle.StartToolChild(b.ctx, b.db, stale, "zk-1-1-4", "report", 0, map[string]string{"day": "x"}); !errors.Is(err, dao.ErrTokenRefused) {
		t.Errorf("a stale token: %v, want ErrTokenRefused", err)
	}
	var n int
	if err := b.db.SQL().GetContext(b.ctx, &n, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'report'`); err != nil || n != 1 {
		t.Errorf("%d instances of report, %v; want the one child", n, err)
	}
}
