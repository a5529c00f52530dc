package history

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zksched/zksched/internal/testenv"
)

// startTask starts the command of body the way a worker would: bash -c in a process group of its
// own, with the worker's variables.
func startTask(t *testing.T, rec *Recorder, body string, out *bytes.Buffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-c", rec.Command(body))
	cmd.Env = append(append(os.Environ(), rec.Env()...),
		"ZKSCHED_TASK_INSTANCE=7", "ZKSCHED_ATTEMPT=2", "ZKSCHED_WORKER=127.0.0.1:5679_1763802000123")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func runsOf(t *testing.T, rec *Recorder) []Run {
	t.Helper()
	runs, err := rec.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func TestCommandRecordsARun(t *testing.T) {
	t.Parallel()
	rec := New(t)
	var out bytes.Buffer
	before := time.Now()
	// The body lasts half a second and until its run has three beats in the log (30 s at
	// most): the beats are the script's, every 100 ms, and a loaded machine spaces them
	// further apart.
	body := `sleep 0.5
for i in $(seq 600); do
	[ "$(psql -X -A -t -d "$RUNLOG_DSN" -c "SELECT count(*) FROM $RUNLOG_TABLE WHERE event = 'beat'")" -ge 3 ] && break
	sleep 0.05
done
echo "it's done"`
	cmd := startTask(t, rec, body, &out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("command: %v\n%s", err, out.String())
	}
	after := time.Now()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got, want := lines[len(lines)-1], "ran task 7 attempt 2 on 127.0.0.1:5679_1763802000123"; got != want {
		t.Errorf("last line = %q, want %q (output %q)", got, want, out.String())
	}
	if !strings.Contains(out.String(), "it's done") {
		t.Errorf("the body's output is missing: %q", out.String())
	}
	runs := runsOf(t, rec)
	if len(runs) != 1 {
		t.Fatalf("got %d runs, want 1: %+v", len(runs), runs)
	}
	r := runs[0]
	if r.TaskID != 7 || r.Attempt != 2 || r.Worker != "127.0.0.1:5679_1763802000123" || !r.Started || !r.Ended {
		t.Errorf("run = %+v, want task 7 attempt 2 on the worker, started and ended", r)
	}
	if r.Start.Before(before) || r.Last.After(after) || r.Span() < 500*time.Millisecond {
		t.Errorf("run alive %v..%v (%v), want within the command's %v..%v and at least the body's 500ms",
			r.Start, r.Last, r.Span(), before, after)
	}
	if r.Beats < 3 {
		t.Errorf("%d beats, want the 3 the body waited for", r.Beats)
	}
}

// TestCommandOutlivesItsLogSession kills the psql session that writes the run's events while
// the body runs: the script opens another, so the beats go on and the end is recorded.
func TestCommandOutlivesItsLogSession(t *testing.T) {
	t.Parallel()
	rec := New(t)
	var out bytes.Buffer
	// The body's parent is the script, whose only psql child is its log session. The body
	// waits for two beats, kills that session, then waits for two beats written after it.
	body := `beats() { psql -X -A -t -d "$RUNLOG_DSN" -c "SELECT count(*) FROM $RUNLOG_TABLE WHERE event = 'beat'"; }
until [ "$(beats)" -ge 2 ]; do sleep 0.05; done
pkill -x -P $PPID psql || { echo "no log session to kill"; exit 9; }
killed=$(beats)
for i in $(seq 600); do [ "$(beats)" -ge $((killed + 2)) ] && break; sleep 0.05; done
echo "beats before and after: $killed $(beats)"`
	cmd := startTask(t, rec, body, &out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("command: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "ran task 7 attempt 2") {
		t.Fatalf("no result line: %q", out.String())
	}
	runs := runsOf(t, rec)
	if len(runs) != 1 || !runs[0].Ended {
		t.Fatalf("runs = %+v, want one ended run (output %q)", runs, out.String())
	}
	var before, after int
	if _, err := fmt.Sscanf(out.String()[strings.Index(out.String(), "beats before and after: "):], "beats before and after: %d %d", &before, &after); err != nil {
		t.Fatalf("%v: output %q", err, out.String())
	}
	if after < before+2 {
		t.Errorf("%d beats when the session was killed, %d at the body's end: the beats stopped with it", before, after)
	}
}

func TestCommandFailingBodyHasNoEnd(t *testing.T) {
	t.Parallel()
	rec := New(t)
	var out bytes.Buffer
	err := startTask(t, rec, "exit 3", &out).Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("command: %v, want exit status 3\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "ran task") {
		t.Errorf("a failed body printed a result: %q", out.String())
	}
	runs := runsOf(t, rec)
	if len(runs) != 1 || !runs[0].Started || runs[0].Ended {
		t.Fatalf("runs = %+v, want one started run without an end", runs)
	}
}

func TestBeatsStopWithTheProcessGroup(t *testing.T) {
	t.Parallel()
	rec := New(t)
	var out bytes.Buffer
	cmd := startTask(t, rec, "sleep 30", &out)
	reaped := false
	t.Cleanup(func() {
		if reaped {
			return
		}
		// The test stopped before the kill below: end the task's group (its leader not yet
		// reaped, so the group is still the task's) and show what it did.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		t.Logf("runs %+v\noutput:\n%s", runsOf(t, rec), out.String())
	})
	// The beats reach PostgreSQL from other processes: the run log is the only signal.
	testenv.WaitFor(t, 10*time.Second, 50*time.Millisecond, "two beats of the run", func() bool {
		runs := runsOf(t, rec)
		return len(runs) == 1 && runs[0].Beats >= 2
	})
	killed := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	reaped = true
	// Beats that went on would show within a few of their 100 ms periods; absence has no
	// signal to wait for.
	time.Sleep(600 * time.Millisecond)
	runs := runsOf(t, rec)
	if len(runs) != 1 || runs[0].Ended || runs[0].Last.After(killed) {
		t.Fatalf("runs = %+v, want one run without an end, silent since the kill at %v", runs, killed)
	}
}
