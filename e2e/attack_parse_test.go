package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/llmtest"
	"github.com/zksched/zksched/internal/testcluster"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/workflow/workflowtest"
)

// maxHostileAnswer is the most a master may answer to a hostile workflow file.
const maxHostileAnswer = 64 << 10

// hostileShapes are the hostile workflow files the attack suite posts: each shape of
// workflowtest just under the 1 MiB body limit, and the reported attack (300 aliases of a
// 900 KB value).
func hostileShapes() []workflowtest.Hostile {
	return append(workflowtest.All(1<<20-4096),
		workflowtest.Hostile{Name: "reported alias bomb", YAML: workflowtest.AliasBomb(900<<10, 300)})
}

// postDefinition posts a workflow file to a master and returns the status and at most 1 MiB
// of the answer (enough to tell that it is over 64 KiB).
func postDefinition(t testing.TB, base, token string, body []byte) (int, []byte) {
	t.Helper()
	client := &http.Client{Timeout: time.Minute}
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/definitions", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("post definition: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return resp.StatusCode, raw
}

// masterServes reports whether the master answers /healthz.
func masterServes(base string) bool {
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestAttackHostileDefinitionIsRefused posts hostile workflow files to a real master's
// /api/v1/definitions: the alias bomb of the report (which made a master answer 270 MB after
// 9 s and grow to 1.7 GB), 1 MiB of errors, deep nesting, a merge bomb and long values. Each
// gets a 400 under 64 KiB, and the master is still alive and serving afterwards: it stores a
// good file.
func TestAttackHostileDefinitionIsRefused(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	m := e.Master("master")
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	token := e.Token()
	waitUntil(t, 60*time.Second, "the master serving", func() bool { return masterServes(base) })
	for _, h := range hostileShapes() {
		status, body := postDefinition(t, base, token, h.YAML)
		if status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400; answer %.300s", h.Name, status, body)
		}
		if len(body) >= maxHostileAnswer {
			t.Errorf("%s: the answer is %d bytes or more; want under %d", h.Name, len(body), maxHostileAnswer)
		}
		t.Logf("%s: %d bytes posted, %d answered with %d bytes", h.Name, len(h.YAML), status, len(body))
	}
	// A flood: every shape at once, twice over.
	var wg sync.WaitGroup
	for range 2 {
		for _, h := range hostileShapes() {
			wg.Go(func() {
				if status, body := postDefinition(t, base, token, h.YAML); status != http.StatusBadRequest || len(body) >= maxHostileAnswer {
					t.Errorf("%s in a flood: status %d, %d bytes; want 400 under %d", h.Name, status, len(body), maxHostileAnswer)
				}
			})
		}
	}
	wg.Wait()
	select {
	case <-m.Exited():
		t.Fatalf("the master exited:\n%s", m.Log())
	default:
	}
	if !masterServes(base) {
		t.Fatal("the master no longer serves /healthz")
	}
	if status, body := postDefinition(t, base, token, []byte("name: after\ntasks: [{name: a, type: noop}]\n")); status != http.StatusOK {
		t.Errorf("a good file after the attack: %d %s", status, body)
	}
}

// BenchmarkAttackHostileDefinitionMaster posts the hostile shapes to a real master, built
// without -race so that its memory is what a deployed one uses, and reports per post the time
// (ns/op), and over the run the growth of the master's peak resident memory (VmHWM) from
// its level once started and warmed up by one good file. Run it on its own:
//
//	go test -run '^$' -bench AttackHostileDefinitionMaster -benchtime 20x ./e2e
func BenchmarkAttackHostileDefinitionMaster(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "zksched")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	zk := testenv.ZooKeeper(b)
	_, dsn := daotest.New(b)
	c := testcluster.New(b, zk.Servers, zk.Root, dsn)
	c.Bin = bin
	m := c.Master("master")
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)
	token := c.Token()
	waitUntil(b, 60*time.Second, "the master serving", func() bool { return masterServes(base) })
	if status, body := postDefinition(b, base, token, []byte("name: warm\ntasks: [{name: a, type: noop}]\n")); status != http.StatusOK {
		b.Fatalf("a good file: %d %s", status, body)
	}
	pid := m.Cmd.Process.Pid
	hwm0, rss0 := procMemory(b, pid)
	b.Logf("master started: VmHWM %.1f MB, VmRSS %.1f MB", mb(hwm0), mb(rss0))
	for _, h := range hostileShapes() {
		b.Run(strings.ReplaceAll(h.Name, " ", "-"), func(b *testing.B) {
			b.SetBytes(int64(len(h.YAML)))
			for b.Loop() {
				if status, body := postDefinition(b, base, token, h.YAML); status != http.StatusBadRequest || len(body) >= maxHostileAnswer {
					b.Fatalf("status %d, %d bytes", status, len(body))
				}
			}
			hwm, _ := procMemory(b, pid)
			b.ReportMetric(mb(hwm-hwm0), "VmHWM-growth-MB")
		})
	}
	b.Run("flood-of-12-at-once", func(b *testing.B) {
		shapes := hostileShapes()
		for b.Loop() {
			var wg sync.WaitGroup
			for range 2 {
				for _, h := range shapes {
					wg.Go(func() {
						if status, body := postDefinition(b, base, token, h.YAML); status != http.StatusBadRequest || len(body) >= maxHostileAnswer {
							b.Errorf("status %d, %d bytes", status, len(body))
						}
					})
				}
			}
			wg.Wait()
		}
		hwm, _ := procMemory(b, pid)
		b.ReportMetric(mb(hwm-hwm0), "VmHWM-growth-MB")
	})
	hwm, rss := procMemory(b, pid)
	b.Logf("master after the attack: VmHWM %.1f MB (+%.1f), VmRSS %.1f MB", mb(hwm), mb(hwm-hwm0), mb(rss))
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// procMemory reads the peak and current resident memory of process pid, in bytes.
func procMemory(t testing.TB, pid int) (hwm, rss int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmHWM:":
			hwm = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return hwm, rss
}

