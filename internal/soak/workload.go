package soak

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// kind is one kind of workflow the workload submits.
type kind struct {
	name   string
	weight int
	// mayFail is set for the kinds whose instances may end failed or stopped by design.
	mayFail bool
	tasks   []map[string]any
	// fields are the workflow's own fields beside name and tasks (concurrency:).
	fields map[string]any
	// params, if set, draws the params of each submission.
	params func(r *rand.Rand) map[string]string
	// burst is how many instances are submitted at once, one after the other with the same
	// params; 1 if unset.
	burst int
	// operate, if set, acts on each submitted instance as an operator would, in a goroutine
	// of its own with a generator of its own.
	operate func(w *workload, r *rand.Rand, wf int64)
	// hook, if set, is the kind's webhook: its instances are started by GitHub-signed
	// deliveries to it, each sent one to three times (deliverHook), never submitted.
	hook string
	// emit, if set, are assets of which the kind emits events from outside any task
	// (emitAsset), one of them drawn each time, instead of submitting a workflow.
	emit []string
}

const (
	// hookSecret is the secret of soak-hook's webhook, in the masters' ZKSCHED_HOOK_SECRET_SOAK.
	hookSecret = "soak-hook-secret"
	// childWorkflow is the workflow soak-parent's task starts; the workload never submits it.
	childWorkflow = "soak-child"
	// approveStep is soak-approve's wait step: the verdict reads its checkpoint, which holds
	// the signal's output.
	approveStep = "approve"
	// assetA and assetB are the assets soak-produce-a and soak-produce-b produce and
	// soak-emit emits; soak-consume-all runs on one event of each, soak-consume-any on one of
	// either (judgeAssets).
	assetA, assetB = "soak-a", "soak-b"
	// senseKind is the workflow whose sensors wait for the workload's conditions
	// (sensorTargets, judgeSensors).
	senseKind = "soak-sense"
)

// The sensors of soak-sense: their timeouts, and the time sensor's delay.
const (
	senseClockAfter = 2 * time.Second
	// senseFileTimeout and senseHTTPTimeout are long enough for most conditions the workload
	// draws to turn true in time, senseSoonTimeout short enough for most not to.
	senseFileTimeout = 8 * time.Second
	senseHTTPTimeout = 8 * time.Second
	senseSoonTimeout = 3 * time.Second
)

