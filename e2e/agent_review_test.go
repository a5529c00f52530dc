package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// lockedBuffer is a bytes.Buffer a process writes to while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitAgentPaused waits until the agent task draft of workflow instance wf waits at its step
// approve, and returns it.
func waitAgentPaused(t *testing.T, e *e2e, wf int64) dao.TaskInstance {
	t.Helper()
	waitUntil(t, 60*time.Second, "the draft to wait at approve", func() bool {
		return e.tasks(t, wf)["draft"].State == dao.TaskWaiting
	})
	draft := e.tasks(t, wf)["draft"]
	if draft.PausedStep == nil || *draft.PausedStep != "approve" {
		t.Fatalf("draft = %+v; want it paused at approve", draft)
	}
	return draft
}

// TestDocsAgentReview runs the commands docs/workflows.md gives for examples/agent-review.yaml
// as printed, in bash: submit, wait for the draft to pause at approve, signal it with the
// text to publish, wait for the end. The workflow ends with the approved text published.
func TestDocsAgentReview(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/workflows.md", "Agents that wait for a person", "sh", 1)
	quoted := regexp.MustCompile(`zksched signal \$draft --output (".*")`).FindStringSubmatch(block)
	if quoted == nil {
		t.Fatalf("the docs' commands signal no draft with an --output this test can read:\n%s", block)
	}
	text, err := strconv.Unquote(quoted[1])
	if err != nil {
		t.Fatalf("the signal's text %s is not one quoted string: %v", quoted[1], err)
	}
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker")
	out, _ := e.docScript(t, block)
	if !strings.Contains(out, "succeeded") {
		t.Errorf("the last status does not say succeeded:\n%s", out)
	}
	if o := e.tasks(t, 1)["publish"].Output; o == nil || *o != "published: "+text {
		t.Errorf("publish output = %v, want the approved text", o)
	}
}

// TestAgentReviewWait: submit --wait of examples/agent-review.yaml says which task to signal
// and waits; the signal, with the id it printed, lets it end with the approved text
// published (docs/workflows.md, after the commands).
func TestAgentReviewWait(t *testing.T) {
	t.Parallel()
	const text = "Agents now give their worker slot back while they wait for a person."
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker")
	submit := exec.Command(e.Bin, "submit", filepath.Join(repoRoot(), "examples", "agent-review.yaml"), "--wait")
	submit.Env = append(os.Environ(), e.Env...)
	var out lockedBuffer
	submit.Stdout, submit.Stderr = &out, &out
	if err := submit.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- submit.Wait() }()
	t.Cleanup(func() { _ = submit.Process.Kill() })

	// The id to signal, as a user reads it in what --wait prints.
	waiting := regexp.MustCompile(`draft +waiting at its step approve: zksched signal (\d+) --output TEXT \[--fail\], or Approve on its page`)
	var id string
	waitUntil(t, 60*time.Second, "submit --wait to say which task to signal", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("submit --wait ended before the signal: %v\n%s", err, out.String())
		default:
		}
		if m := waiting.FindStringSubmatch(out.String()); m != nil {
			id = m[1]
			return true
		}
		return false
	})
	if draft := waitAgentPaused(t, e, 1); strconv.FormatInt(draft.ID, 10) != id {
		t.Fatalf("submit --wait named task %s to signal; the draft is %d", id, draft.ID)
	}
	signal := []string{"signal", id, "--output", text}
	if out, code := e.Run(signal...); code != 0 || !strings.Contains(out, "resumed at the step after approve") {
		t.Fatalf("%s: exit %d\n%s", strings.Join(signal, " "), code, out)
	}
	select {
	case err := <-exited:
		if err != nil || !strings.Contains(out.String(), "workflow instance 1 succeeded") {
			t.Fatalf("submit --wait: %v\n%s\nwant it to end succeeded", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("submit --wait did not end within 60s of the signal:\n%s", out.String())
	}
	if o := e.tasks(t, 1)["publish"].Output; o == nil || *o != "published: "+text {
		t.Errorf("publish output = %v, want the approved text", o)
	}
}

// TestBrowserApprovesAgentReview: a person opens the paused agent of
// examples/agent-review.yaml in the UI, sees which step waits and the draft, approves it with
// the text to publish, and the publish task succeeds with that text.
func TestBrowserApprovesAgentReview(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "", "ZKSCHED_API_TOKEN="+uiToken)
	master := e.Master("master")
	e.Worker("worker")
	if out, code := e.Run("submit", filepath.Join(repoRoot(), "examples", "agent-review.yaml")); code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	draft := waitAgentPaused(t, e, 1)
	base := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	b := newBrowser(t)
	b.do(t, "log in", chromedp.Navigate(base+"/login?next=/tasks"), chromedp.WaitVisible(css("#login-form")),
		chromedp.SetValue(css("#token"), uiToken), chromedp.Click(css("#login")), chromedp.WaitVisible(css("#tasks")))

	b.do(t, "open the paused agent", chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", base, draft.ID)),
		chromedp.WaitVisible(css("#signal")))
	b.screenshot(t, "agent-paused")
	if got := b.text(t, "#paused-step"); !strings.Contains(got, "paused at its step approve") {
		t.Errorf("the page says %q; want it to name the step that waits", got)
	}
	if got := b.text(t, "#paused-at"); !strings.Contains(got, "step approve") {
		t.Errorf("the facts say %q; want the paused step", got)
	}
	if got := b.text(t, "#checkpoints"); !strings.Contains(got, "write") {
		t.Errorf("the checkpoints read %q; want the draft of step write to read before approving", got)
	}
	const approved = "Agents now wait for a person without holding a worker."
	b.do(t, "approve it", chromedp.SendKeys(css("#signal-output"), approved), chromedp.Click(css("#approve")),
		chromedp.WaitVisible(css("#flash")))
	if got := b.text(t, "#flash"); !strings.Contains(got, "the agent is queued to go on") {
		t.Errorf("flash after approving reads %q", got)
	}
	waitUntil(t, 60*time.Second, "the workflow to succeed", func() bool {
		wf, err := e.db.WorkflowGet(context.Background(), 1)
		return err == nil && wf.State == dao.WorkflowSucceeded
	})
	ts := e.tasks(t, 1)
	if o := ts["publish"].Output; o == nil || *o != "published: "+approved {
		t.Errorf("publish output = %v, want the approved text", o)
	}
	if o := ts["draft"].Output; o == nil || *o != approved {
		t.Errorf("draft output = %v, want the approval, its last step's output", o)
	}
	b.do(t, "open publish", chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", base, ts["publish"].ID)),
		chromedp.WaitVisible(css("#output")))
	b.screenshot(t, "agent-published")
	if got := b.text(t, "#output"); !strings.Contains(got, approved) {
		t.Errorf("publish's page shows the output %q, want the approved text", got)
	}
}
