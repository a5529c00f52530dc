package worker_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/worker"
	"github.com/zksched/zksched/worker/executor"
)

const (
	secretDSN = "postgres://zksched:db-password-4711@db:5432/zksched"
	secretKey = "sk-model-key-0123456789"
)

// leaky stands in for an executor whose task prints, checkpoints and fails with a secret: an
// llm provider's error that quotes its key, a model's answer that repeats one.
type leaky struct{}

func (leaky) Run(ctx context.Context, t executor.Task, log io.Writer) executor.Result {
	fmt.Fprintf(log, "calling with %s", secretKey[:6])
	fmt.Fprintf(log, "%s\n", secretKey[6:])
	if err := t.Checkpoints.Save(ctx, "step", executor.Checkpoint{Output: "the model repeated " + secretKey}); err != nil {
		return executor.Result{Err: err}
	}
	return executor.Result{Err: fmt.Errorf("connect to %s: refused", secretDSN)}
}

// TestSecretsAreMaskedInWhatIsStored: a worker given its secrets stores *** in their place in
// a shell task's log (a secret split across writes of stdout and of stderr too), its output,
// and another task's log, checkpoint and error.
func TestSecretsAreMaskedInWhatIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(worker.Config{ID: "w1", Groups: []string{"default"}, Slots: 2, PollInterval: 100 * time.Millisecond,
		ShutdownTimeout: time.Second, LogLimit: 1 << 20, Log: zerolog.Nop(), Secrets: []string{secretDSN, "db-password-4711", secretKey, "ab"}},
		b.db, openGate{}, executor.Set{"noop": leaky{}, "shell": executor.Shell{Self: self, KillGrace: 500 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// The sleeps make the worker read each half in a read of its own, and flush the log
	// between them (every 250 ms). stdout and stderr are in tasks of their own, whose logs
	// then have one order.
	id := b.submit(t, `
name: leaks
tasks:
  - name: split-out
    type: shell
    env: {S: "`+secretKey+`"}
    command: |
      printf 'out: %s' "${S:0:9}"; sleep 0.3; printf '%s\n' "${S:9}"
      echo "last $S"
  - name: split-err
    type: shell
    env: {D: "`+secretDSN+`"}
    command: |
      printf 'err: %s' "${D:0:20}" >&2; sleep 0.3; printf '%s ab\n' "${D:20}" >&2
  - {name: leaky, type: noop}
`)
	_, tasks := b.waitDone(t, id)
	leakyTask := tasks["leaky"]
	var logs []string
	for name, want := range map[string]string{"split-out": "out: ***\nlast ***\n", "split-err": "err: *** ab\n"} {
		log, err := b.db.TaskLogRead(b.ctx, tasks[name].ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if log != want {
			t.Errorf("the log of %s = %q, want %q", name, log, want)
		}
		logs = append(logs, log)
	}
	if o := tasks["split-out"].Output; o == nil || *o != "last ***" {
		t.Errorf("the output of split-out = %v, want %q", o, "last ***")
	}
	leakyLog, err := b.db.TaskLogRead(b.ctx, leakyTask.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if leakyLog != "calling with ***\n" {
		t.Errorf("the leaky task's log = %q, want %q", leakyLog, "calling with ***\n")
	}
	const wantErr = "connect to ***: refused"
	if leakyTask.Error == nil || *leakyTask.Error != wantErr {
		t.Errorf("the leaky task's error = %v, want %q", leakyTask.Error, wantErr)
	}
	as, err := b.db.AttemptList(b.ctx, leakyTask.ID)
	if err != nil || len(as) != 1 || as[0].Error == nil || *as[0].Error != wantErr {
		t.Errorf("the leaky task's attempts = %+v, %v; want one whose error is %q", as, err, wantErr)
	}
	cps, err := b.db.CheckpointListForTask(b.ctx, leakyTask.ID)
	if err != nil || len(cps) != 1 || cps[0].Output != "the model repeated ***" {
		t.Errorf("the leaky task's checkpoints = %+v, %v; want its step's output masked", cps, err)
	}
	for _, stored := range append(logs, leakyLog, *tasks["split-out"].Output) {
		for _, secret := range []string{secretDSN, "db-password-4711", secretKey} {
			if strings.Contains(stored, secret) {
				t.Errorf("stored text holds a secret: %q", stored)
			}
		}
	}
}
