package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
)

// TestFlagsGoAnywhereOnEveryCommand runs every command that takes arguments with its flags
// after them, before them and between them, and checks that each flag did its part.
func TestFlagsGoAnywhereOnEveryCommand(t *testing.T) {
	t.Parallel()
	e := setupE2E(t, nil, "")
	e.Master("master")
	e.Worker("worker")
	ok := func(args ...string) cliRun {
		t.Helper()
		r := e.cli(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: %s", args, r)
		}
		return r
	}
	instance := func(r cliRun) int64 {
		t.Helper()
		id, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if err != nil {
			t.Fatalf("no instance id printed: %s", r)
		}
		return id
	}
	params := func(id int64) map[string]string {
		t.Helper()
		wf, err := e.db.WorkflowGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]string
		if err := json.Unmarshal(wf.Params, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// submit: the docs' own line, and the flags on both sides of the file.
	nightly := e.file(t, "nightly.yaml", `
name: nightly
params: {region: eu}
tasks:
  - {name: clean, type: shell, command: 'echo "$ZKSCHED_PARAM_region"'}
`)
	r := ok("submit", nightly, "--param", "region=us", "--wait")
	if id := instance(r); params(id)["region"] != "us" || !strings.Contains(r.stderr, "workflow instance "+strconv.FormatInt(id, 10)+" succeeded") {
		t.Errorf("submit FILE --param --wait: params %v\n%s", params(id), r)
	}
	r = ok("submit", "--param", "region=ap", nightly, "--priority", "7", "--wait")
	if id := instance(r); params(id)["region"] != "ap" || !strings.Contains(r.stderr, "succeeded") {
		t.Errorf("submit --param FILE --priority --wait: params %v\n%s", params(id), r)
	} else if wf, _ := e.db.WorkflowGet(context.Background(), id); wf.Priority != 7 {
		t.Errorf("submit --priority 7 after the file: priority %d", wf.Priority)
	}

	// schedule and backfill.
	ok("submit", e.file(t, "report.yaml", `
name: report
params: {who: {}}
schedule: {cron: "0 3 * * *", timezone: UTC}
tasks:
  - {name: r, type: shell, command: 'echo "$ZKSCHED_PARAM_who"'}
`))
	var list []struct {
		Workflow string `json:"workflow"`
		Next     []any  `json:"next"`
	}
	ok("schedule", "--json", "list", "--next", "1").json(t, &list)
	if len(list) != 1 || list[0].Workflow != "report" || len(list[0].Next) != 1 {
		t.Errorf("schedule --json list --next 1 = %+v", list)
	}
	ok("schedule", "--config", "", "disable", "report")
	ok("schedule", "enable", "--config=", "report")
	r = ok("schedule", "--param", "who=me", "trigger", "report", "--wait")
	if id := instance(r); params(id)["who"] != "me" || !strings.Contains(r.stderr, "succeeded") {
		t.Errorf("schedule --param trigger NAME --wait: params %v\n%s", params(id), r)
	}
	r = ok("backfill", "--from", "2026-10-01", "report", "--dry-run", "--to", "2026-10-03")
	if strings.Count(r.stdout, "would be created") != 3 { // 03:00 on the 1st, 2nd and 3rd: --to's day included
		t.Errorf("backfill --from NAME --dry-run --to: %s", r)
	}

	// signal, with its flags around the id.
	r = ok("submit", e.file(t, "wait.yaml", "name: gate\ntasks:\n  - {name: review, type: wait, timeout: 1h}\n"))
	wf := instance(r)
	var review dao.TaskInstance
	waitUntil(t, 30*time.Second, "review to wait", func() bool {
		review = e.tasks(t, wf)["review"]
		return review.State == dao.TaskWaiting
	})
	ok("signal", "--output", "no", strconv.FormatInt(review.ID, 10), "--fail")
	if got := e.tasks(t, wf)["review"]; got.State != dao.TaskFailed || got.Error == nil || *got.Error != "failed by a signal: no" {
		t.Errorf("signal --output ID --fail: %+v", got)
	}

	// user: flags before the subcommand, between it and the name, after the name.
	users := filepath.Join(e.dir, "users")
	ok("user", "--users-file", users, "add", "alice", "--role", "viewer")
	ok("user", "add", "--role=operator", "bob", "--users-file", users)
	if r := ok("user", "list", "--users-file", users); !strings.Contains(r.stdout, "alice") || !strings.Contains(r.stdout, "bob") {
		t.Errorf("user list: %s", r)
	}
	ok("user", "--users-file", users, "remove", "alice")
	if us, err := conf.ReadUsersFile(users); err != nil || len(us) != 1 || us[0].Name != "bob" || us[0].Role != "operator" {
		t.Errorf("users after add, add, remove: %+v, %v", us, err)
	}

	// zk: the flag before the subcommand.
	var nodes struct {
		Leader  string `json:"leader"`
		Workers []any  `json:"workers"`
	}
	ok("zk", "--json", "nodes").json(t, &nodes)
	if nodes.Leader == "" || len(nodes.Workers) != 1 {
		t.Errorf("zk --json nodes = %+v", nodes)
	}
	if r := ok("zk", "--timeout", "5s", "tree"); !strings.Contains(r.stdout, "election") {
		t.Errorf("zk --timeout 5s tree: %s", r)
	}

	// Mistakes are still told apart, wherever the flags are.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", nightly, "--wait", nightly}, "want one workflow file, got 2 arguments"},
		{[]string{"schedule", "--json"}, "want list, enable, disable or trigger"},
		{[]string{"schedule", "--json", "lst"}, `unknown schedule command "lst"`},
		{[]string{"schedule", "list", "report"}, `schedule list takes no workflow name, got "report"`},
		{[]string{"user", "--users-file", users, "list", "bob"}, `user list takes no name, got "bob"`},
		{[]string{"zk", "--json", "nodes", "tree"}, "unexpected arguments [tree]"},
		{[]string{"backfill", "--from", "2026-10-01", "report"}, "want a workflow name, --from and --to"},
		{[]string{"migrate", "now"}, "unexpected arguments [now]"},
		{[]string{"version", "--", "x"}, "unexpected arguments [x]"},
		// A param the workflow does not declare is a mistake on the command line too.
		{[]string{"submit", nightly, "--param", "regoin=us"}, `params: "regoin" is not a param of workflow nightly (did you mean "region"?)`},
		{[]string{"schedule", "--param", "wh=me", "trigger", "report"}, `params: "wh" is not a param of workflow report (did you mean "who"?)`},
	} {
		r := e.cli(t, nil, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %s\nwant a usage error %q", tc.args, r, tc.want)
		}
	}
}
