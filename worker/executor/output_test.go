package executor

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/workflow"
)

func TestShellReadsALongUpstreamOutputFromItsFile(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200_000)
	// The task's own output is the big one, read back from its file and printed whole; the
	// log gets the file's path, the size of each output and whether the variable was set.
	cmd := `wc -c < "$ZKSCHED_UPSTREAM_big_OUTPUT_FILE" >&2
echo "big var: ${ZKSCHED_UPSTREAM_big_OUTPUT+set}" >&2
echo "small var: $ZKSCHED_UPSTREAM_small_OUTPUT" >&2
echo "small file: $(cat "$ZKSCHED_UPSTREAM_small_OUTPUT_FILE")" >&2
echo "path: $ZKSCHED_UPSTREAM_big_OUTPUT_FILE" >&2
stat -c 'mode: %a' "$ZKSCHED_UPSTREAM_big_OUTPUT_FILE" "$(dirname "$ZKSCHED_UPSTREAM_big_OUTPUT_FILE")" >&2
cat "$ZKSCHED_UPSTREAM_big_OUTPUT_FILE"; echo`
	var log syncBuffer
	task := Task{ID: 7, Attempt: 2, Spec: workflow.Task{Command: cmd}, OutputLimit: workflow.DefaultOutputLimit,
		Upstream: map[string]workflow.Upstream{"big": {Output: big}, "small": {Output: "hello"}}}
	res := LimitOutput(task, shell(t).Run(context.Background(), task, &log))
	if res.Err != nil {
		t.Fatalf("run: %v\n%s", res.Err, log.String())
	}
	if res.Output != big || res.OutputTruncated {
		t.Errorf("output: %d bytes, truncated %v; want the 200000 bytes whole", len(res.Output), res.OutputTruncated)
	}
	got := log.String()
	for _, want := range []string{"200000\n", "big var: \n", "small var: hello\n", "small file: hello\n", "mode: 600\nmode: 700\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%.500s", want, got)
		}
	}
	_, path, _ := strings.Cut(got, "path: ")
	path, _, _ = strings.Cut(path, "\n")
	if !strings.Contains(path, "zksched-upstream-7-2-") {
		t.Errorf("the file %q is not in a folder named after the attempt", path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the upstream file outlived the attempt: stat %s: %v", path, err)
	}
}

func TestTaskEnvGivesAnOutputAsAVariableOnlyWhenItFits(t *testing.T) {
	t.Parallel()
	key := workflow.UpstreamEnv("a")
	fits := strings.Repeat("y", maxEnvString-len(key)-2) // "KEY=" + value + NUL
	task := Task{Upstream: map[string]workflow.Upstream{"a": {Output: fits}}, upstreamFiles: map[string]string{"a": "/f/a"}}
	env := task.Env()
	if !containsEnv(env, key+"="+fits) || !containsEnv(env, key+"_FILE=/f/a") {
		t.Errorf("an output of %d bytes, whose variable just fits, is not given as both variables", len(fits))
	}
	task.Upstream["a"] = workflow.Upstream{Output: fits + "y"}
	env = task.Env()
	if containsEnv(env, key+"="+fits+"y") || !containsEnv(env, key+"_FILE=/f/a") {
		t.Errorf("an output one byte longer: want only the file's variable")
	}
}

func containsEnv(env []string, kv string) bool {
	for _, e := range env {
		if e == kv {
			return true
		}
	}
	return false
}

func TestOutputOverTheLimitFailsTheTask(t *testing.T) {
	t.Parallel()
	task := Task{Spec: workflow.Task{Command: `head -c 300000 /dev/zero | tr '\0' z; echo`}, OutputLimit: 256 << 10}
	res := LimitOutput(task, shell(t).Run(context.Background(), task, io.Discard))
	var tooLarge *workflow.OutputTooLarge
	if !errors.As(res.Err, &tooLarge) {
		t.Fatalf("err = %v, want an OutputTooLarge", res.Err)
	}
	for _, want := range []string{"300000 bytes", "262144 bytes", "output-limit", "output-overflow: truncate"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q does not name %q", res.Err, want)
		}
	}
	if res.Output != "" {
		t.Errorf("a failed task kept %d bytes of output", len(res.Output))
	}
}

func TestOutputOverTheLimitTruncated(t *testing.T) {
	t.Parallel()
	task := Task{Spec: workflow.Task{Command: `printf '  '; head -c 300000 /dev/zero | tr '\0' z; echo '  '`,
		OutputOverflow: workflow.OverflowTruncate}, OutputLimit: 256 << 10}
	res := LimitOutput(task, shell(t).Run(context.Background(), task, io.Discard))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if !res.OutputTruncated || res.Output != strings.Repeat("z", 256<<10) {
		t.Errorf("output: %d bytes, truncated %v; want the first 262144 bytes, truncated", len(res.Output), res.OutputTruncated)
	}
}

func TestLimitOutputOfAModel(t *testing.T) {
	t.Parallel()
	// An llm's or an agent's completion comes whole; a truncated one is cut at a character.
	task := Task{Spec: workflow.Task{OutputOverflow: workflow.OverflowTruncate}, OutputLimit: 5}
	res := LimitOutput(task, Result{Output: "abcdé"}) // 6 bytes: é is two
	if res.Output != "abcd" || !res.OutputTruncated {
		t.Errorf("truncated to %q (%v), want %q", res.Output, res.OutputTruncated, "abcd")
	}
	task.Spec.OutputOverflow = ""
	if res := LimitOutput(task, Result{Output: "abcdé"}); res.Err == nil {
		t.Error("a 6-byte completion over a 5-byte limit did not fail")
	}
	if res := LimitOutput(task, Result{Output: "abcde"}); res.Err != nil || res.Output != "abcde" {
		t.Errorf("an output at the limit: %q, %v", res.Output, res.Err)
	}
}

func TestLastLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		keep     int
		out      string
		fullSize int
	}{
		{"a\n  b c \t\n \n", 10, "b c", 0},
		{"a\nlast", 10, "last", 0},
		{"  0123456789  \n", 10, "0123456789", 0},
		{"  0123456789ab  \n\n", 10, "0123456789", 12},
		{"", 10, "", 0},
	} {
		l := &lastLine{w: io.Discard, keep: tc.keep}
		for _, b := range []byte(tc.in) { // a byte a write: a line split across writes
			l.Write([]byte{b})
		}
		if out, size := l.last(); out != tc.out || size != tc.fullSize {
			t.Errorf("%q keeping %d: got %q, %d; want %q, %d", tc.in, tc.keep, out, size, tc.out, tc.fullSize)
		}
	}
}

// TestTaskUserReadsItsUpstreamFile: the task user owns its upstream outputs' folder and files.
func TestTaskUserReadsItsUpstreamFile(t *testing.T) {
	t.Parallel()
	u := testenv.TaskUser(t)
	tu, err := LookupTaskUser(u.Username)
	if err != nil {
		t.Fatal(err)
	}
	sh := shell(t)
	sh.User = tu
	task := Task{Spec: workflow.Task{Command: `stat -c '%u %a' "$ZKSCHED_UPSTREAM_up_OUTPUT_FILE"; cat "$ZKSCHED_UPSTREAM_up_OUTPUT_FILE"; echo`},
		Upstream: map[string]workflow.Upstream{"up": {Output: "from upstream"}}}
	var log syncBuffer
	res := sh.Run(context.Background(), task, &log)
	if res.Err != nil || res.Output != "from upstream" || !strings.Contains(log.String(), u.Uid+" 600\n") {
		t.Errorf("result %+v; log:\n%s", res, log.String())
	}
}
