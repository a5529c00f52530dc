package worker_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
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