// TestAttackLoopingPromptCannotHoldASlot runs prompts that loop on a real cluster whose
// worker has one slot. {{range 2000000000}} is refused at submit; a loop within the bounds
// that would render for minutes ends at the task's timeout, and another at a kill through the
// API; each time the task queued behind it gets the slot.
func TestAttackLoopingPromptCannotHoldASlot(t *testing.T) {
	t.Parallel()
	srv := llmtest.New(t)
	srv.Key = "sk-attack"
	e := setupE2E(t, nil, "", append(llmEnv(srv), "ZKSCHED_WORKER_SLOTS=1")...)
	m := e.Master("master")
	e.Worker("worker")
	base := fmt.Sprintf("http://127.0.0.1:%d", m.Port)

	out, code := e.Run("submit", e.file(t, "huge-range.yaml", `
name: huge-range
tasks:
  - {name: loops, type: llm, provider: test, prompt: '{{range 2000000000}}x{{end}}'}
`))
	if code == 0 || !strings.Contains(out, "range over 2000000000 items; a prompt may range over at most 100000") {
		t.Fatalf("submit of {{range 2000000000}}: exit %d\n%s", code, out)
	}

	// Each turn escapes a 60 KB param: within every bound, but minutes of work unstopped.
	big := strings.Repeat("<", 60<<10)
	const loop = `'{{range 100000}}{{if eq (html $.params.big) ""}}{{end}}{{end}}'`
	submit := func(name, body string) int64 {
		t.Helper()
		out, code := e.Run("submit", e.file(t, name+".yaml", "name: "+name+"\nparams: {big: \""+big+"\"}\ntasks:\n"+body))
		if code != 0 {
			t.Fatalf("submit %s: exit %d\n%s", name, code, out)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), 10, 64)
		if err != nil {
			t.Fatalf("submit %s printed no id:\n%s", name, out)
		}
		return id
	}
	wait := func(wf int64, what string, cond func(map[string]dao.TaskInstance) bool) map[string]dao.TaskInstance {
		t.Helper()
		var ts map[string]dao.TaskInstance
		waitUntil(t, 60*time.Second, what, func() bool { ts = e.tasks(t, wf); return cond(ts) })
		return ts
	}
	done := func(ts map[string]dao.TaskInstance) bool {
		return ts["loops"].State.Terminal() && ts["behind"].State.Terminal()
	}

	wf := submit("loops-until-timeout", "  - {name: loops, type: llm, provider: test, priority: 10, timeout: 2s, prompt: "+loop+"}\n"+
		"  - {name: behind, type: noop}\n")
	ts := wait(wf, "the looping task to time out and the one behind to run", done)
	if l := ts["loops"]; l.State != dao.TaskFailed || l.Error == nil || *l.Error != "timed out after 2s" {
		t.Errorf("loops: %s, error %v; want failed, timed out after 2s", l.State, l.Error)
	}
	if ts["behind"].State != dao.TaskSucceeded {
		t.Errorf("behind: %s; want succeeded once the slot was free", ts["behind"].State)
	}

	wf = submit("loops-until-killed", "  - name: loops\n    type: agent\n    provider: test\n    priority: 10\n    steps:\n"+
		"      - {name: first, prompt: first}\n      - {name: second, prompt: "+loop+"}\n  - {name: behind, type: noop}\n")
	ts = wait(wf, "the agent's first step answered", func(map[string]dao.TaskInstance) bool { return srv.Answered("first") == 1 })
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/api/v1/task-instances/%d/kill", base, ts["loops"].ID), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Fatalf("kill: %d", resp.StatusCode)
	}
	ts = wait(wf, "the looping agent killed and the task behind run", done)
	if ts["loops"].State != dao.TaskKilled || ts["behind"].State != dao.TaskSucceeded {
		t.Errorf("loops %s, behind %s; want killed, then succeeded", ts["loops"].State, ts["behind"].State)
	}
	if n := srv.Calls(""); n != 1 {
		t.Errorf("%d model calls; want the first step's only", n)
	}
}