// kinds returns the workload's workflows; cmd wraps a shell body so that its runs are
// recorded, and ledger is the file the tools of the tool-calling agents write their effects
// to (see judgeTools). sense are the conditions of soak-sense's sensors; without them (a
// cluster the soak did not start, which may not see this host's files and loopback) there is
// no soak-sense. A kind of weight 0 is defined but never submitted: a child workflow, an
// asset consumer.
func kinds(cmd func(body string) string, ledger string, sense *sensorTargets) []kind {
	shell := func(name, body string, extra ...any) map[string]any {
		t := map[string]any{"name": name, "type": "shell", "command": cmd(body)}
		for i := 0; i+1 < len(extra); i += 2 {
			t[extra[i].(string)] = extra[i+1]
		}
		return t
	}
	// A body that fails its first attempts: a retry storm when retried with no interval.
	failFirst := func(n int, then string) string {
		return fmt.Sprintf(`[ "$ZKSCHED_ATTEMPT" -gt %d ] || exit 3; %s`, n, then)
	}
	ks := []kind{
		{name: "soak-dag", weight: 3, tasks: []map[string]any{
			shell("a", "sleep 0.3"),
			shell("b", "sleep 1.2", "depends-on", []string{"a"}),
			shell("c", "sleep 0.6", "depends-on", []string{"a"}),
			shell("d", "sleep 0.2", "depends-on", []string{"b", "c"}),
		}},
		{name: "soak-storm", weight: 3, tasks: []map[string]any{
			shell("s1", failFirst(2, "sleep 0.5"), "retries", 3),
			shell("s2", failFirst(2, "sleep 0.5"), "retries", 3),
			shell("s3", failFirst(2, "sleep 0.5"), "retries", 3),
			shell("s4", failFirst(1, "sleep 0.8"), "retries", 3),
		}},
		{name: "soak-pool", weight: 2, tasks: []map[string]any{
			shell("p1", "sleep 0.8", "pool", "soak"),
			shell("p2", "sleep 0.8", "pool", "soak"),
			shell("p3", "sleep 0.8", "pool", "soak"),
			shell("p4", "sleep 0.8", "pool", "soak"),
		}},
		{name: "soak-agent", weight: 1, tasks: []map[string]any{
			{"name": "think", "type": "agent", "provider": "test", "retries": 3, "pool": "model", "steps": []map[string]any{
				{"name": "one", "prompt": "S1 soak"},
				{"name": "two", "prompt": "S2 [{{ .steps.one }}]"},
				{"name": "three", "prompt": "S3 [{{ .steps.two }}]"},
			}},
			shell("after", "sleep 0.2", "depends-on", []string{"think"}),
		}},
		{name: "soak-timeout", weight: 1, mayFail: true, tasks: []map[string]any{
			shell("slow", "sleep 4", "timeout", "1s", "retries", 1),
			shell("fast", "sleep 0.3", "timeout", "10s"),
			shell("below", "true", "depends-on", []string{"slow"}),
		}},
		{name: "soak-kill", weight: 2, mayFail: true, operate: (*workload).killAndRerun, tasks: []map[string]any{
			shell("victim", "sleep 3"),
			shell("bystander", "sleep 1"),
			shell("after", "true", "depends-on", []string{"victim"}),
		}},
		{name: "soak-stop", weight: 1, mayFail: true, operate: (*workload).stop, tasks: []map[string]any{
			shell("x1", "sleep 2.5"),
			shell("x2", "sleep 2.5"),
			shell("x3", "sleep 1", "depends-on", []string{"x1", "x2"}),
		}},
		{name: "soak-wait", weight: 1, mayFail: true, operate: (*workload).signalGate, tasks: []map[string]any{
			shell("before", "sleep 0.3"),
			{"name": "gate", "type": "wait", "depends-on": []string{"before"}, "timeout": "6s"},
			shell("after", "sleep 0.2", "depends-on", []string{"gate"}),
		}},
		{name: "soak-rerun", weight: 1, mayFail: true, operate: (*workload).rerunFailed, tasks: []map[string]any{
			shell("once", failFirst(1, "sleep 0.3")),
			shell("after", "sleep 0.2", "depends-on", []string{"once"}),
		}},
		// Six items over list's output (a recorded task's output is its result line, so the
		// array is built around it), two at a time; item 3 fails its first attempt.
		{name: "soak-foreach", weight: 1, tasks: []map[string]any{
			shell("list", "sleep 0.2"),
			shell("each", `case "$ZKSCHED_ITEM" in "ran task "*" #$ZKSCHED_INDEX") ;; *) exit 9 ;; esac; `+
				`[ "$ZKSCHED_INDEX" != 3 ] || [ "$ZKSCHED_ATTEMPT" -gt 1 ] || exit 3; sleep 0.4`,
				"depends-on", []string{"list"}, "retries", 2, "max-parallel", 2, "for-each", forEachOver("list", 6)),
			shell("after", "sleep 0.2", "depends-on", []string{"each"}),
		}},
		{name: "soak-parent", weight: 1, tasks: []map[string]any{
			shell("before", "sleep 0.2"),
			{"name": "child", "type": "workflow", "workflow": childWorkflow, "depends-on": []string{"before"},
				"params": map[string]string{"from": "{{ .upstream.before.output }}"}},
			shell("after", "sleep 0.2", "depends-on", []string{"child"}),
		}},
		{name: childWorkflow, weight: 0, fields: map[string]any{"params": map[string]any{"from": map[string]any{}}}, tasks: []map[string]any{
			shell("c1", "sleep 0.5"),
			shell("c2", "sleep 0.3", "depends-on", []string{"c1"}),
		}},
		// Three runs of one thread at once: two of them wait their turn.
		{name: "soak-thread", weight: 1, burst: 3, fields: map[string]any{"concurrency": map[string]any{"key": "{{ .params.thread }}", "max": 1},
			"params": map[string]any{"thread": map[string]any{}}},
			params: func(r *rand.Rand) map[string]string {
				return map[string]string{"thread": fmt.Sprintf("t%d", r.Intn(3))}
			},
			tasks: []map[string]any{
				shell("one", "sleep 0.5"),
				shell("two", "sleep 0.4", "depends-on", []string{"one"}),
			}},
		// A tool-calling agent with an idempotent tool, one that is not, and a workflow tool,
		// whose calls a failover may cut off: note runs again, charge fails the task
		// (on-interrupted: fail), report goes on with the child it started, the agent waiting
		// for it on no slot. Each run of a shell tool appends "<tool> <call id>" to the ledger.
		{name: "soak-tools", weight: 1, mayFail: true, tasks: []map[string]any{
			{"name": "operate", "type": "agent", "provider": "test", "retries": 2, "pool": "model", "prompt": "T1 soak tools",
				"env": map[string]string{"LEDGER": ledger}, "tools": []map[string]any{
					{"name": "note", "description": "notes a fact", "type": "shell", "idempotent": true,
						"command": `echo "note $ZKSCHED_TOOL_CALL_ID" >> "$LEDGER"; sleep 0.4; echo noted`},
					{"name": "charge", "description": "charges a card", "type": "shell", "on-interrupted": "fail",
						"arguments": map[string]any{"type": "object", "properties": map[string]any{"cents": map[string]any{"type": "integer", "default": 250}}},
						"command":   `echo "charge $ZKSCHED_TOOL_CALL_ID $ZKSCHED_ARG_cents" >> "$LEDGER"; sleep 0.4; echo charged`},
					{"name": "report", "description": "builds a report", "type": "workflow", "workflow": childWorkflow,
						"arguments": map[string]any{"type": "object", "properties": map[string]any{"from": map[string]any{"type": "string", "default": "tool"}}}},
				}},
			shell("after", "sleep 0.2", "depends-on", []string{"operate"}),
		}},
		// Started by a webhook delivery sent again to other masters: one run per delivery id,
		// which the run's param delivery names (judgeHooks).
		{name: "soak-hook", weight: 1, hook: "soak-hook", fields: map[string]any{
			"params": map[string]any{"delivery": map[string]any{"required": true}},
			"triggers": []map[string]any{{"webhook": map[string]any{"name": "soak-hook", "secret-env": "ZKSCHED_HOOK_SECRET_SOAK",
				"signature": "github", "params": map[string]any{"delivery": `{{ index .headers "x-github-delivery" }}`}}}}},
			tasks: []map[string]any{shell("one", "sleep 0.3")}},
		{name: "soak-approve", weight: 1, mayFail: true, operate: (*workload).signalAgent, tasks: []map[string]any{
			{"name": "agent", "type": "agent", "provider": "test", "retries": 3, "pool": "model", "steps": []map[string]any{
				{"name": "draft", "prompt": "S1 draft"},
				{"name": approveStep, "wait": true, "timeout": "6s"},
				{"name": "final", "prompt": "S2 final [{{ .steps." + approveStep + " }}]"},
			}},
			shell("after", "sleep 0.2", "depends-on", []string{"agent"}),
		}},
		// Assets: each success of a producing task writes one event, a failed or killed
		// attempt none (make fails its first attempts, victim is killed and sometimes rerun);
		// soak-emit writes events from outside, through the masters' API. The masters start
		// soak-consume-all on one event of each asset, soak-consume-any on each event
		// (judgeAssets).
		{name: "soak-produce-a", weight: 2, mayFail: true, operate: (*workload).killAndRerun, tasks: []map[string]any{
			shell("make", failFirst(1, "sleep 0.3"), "retries", 2, "produces", []string{assetA}),
			shell("victim", "sleep 3", "produces", []string{assetA}),
		}},
		{name: "soak-produce-b", weight: 2, tasks: []map[string]any{
			shell("make", failFirst(2, "sleep 0.2"), "retries", 3, "produces", []string{assetB}),
			shell("after", "sleep 0.2", "depends-on", []string{"make"}),
		}},
		{name: "soak-emit", weight: 2, emit: []string{assetA, assetB}},
		{name: "soak-consume-all", fields: map[string]any{"on-assets": map[string]any{"all": []string{assetA, assetB}}},
			tasks: []map[string]any{shell("use", "sleep 0.3")}},
		{name: "soak-consume-any", fields: map[string]any{"on-assets": map[string]any{"any": []string{assetA, assetB}}},
			tasks: []map[string]any{shell("use", "sleep 0.1")}},
	}
	if sense != nil {
		// Sensors that wait holding no slot: a time, a file the workload creates once, and
		// the run's key in the answer of an HTTP server, which the workload makes ready after
		// a delay of its own for each run (or never). Their on-timeout is skip, fail and
		// succeed (judgeSensors).
		sensor := func(name string, timeout time.Duration, onTimeout string, cond map[string]any) map[string]any {
			t := map[string]any{"name": name, "type": "sensor", "interval": "1s", "timeout": timeout.String()}
			if onTimeout != "" {
				t["on-timeout"] = onTimeout
			}
			for k, v := range cond {
				t[k] = v
			}
			return t
		}
		ready := map[string]any{"http": map[string]any{"url": sense.url,
			"expect": map[string]any{"json": `{{ eq (printf "%v" (index .body .params.key)) "ready" }}`}}}
		ks = append(ks, kind{name: senseKind, weight: 3, mayFail: true, operate: (*workload).makeReady,
			fields: map[string]any{"params": map[string]any{"key": map[string]any{"required": true}}},
			params: func(r *rand.Rand) map[string]string {
				return map[string]string{"key": fmt.Sprintf("k%016x", r.Uint64())}
			},
			tasks: []map[string]any{
				sensor("clock", 30*time.Second, "", map[string]any{"time": map[string]any{"after": senseClockAfter.String()}}),
				sensor("file", senseFileTimeout, workflow.OnTimeoutSkip, map[string]any{"file": map[string]any{"path": sense.file}}),
				sensor("http", senseHTTPTimeout, workflow.OnTimeoutFail, ready),
				sensor("soon", senseSoonTimeout, workflow.OnTimeoutSucceed, ready),
				shell("after", "true", "depends-on", []string{"clock", "http", "soon"}),
			}})
	}
	return ks
}

