package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/workflow"
)

// BenchmarkAgentStep measures what zksched adds to each model call of an agent: one
// iteration runs a 100-step agent task on a worker against the local test server, and the
// attempt's time per step is compared with the server's own time per request. The
// difference is the prompt rendering, the client (langchaingo included), the HTTP round trip
// on loopback, the checkpoint write under the token and the task log.
func BenchmarkAgentStep(b *testing.B) {
	db, _ := daotest.New(b)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	startMaster(b, db, 50*time.Millisecond)
	bundle := &testBundle{db: db, ctx: ctx}
	srv := llmtest.New(b)
	bundle.startLLMWorker(b, "w1", srv, 1)

	const steps = 100
	var y strings.Builder
	y.WriteString("params: {topic: scheduling}\ntasks:\n  - name: agent\n    type: agent\n    provider: test\n    steps:\n")
	for i := range steps {
		fmt.Fprintf(&y, "      - {name: s%d, prompt: 'step %d of the week: {{ .params.topic }}'}\n", i, i)
	}
	var perStep time.Duration
	runs := 0
	for b.Loop() {
		spec, err := workflow.Parse([]byte(fmt.Sprintf("name: bench%d\n%s", runs, y.String())))
		if err != nil {
			b.Fatal(err)
		}
		id := daotest.Submit(b, db, spec.Name, spec)
		var a *dao.TaskInstance
		waitUntil(b, "the agent task to end", func() bool {
			tasks, err := db.TaskListByWorkflow(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if len(tasks) == 1 {
				a = &tasks[0]
			}
			return a != nil && a.State.Terminal()
		})
		if a.State != dao.TaskSucceeded {
			b.Fatalf("agent %s: %v", a.State, a.Error)
		}
		perStep += a.EndedAt.Sub(*a.StartedAt) / steps
		runs++
	}
	n, served := srv.Served()
	server := served / time.Duration(n)
	perStep /= time.Duration(runs)
	b.ReportMetric(float64(perStep.Microseconds()), "µs/step")
	b.ReportMetric(float64(server.Microseconds()), "server-µs/request")
	b.ReportMetric(float64((perStep - server).Microseconds()), "overhead-µs/step")
}
