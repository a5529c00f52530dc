package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
)

// TestOutputsPassWholeOrFailWithTheirLimit runs, through a master and a worker on
// PostgreSQL: a 200 KB output that the next shell task reads whole from its file (too long
// for its variable); a for-each over 100 items of 1 KB, rendered from a 100 KB output, whose
// 100 KB array its next task reads; an output over its output-limit that fails its task,
// naming the limit and the size; and one that output-overflow: truncate cuts and marks.
func TestOutputsPassWholeOrFailWithTheirLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorkerSlots(t, "w1", 8, time.Second)
	id := b.submit(t, `
name: outputs
tasks:
  - {name: big, type: shell, command: "head -c 200000 /dev/zero | tr '\\0' x; echo"}
  - name: read-big
    type: shell
    depends-on: [big]
    command: |
      test -z "${ZKSCHED_UPSTREAM_big_OUTPUT+set}" || { echo "the 200 KB output is in a variable"; exit 1; }
      echo "$(tr -d x < "$ZKSCHED_UPSTREAM_big_OUTPUT_FILE" | wc -c) $(wc -c < "$ZKSCHED_UPSTREAM_big_OUTPUT_FILE")"
  - name: list
    type: shell
    command: |
      kb=$(head -c 1000 /dev/zero | tr '\0' a)
      printf '['; for i in $(seq 0 99); do [ "$i" -gt 0 ] && printf ','; printf '"%s"' "$kb"; done; echo ']'
  - name: each
    type: shell
    depends-on: [list]
    for-each: "{{ .upstream.list.output }}"
    command: 'printf "%03d%s\n" "$ZKSCHED_INDEX" "$ZKSCHED_ITEM"'
  - name: after-each
    type: shell
    depends-on: [each]
    command: 'echo "$(tr -cd , < "$ZKSCHED_UPSTREAM_each_OUTPUT_FILE" | wc -c) ${#ZKSCHED_UPSTREAM_each_OUTPUT}"'
  - {name: over, type: shell, output-limit: 1024, command: "head -c 3000 /dev/zero | tr '\\0' o; echo"}
  - {name: cut, type: shell, output-limit: 1024, output-overflow: truncate, command: "head -c 3000 /dev/zero | tr '\\0' c; echo"}
`)
	// 100 shell tasks of their own: more than waitDone's 30 s on a loaded machine.
	testenv.WaitFor(t, 5*time.Minute, 50*time.Millisecond, "the workflow instance to finish", func() bool {
		wf, err := b.db.WorkflowGet(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return wf.State.Terminal()
	})
	_, tasks := b.waitDone(t, id)
	for name, want := range map[string]dao.TaskState{"big": dao.TaskSucceeded, "read-big": dao.TaskSucceeded,
		"list": dao.TaskSucceeded, "each": dao.TaskSucceeded, "after-each": dao.TaskSucceeded,
		"over": dao.TaskFailed, "cut": dao.TaskSucceeded} {
		if got := tasks[name]; got.State != want {
			t.Errorf("task %s is %s (error %q), want %s", name, got.State, deref(got.Error), want)
		}
	}
	if got := deref(tasks["big"].Output); len(got) != 200_000 {
		t.Errorf("big's output is %d bytes, want 200000", len(got))
	}
	if got := deref(tasks["read-big"].Output); got != "0 200000" {
		t.Errorf("read-big read %q from its file, want 200000 bytes of x: %q", got, "0 200000")
	}
	var items []string
	if err := json.Unmarshal([]byte(deref(tasks["each"].Output)), &items); err != nil || len(items) != 100 {
		t.Fatalf("each's output: %d items (%v), want 100", len(items), err)
	}
	if want := "042" + strings.Repeat("a", 1000); items[42] != want {
		t.Errorf("item 42's output is %.20q…, want %.20q…", items[42], want)
	}
	if got, want := deref(tasks["after-each"].Output), "99 "+strconv.Itoa(len(deref(tasks["each"].Output))); got != want {
		t.Errorf("after-each read %q, want %q (99 commas, and the array's size in its variable)", got, want)
	}
	for _, want := range []string{"3000 bytes", "1024 bytes", "output-limit"} {
		if e := deref(tasks["over"].Error); !strings.Contains(e, want) {
			t.Errorf("over's error %q does not name %q", e, want)
		}
	}
	if tasks["over"].Output != nil {
		t.Errorf("over failed and kept an output of %d bytes", len(*tasks["over"].Output))
	}
	cut, err := b.db.TaskGet(b.ctx, tasks["cut"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !cut.OutputTruncated || deref(cut.Output) != strings.Repeat("c", 1024) {
		t.Errorf("cut: %d bytes, truncated %v; want 1024, marked truncated", len(deref(cut.Output)), cut.OutputTruncated)
	}
	if tasks["big"].OutputTruncated {
		t.Error("big's output, whole, is marked truncated")
	}
}

// TestModelOutputsHonourTheLimit: an llm's completion and an agent's last step are held to
// the task's output-limit as a shell task's line is.
func TestModelOutputsHonourTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := llmtest.New(t)
	b.startLLMWorker(t, "w1", srv, 4)
	id := b.submit(t, `
name: model-limits
tasks:
  - {name: over, type: llm, provider: test, prompt: one, output-limit: 8}
  - {name: cut, type: llm, provider: test, prompt: two, output-limit: 8, output-overflow: truncate}
  - {name: agent-over, type: agent, provider: test, output-limit: 8, steps: [{name: s, prompt: three}]}
  - {name: fits, type: llm, provider: test, prompt: four}
`)
	_, tasks := b.waitDone(t, id)
	for _, name := range []string{"over", "agent-over"} {
		if ti := tasks[name]; ti.State != dao.TaskFailed || !strings.Contains(deref(ti.Error), "over the task's output-limit of 8 bytes") {
			t.Errorf("%s: %s, error %q; want failed naming the limit", name, ti.State, deref(ti.Error))
		}
	}
	cut, err := b.db.TaskGet(b.ctx, tasks["cut"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := llmtest.Answer("two")[:8]; cut.State != dao.TaskSucceeded || deref(cut.Output) != want || !cut.OutputTruncated {
		t.Errorf("cut: %s %q (truncated %v); want succeeded %q, truncated", cut.State, deref(cut.Output), cut.OutputTruncated, want)
	}
	if fits := tasks["fits"]; fits.State != dao.TaskSucceeded || deref(fits.Output) != llmtest.Answer("four") {
		t.Errorf("fits: %s %q", fits.State, deref(fits.Output))
	}
}

// TestOutputLimitOverTheWorkersMax: a task whose output-limit is over its worker's
// worker.output-limit-max fails without running, naming both.
func TestOutputLimitOverTheWorkersMax(t *testing.T) {
	t.Parallel()
	b := setup(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Config{ID: "w1", Groups: []string{"default"}, Slots: 2, PollInterval: 100 * time.Millisecond,
		ShutdownTimeout: time.Second, LogLimit: 1 << 20, Log: zerolog.Nop(), OutputLimit: 1024, OutputLimitMax: 4096}, b.db, openGate{},
		executor.Set{"shell": executor.Shell{Self: self, KillGrace: 500 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	dir := t.TempDir()
	id := b.submit(t, `
name: asks-too-much
tasks:
  - {name: greedy, type: shell, output-limit: 8192, command: 'touch `+dir+`/ran; echo ran'}
  - {name: default-limit, type: shell, command: "head -c 2000 /dev/zero | tr '\\0' d; echo"}
`)
	_, tasks := b.waitDone(t, id)
	want := "output-limit 8192 bytes (8.0 KiB) is over this worker's worker.output-limit-max of 4096 bytes (4.0 KiB)"
	if g := tasks["greedy"]; g.State != dao.TaskFailed || deref(g.Error) != want {
		t.Errorf("greedy: %s, error %q; want failed: %q", g.State, deref(g.Error), want)
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Error("the task over the maximum ran")
	}
	if d := tasks["default-limit"]; d.State != dao.TaskFailed || !strings.Contains(deref(d.Error), "over the task's output-limit of 1024 bytes") {
		t.Errorf("default-limit: %s, error %q; want failed by the worker's output-limit of 1024", d.State, deref(d.Error))
	}
}