// forEachOver is a for-each template of n items, each a JSON string of task's output and the
// item's index ("<output> #i"): the items depend on the output the upstream committed.
func forEachOver(task string, n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`"{{ .upstream.%s.output }} #%d"`, task, i)
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// spec is the kind's workflow definition.
func (k kind) spec() (*workflow.Spec, error) {
	def := map[string]any{"name": k.name, "tasks": k.tasks}
	for f, v := range k.fields {
		def[f] = v
	}
	raw, err := yaml.Marshal(def)
	if err != nil {
		return nil, err
	}
	spec, err := workflow.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w\n%s", k.name, err, raw)
	}
	return spec, nil
}

// define stores every kind's definition; a kind that emits assets has none.
func define(ctx context.Context, db *dao.DB, ks []kind) error {
	for _, k := range ks {
		if len(k.emit) > 0 {
			continue
		}
		spec, err := k.spec()
		if err != nil {
			return err
		}
		if _, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec}, time.Now()); err != nil {
			return fmt.Errorf("define %s: %w", k.name, err)
		}
	}
	return nil
}

// workload submits workflows through the masters' API and acts on some as an operator. Its
// schedule comes from its own generator, apart from the nemesis's.
type workload struct {
	db    *dao.DB
	api   *apiClient
	kinds []kind
	every time.Duration

	mu        sync.Mutex
	kills     []history.Kill
	reruns    []history.Rerun
	signals   []signalSent
	submitted map[string]int
	failures  int
	actions   map[string]int
	// deliveries are the webhook deliveries sent, by id: whether one was acknowledged.
	deliveries map[string]bool
	// emits are the asset events emitted from outside (emitAsset).
	emits []emitSent
	// sense are the conditions of soak-sense's sensors; nil without soak-sense.
	sense *sensorTargets
	ops   sync.WaitGroup
}

