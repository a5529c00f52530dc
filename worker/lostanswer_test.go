package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
)

// lockedBuffer is a log the worker writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFinishWhoseAnswerWasLost: the worker's finish commits, but its answer never reaches the
// worker (the connection dies between PostgreSQL's commit and the reply, as in a switchover).
// The worker cannot know whether it committed, so it tries again under the same token; that is
// refused, and the attempt's row, read back, shows the first try's outcome: the result is
// recorded once, and the worker says so rather than that the task was taken from it.
func TestFinishWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The worker reaches PostgreSQL through a proxy the test can cut; its connections carry
	// an application name the test finds them by.
	u, err := url.Parse(b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	app := fmt.Sprintf("lost-answer-%d", time.Now().UnixNano())
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	wdb, err := dao.Open(b.ctx, u.String(), 4, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wdb.Close() })

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	w := worker.New(worker.Config{ID: "w1", Groups: []string{"default"}, Slots: 1, PollInterval: 200 * time.Millisecond,
		ShutdownTimeout: time.Second, LogLimit: 1 << 20, Log: zerolog.New(log)}, wdb, openGate{},
		executor.Set{"shell": executor.Shell{Self: self, KillGrace: 500 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	id := b.submit(t, "name: lost-answer\ntasks:\n  - {name: t, type: shell, command: 'sleep 0.5'}\n")
	var taskID int64
	waitUntil(t, "the task to run", func() bool {
		err := b.db.SQL().Get(&taskID, `SELECT id FROM task_instance WHERE workflow_instance_id = $1 AND state = 'running'`, id)
		return err == nil
	})
	// Hold the task's row so that the worker's finish waits on it, sent and not yet answered.
	hold, err := b.db.SQL().Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()
	if _, err := hold.Exec(`SELECT 1 FROM task_instance WHERE id = $1 FOR UPDATE`, taskID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the worker's finish to wait on the held row", func() bool {
		var n int
		err := b.db.SQL().Get(&n, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app)
		return err == nil && n == 1
	})
	// Cut the link, let the finish commit, and once it has, drop the connection that would
	// carry its answer.
	proxy.Cut()
	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the finish to commit", func() bool {
		var outcome *string
		err := b.db.SQL().Get(&outcome, `SELECT outcome FROM task_attempt WHERE task_instance_id = $1 AND attempt = 1`, taskID)
		return err == nil && outcome != nil
	})
	proxy.Reset()
	proxy.Heal()

	wf, byName := b.waitDone(t, id)
	if wf.State != dao.WorkflowSucceeded || byName["t"].State != dao.TaskSucceeded {
		t.Fatalf("instance %s, task %s; want both succeeded", wf.State, byName["t"].State)
	}
	if got := b.attempts(t, taskID); strings.Join(got, ",") != "succeeded" {
		t.Fatalf("attempts = %v; want one, succeeded", got)
	}
	waitUntil(t, "the worker to say how its result was recorded", func() bool {
		return strings.Contains(log.String(), "its result was recorded by a try whose answer was lost")
	})
	out := log.String()
	if !strings.Contains(out, "could not record the attempt's result; retrying") {
		t.Errorf("the worker's first try did not fail:\n%s", out)
	}
	if strings.Contains(out, "result refused") {
		t.Errorf("the worker took its own lost commit for a fencing:\n%s", out)
	}
}

// waitUntil checks cond every 20 ms for up to 30 s, for what the worker and the master show
// only in the database: they give no signal a test can wait on from outside.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, 20*time.Millisecond, what, cond)
}