// start submits in a goroutine of its own until ctx ends; the operators it started go on
// until their own end. wait waits for both.
func (w *workload) start(ctx context.Context, r *rand.Rand) {
	if w.sense != nil {
		// The file soak-sense's file sensors wait for appears once, within the first seconds:
		// the runs submitted before wait for it, and may time out.
		fileDelay := jitter(r, 12*time.Second)
		w.ops.Add(1)
		go func() {
			defer w.ops.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(fileDelay):
			}
			if err := w.sense.createFile(); err != nil {
				w.count("sensor file not created")
				return
			}
			w.count("sensor file created")
		}()
	}
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		w.run(ctx, r)
	}()
}

// run submits until ctx ends.
func (w *workload) run(ctx context.Context, r *rand.Rand) {
	total := 0
	for _, k := range w.kinds {
		total += k.weight
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(r, w.every)):
		}
		n := r.Intn(total)
		var k kind
		for _, k = range w.kinds {
			if n -= k.weight; n < 0 {
				break
			}
		}
		// Drawn whatever the submission's fate, so the schedule does not depend on it.
		order, opSeed := r.Perm(len(w.api.masters)), r.Int63()
		body := map[string]any{"name": k.name}
		if k.params != nil {
			body["params"] = k.params(r)
		}
		for range max(k.burst, 1) {
			w.submit(k, order, body, opSeed)
		}
	}
}

// submit submits one instance of k with body, and starts its operator if it has one.
func (w *workload) submit(k kind, order []int, body map[string]any, opSeed int64) {
	if k.hook != "" {
		w.deliverHook(k, order, opSeed)
		return
	}
	if len(k.emit) > 0 {
		w.emitAsset(k, order, opSeed)
		return
	}
	var created struct {
		ID int64 `json:"id"`
	}
	status, err := w.api.post(order, "/api/v1/workflow-instances", body, &created)
	w.mu.Lock()
	if err != nil || status != http.StatusCreated {
		w.failures++
	} else {
		w.submitted[k.name]++
	}
	w.mu.Unlock()
	if err == nil && status == http.StatusCreated && k.operate != nil {
		w.ops.Add(1)
		go func() {
			defer w.ops.Done()
			k.operate(w, rand.New(rand.NewSource(opSeed)), created.ID)
		}()
	}
}

// deliverHook delivers one event to k's hook, GitHub-signed, its delivery id drawn from
// seed, and sends it again (a redelivery) to the next master in order, one to three times in
// all. A delivery any master answered 201 or 200 (a duplicate) is acknowledged: it must have
// started exactly one run; any other, at most one.
func (w *workload) deliverHook(k kind, order []int, seed int64) {
	r := rand.New(rand.NewSource(seed))
	id := fmt.Sprintf("soak-%016x", uint64(seed))
	body := []byte(fmt.Sprintf(`{"delivery": %q}`, id))
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write(body)
	header := http.Header{"X-Github-Delivery": {id}, "X-Hub-Signature-256": {"sha256=" + hex.EncodeToString(mac.Sum(nil))}}
	acked := false
	for i := range 1 + r.Intn(3) {
		rotated := append(append([]int{}, order[i%len(order):]...), order[:i%len(order)]...)
		status, _, err := w.api.sendRaw(rotated, "/api/v1/hooks/"+k.hook, body, header, nil)
		acked = acked || err == nil && (status == http.StatusCreated || status == http.StatusOK)
		if i > 0 {
			w.count("webhook redeliveries")
		}
	}
	w.mu.Lock()
	if w.deliveries == nil {
		w.deliveries = map[string]bool{}
	}
	w.deliveries[id] = acked
	if acked {
		w.submitted[k.name]++
	} else {
		w.failures++
	}
	w.mu.Unlock()
}

// emitSent is an asset event the workload emitted from outside: Tag is its output, which
// names it; Sent how many masters were asked (a master that failed to answer may have
// written it all the same); Acked whether one answered 201.
type emitSent struct {
	Asset, Tag string
	Sent       int
	Acked      bool
}

// emitAsset emits an event of one of k's assets, drawn from seed, through the masters in
// order: the next one is asked only when one fails to answer.
func (w *workload) emitAsset(k kind, order []int, seed int64) {
	r := rand.New(rand.NewSource(seed))
	e := emitSent{Asset: k.emit[r.Intn(len(k.emit))], Tag: fmt.Sprintf("emit-%016x", uint64(seed))}
	status, sent, err := w.api.send(order, "/api/v1/assets/"+e.Asset+"/events", map[string]any{"output": e.Tag}, nil)
	e.Sent, e.Acked = sent, err == nil && status == http.StatusCreated
	w.mu.Lock()
	w.emits = append(w.emits, e)
	if e.Acked {
		w.submitted[k.name]++
	} else {
		w.failures++
	}
	w.mu.Unlock()
}

// wait waits for the submissions (start) and the operators to finish.
func (w *workload) wait() { w.ops.Wait() }

func (w *workload) count(action string) {
	w.mu.Lock()
	w.actions[action]++
	w.mu.Unlock()
}

// operatorWait is how long an operator waits for the state it acts on.
const operatorWait = 30 * time.Second

// task polls the workflow instance's task named name until cond holds or operatorWait has
// passed; the database may be restarting, so errors are retried.
func (w *workload) task(wf int64, name string, cond func(dao.TaskInstance) bool) (dao.TaskInstance, bool) {
	deadline := time.Now().Add(operatorWait)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ts, err := w.db.TaskListByWorkflow(ctx, wf)
		cancel()
		if err == nil {
			for _, t := range ts {
				if t.Name == name && cond(t) {
					return t, true
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return dao.TaskInstance{}, false
}

func terminal(t dao.TaskInstance) bool {
	switch t.State {
	case dao.TaskSucceeded, dao.TaskFailed, dao.TaskKilled, dao.TaskSkipped:
		return true
	}
	return false
}

// killAndRerun kills the victim task once it runs (or sometimes while it is still queued),
// and reruns half of the killed ones once they have ended.
func (w *workload) killAndRerun(r *rand.Rand, wf int64) {
	queued := r.Intn(4) == 0
	delay, rerun, rerunDelay := jitter(r, time.Second), r.Intn(2) == 0, jitter(r, 500*time.Millisecond)
	t, ok := w.task(wf, "victim", func(t dao.TaskInstance) bool {
		return t.State == dao.TaskRunning || (queued && t.State == dao.TaskQueued) || terminal(t)
	})
	if !ok || terminal(t) {
		return
	}
	time.Sleep(delay)
	var res struct {
		State   dao.TaskState `json:"state"`
		Attempt int           `json:"attempt"`
	}
	status, err := w.api.post(r.Perm(len(w.api.masters)), fmt.Sprintf("/api/v1/task-instances/%d/kill", t.ID), nil, &res)
	at := time.Now()
	if err != nil || (status != http.StatusOK && status != http.StatusAccepted) {
		w.count(fmt.Sprintf("kill answered %d", status))
		return
	}
	w.mu.Lock()
	w.kills = append(w.kills, history.Kill{TaskID: t.ID, WorkflowID: wf, Attempt: res.Attempt, At: at})
	w.mu.Unlock()
	w.count("kill")
	if !rerun {
		return
	}
	t, ok = w.task(wf, "victim", terminal)
	if !ok || (t.State != dao.TaskKilled && t.State != dao.TaskFailed) {
		return
	}
	time.Sleep(rerunDelay)
	w.rerun(r, t, fmt.Sprintf("/api/v1/task-instances/%d/rerun", t.ID))
}

// rerun reruns a task through path. The rerun is recorded before it is asked for: should the
// answer be lost, the rerun may still have happened, and the verdict must not take the new
// attempts for ones that started after the kill.
func (w *workload) rerun(r *rand.Rand, t dao.TaskInstance, path string) {
	w.mu.Lock()
	w.reruns = append(w.reruns, history.Rerun{TaskID: t.ID, At: time.Now()})
	w.mu.Unlock()
	status, err := w.api.post(r.Perm(len(w.api.masters)), path, nil, nil)
	if err != nil || status != http.StatusOK {
		w.count(fmt.Sprintf("rerun answered %d", status))
		return
	}
	w.count("rerun")
}

// stop stops the workflow instance once one of its tasks runs.
func (w *workload) stop(r *rand.Rand, wf int64) {
	delay := jitter(r, time.Second)
	if _, ok := w.task(wf, "x1", func(t dao.TaskInstance) bool { return t.State == dao.TaskRunning || terminal(t) }); !ok {
		return
	}
	time.Sleep(delay)
	status, err := w.api.post(r.Perm(len(w.api.masters)), fmt.Sprintf("/api/v1/workflow-instances/%d/stop", wf), nil, nil)
	at := time.Now()
	if err != nil || status != http.StatusOK {
		w.count(fmt.Sprintf("stop answered %d", status))
		return
	}
	w.mu.Lock()
	w.kills = append(w.kills, history.Kill{WorkflowID: wf, At: at})
	w.mu.Unlock()
	w.count("stop")
}

// signalSent is a signal the operator sent a wait task and the answer it had: Status 0 when
// no master answered, or one failed to before another did (the signal may or may not have
// been applied).
type signalSent struct {
	TaskID, WorkflowID int64
	Output             string
	Fail               bool
	Status             int
}

// signalGate signals the wait task gate once it waits.
func (w *workload) signalGate(r *rand.Rand, wf int64) {
	w.signal(r, wf, "gate", func(t dao.TaskInstance) bool { return t.State == dao.TaskWaiting })
}

// signalAgent signals the agent once it is paused at its wait step.
func (w *workload) signalAgent(r *rand.Rand, wf int64) {
	w.signal(r, wf, "agent", func(t dao.TaskInstance) bool {
		return t.State == dao.TaskWaiting && t.PausedStep != nil && *t.PausedStep == approveStep
	})
}

// signal signals the task named name once waiting says it waits, as a person would: most
// often approving, sometimes rejecting, sometimes twice (the second must be refused),
// sometimes never (its timeout fails it).
func (w *workload) signal(r *rand.Rand, wf int64, name string, waiting func(dao.TaskInstance) bool) {
	delay, pick := jitter(r, time.Second), r.Intn(10)
	t, ok := w.task(wf, name, func(t dao.TaskInstance) bool { return waiting(t) || terminal(t) })
	if !ok || terminal(t) || pick >= 8 {
		return
	}
	time.Sleep(delay)
	times, fail := 1, pick >= 6
	if pick == 0 {
		times = 2
	}
	for i := range times {
		sig := signalSent{TaskID: t.ID, WorkflowID: wf, Output: fmt.Sprintf("soak %d/%d", wf, i), Fail: fail}
		status, sent, err := w.api.send(r.Perm(len(w.api.masters)), fmt.Sprintf("/api/v1/task-instances/%d/signal", t.ID),
			map[string]any{"output": sig.Output, "fail": fail}, nil)
		if status != http.StatusOK && (err != nil || sent > 1) {
			// A master that failed to answer may have applied it.
			status = 0
		}
		sig.Status = status
		w.mu.Lock()
		w.signals = append(w.signals, sig)
		w.mu.Unlock()
		w.count(fmt.Sprintf("signal answered %d", status))
	}
}

// makeReady makes the run's key ready in the answers of the sensors' HTTP server after a
// delay drawn from r, from a second to ten (the http sensor's timeout is 8 s, soon's 3 s),
// or, one time in five, never.
func (w *workload) makeReady(r *rand.Rand, wf int64) {
	delay, never := time.Duration(1+r.Intn(10))*time.Second, r.Intn(5) == 0
	if never || w.sense == nil {
		return
	}
	deadline := time.Now().Add(operatorWait)
	var key string
	for key == "" && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := w.db.SQL().QueryRowContext(ctx, `SELECT params->>'key' FROM workflow_instance WHERE id = $1`, wf).Scan(&key)
		cancel()
		if err != nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if key == "" {
		w.count("sensor key not read")
		return
	}
	time.Sleep(delay)
	w.sense.makeReady(key)
	w.count("sensor key made ready")
}

// rerunFailed reruns the workflow instance from its failed task once it has failed.
func (w *workload) rerunFailed(r *rand.Rand, wf int64) {
	delay := jitter(r, 500*time.Millisecond)
	t, ok := w.task(wf, "once", terminal)
	if !ok || t.State != dao.TaskFailed {
		return
	}
	time.Sleep(delay)
	w.rerun(r, t, fmt.Sprintf("/api/v1/workflow-instances/%d/rerun", wf))
}

// apiClient calls the masters' API, trying them in the order given until one answers.
type apiClient struct {
	// masters are the masters' base URLs (http://host:port).
	masters []string
	token   string
	client  *http.Client
}

// post sends body as JSON to path on the masters in order and decodes the first answer into
// out (if not nil). An error means no master answered.
func (a *apiClient) post(order []int, path string, body any, out any) (int, error) {
	status, _, err := a.send(order, path, body, out)
	return status, err
}

// send is post that also says how many masters it sent the request to: a request that one
// master failed to answer may have been carried out by it all the same.
func (a *apiClient) send(order []int, path string, body any, out any) (status, sent int, err error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, 0, err
	}
	return a.sendRaw(order, path, raw, http.Header{"Authorization": {"Bearer " + a.token}}, out)
}

// sendRaw is send of the JSON text raw with header.
func (a *apiClient) sendRaw(order []int, path string, raw []byte, header http.Header, out any) (status, sent int, err error) {
	var last error
	for _, i := range order {
		sent++
		req, err := http.NewRequest(http.MethodPost, a.masters[i]+path, bytes.NewReader(raw))
		if err != nil {
			return 0, sent, err
		}
		for k, v := range header {
			req.Header[http.CanonicalHeaderKey(k)] = v
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.client.Do(req)
		if err != nil {
			last = err
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode >= 500 {
			// A master that cannot reach its database: another one may.
			last = fmt.Errorf("%s: %s: %s", path, resp.Status, data)
			continue
		}
		if out != nil && resp.StatusCode < 300 {
			if err := json.Unmarshal(data, out); err != nil {
				return resp.StatusCode, sent, fmt.Errorf("%s: %w: %s", path, err, data)
			}
		}
		return resp.StatusCode, sent, nil
	}
	return 0, sent, last
}

// jitter is d scaled by a factor drawn from [0.5, 1.5).
func jitter(r *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.5 + r.Float64()))
}

// sortedCounts formats counts as "k n, …" by key.
func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
