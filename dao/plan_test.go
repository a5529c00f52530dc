package dao_test

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lib/pq"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

// seedHistory makes a table that looks like a scheduler's after a while: finished is the
// number of finished single-task workflow instances, running the number of instances master
// m1 drives, and queued tasks wait in group "g".
func seedHistory(t testing.TB, db *dao.DB, finished, running, queued int) {
	t.Helper()
	ctx := context.Background()
	daotest.Submit(t, db, "wf", map[string]any{"name": "wf"})
	for _, stmt := range []string{
		`INSERT INTO workflow_instance (workflow_name, workflow_version, state, owner, ended_at)
		 SELECT 'wf', 1, 'succeeded', 'm1', now() FROM generate_series(1, FINISHED)`,
		`INSERT INTO task_instance (workflow_instance_id, name, type, state, worker_id, attempt, ended_at)
		 SELECT id, 't', 'noop', 'succeeded', 'w1', 1, now() FROM workflow_instance WHERE state = 'succeeded'`,
		`INSERT INTO task_attempt (task_instance_id, attempt, worker_id, started_at, ended_at, outcome)
		 SELECT id, 1, 'w1', now(), now(), 'succeeded' FROM task_instance`,
		`INSERT INTO workflow_instance (workflow_name, workflow_version, state, owner, started_at)
		 SELECT 'wf', 1, 'running', 'm1', now() FROM generate_series(1, RUNNING)`,
		`UPDATE workflow_instance SET state = 'running', owner = 'm1', started_at = now() WHERE state = 'submitted'`,
		`INSERT INTO task_instance (workflow_instance_id, name, type, state, worker_group)
		 SELECT (SELECT min(id) FROM workflow_instance WHERE state = 'running'), 'q' || g, 'noop', 'queued', 'g'
		 FROM generate_series(1, QUEUED) g`,
	} {
		if _, err := db.SQL().ExecContext(ctx, strings.NewReplacer("FINISHED", fmt.Sprint(finished), "QUEUED", fmt.Sprint(queued), "RUNNING", fmt.Sprint(running)).Replace(stmt)); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

// genericPlan is plan for the generic plan PostgreSQL settles on for a prepared statement
// (how the hot statements run, see sqlx.go): the plan made without the parameters' values.
func genericPlan(t *testing.T, db *dao.DB, query, types string, args ...any) []string {
	t.Helper()
	return flatten(t, explainGeneric(t, db, "", query, types, args...))
}

// explainGeneric is EXPLAIN (options, FORMAT JSON) of the generic plan of query, as JSON.
// With ANALYZE among the options the statement runs.
func explainGeneric(t *testing.T, db *dao.DB, options, query, types string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := db.SQL().Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// EXECUTE takes no bound parameters: the values go in as literals.
	placeholders := make([]string, len(args))
	for i, a := range args {
		if v, ok := a.(driver.Valuer); ok {
			var err error
			if a, err = v.Value(); err != nil {
				t.Fatal(err)
			}
		}
		switch v := a.(type) {
		case nil:
			placeholders[i] = "NULL"
		case string:
			placeholders[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case []byte:
			placeholders[i] = "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
		default:
			placeholders[i] = fmt.Sprint(v)
		}
	}
	for _, stmt := range []string{"SET plan_cache_mode = force_generic_plan", "DEALLOCATE ALL",
		"PREPARE hot (" + types + ") AS " + query} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt[:min(len(stmt), 40)], err)
		}
	}
	defer conn.ExecContext(ctx, "RESET plan_cache_mode; DEALLOCATE ALL")
	var raw string
	if err := conn.QueryRowxContext(ctx, "EXPLAIN ("+options+" FORMAT JSON) EXECUTE hot ("+strings.Join(placeholders, ", ")+")").Scan(&raw); err != nil {
		t.Fatalf("explain execute: %v", err)
	}
	return raw
}

// plan returns EXPLAIN's JSON plan of query with args, flattened to one string per node:
// "Node Type|Relation Name|Index Name".
func plan(t *testing.T, db *dao.DB, query string, args ...any) []string {
	t.Helper()
	var raw string
	if err := db.SQL().QueryRowContext(context.Background(), "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatalf("explain: %v", err)
	}
	return flatten(t, raw)
}

func flatten(t *testing.T, raw string) []string {
	t.Helper()
	var doc []struct{ Plan node }
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n node)
	walk = func(n node) {
		out = append(out, n.Type+"|"+n.Relation+"|"+n.Index)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return out
}

// walkPlan calls visit on every node of raw, EXPLAIN's JSON plan.
func walkPlan(t *testing.T, raw string, visit func(n node)) {
	t.Helper()
	var doc []struct{ Plan node }
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(n node)
	walk = func(n node) {
		visit(n)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
}

// explainAnalyze runs query with EXPLAIN (ANALYZE, FORMAT JSON): with the plan PostgreSQL
// makes for args, or the generic plan of the prepared statement (types, its parameters').
func explainAnalyze(t *testing.T, db *dao.DB, generic bool, query, types string, args ...any) string {
	t.Helper()
	if generic {
		return explainGeneric(t, db, "ANALYZE,", query, types, args...)
	}
	var raw string
	if err := db.SQL().QueryRowContext(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// batchCost reads an EXPLAIN ANALYZE plan: the rows its scans of tables returned, over all
// their loops, and the rows its joins' filters dropped.
func batchCost(t *testing.T, raw string, tables ...string) (read, removed float64) {
	t.Helper()
	walkPlan(t, raw, func(nd node) {
		if strings.Contains(nd.Type, "Scan") && slices.Contains(tables, nd.Relation) {
			read += nd.Rows * max(nd.Loops, 1)
		}
		removed += nd.RemovedByJoinFilter * max(nd.Loops, 1)
	})
	return read, removed
}

type node struct {
	Type     string `json:"Node Type"`
	Relation string `json:"Relation Name"`
	Index    string `json:"Index Name"`
	Plans    []node `json:"Plans"`
	// With EXPLAIN ANALYZE: the rows a join's filter dropped, in each of Loops executions.
	RemovedByJoinFilter float64 `json:"Rows Removed by Join Filter"`
	Loops               float64 `json:"Actual Loops"`
	Rows                float64 `json:"Actual Rows"`
}

// claimTypes are the types of the claims' parameters, for their generic plans.
const claimTypes = "text, text[], int, text[], int[], int, bigint"

// claimArgs are the parameters of a claim of 100 tasks by w1 in groups, alone in them.
func claimArgs(groups ...string) []any {
	return []any{"w1", pq.Array(groups), 100, pq.Array([]string{}), pq.Array([]int64{}), 0, 0}
}

// shareArgs are the parameters of a claim of 100 tasks by w1 in groups, beside w2 and w3,
// all of 100 slots, of tasks fresh for a minute.
func shareArgs(groups ...string) []any {
	return []any{"w1", pq.Array(groups), 100, pq.Array([]string{"w2", "w3"}), pq.Array([]int64{100, 100}), 100, 60000}
}

// TestHotStatementsUseTheirIndexes checks, with EXPLAIN, that the statements every task goes
// through read task_instance by index and never scan it: the finished rows, which are nearly
// all of a long-lived table, are never read again. It checks the plans with no statistics (a
// table that filled since the last ANALYZE, as after a burst of submissions) and with them.
func TestHotStatementsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	// The plans without statistics are of tables autovacuum has not analyzed yet: it stays
	// off for them until the test's own ANALYZE, or it might analyze them half seeded.
	if _, err := db.SQL().Exec(`ALTER TABLE workflow_instance SET (autovacuum_enabled = false);
		ALTER TABLE task_instance SET (autovacuum_enabled = false);
		ALTER TABLE task_attempt SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	// A history of 100,000 instances: on a table a tenth of that, never analyzed, a scan of
	// it costs the planner about what 100 lookups by the primary key do, and it may take
	// either for a batch of 100.
	seedHistory(t, db, 100000, 5000, 50)
	var ids []int64
	if err := db.SQL().Select(&ids, `SELECT id FROM workflow_instance WHERE state = 'running' ORDER BY id LIMIT 100`); err != nil {
		t.Fatal(err)
	}
	var some []int64
	if err := db.SQL().Select(&some, `SELECT id FROM task_instance ORDER BY id LIMIT 100`); err != nil {
		t.Fatal(err)
	}
	n := len(some)
	strs := func(v string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	ints := make([]int64, n)
	nulls := make([]*string, n)
	bools := make([]bool, n)
	// Indexes a statement must not read: the sweep's probe of an instance's live tasks read
	// every queued and running task through task_instance_state_id (1.2 ms an instance; now
	// task_instance_listed_state_id, which holds the queued ones).
	avoid := map[string]string{"claim stranded workflows": "task_instance_listed_state_id", "finish": "workflow_instance_state_id"}
	for _, stats := range []string{"without statistics", "after ANALYZE", "generic plan"} {
		if stats == "after ANALYZE" {
			if _, err := db.SQL().Exec(`ANALYZE task_instance; ANALYZE task_attempt; ANALYZE workflow_instance`); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name, query string
			args        []any
			index       string // any of, separated by "|"
			types       string // of the parameters, for the generic plan
		}{
			{"claim", dao.ClaimSQL, claimArgs("g"), "task_instance_queued", claimTypes},
			{"claim, two groups", dao.ClaimSQL, claimArgs("g", "h"), "task_instance_queued", claimTypes},
			{"claim without pools", dao.ClaimUnpooledSQL, claimArgs("g"), "task_instance_queued", claimTypes},
			{"claim without pools, two groups", dao.ClaimUnpooledSQL, claimArgs("g", "h"), "task_instance_queued", claimTypes},
			// A share counts what runs on each worker through task_instance_running.
			{"claim a share", dao.ClaimSQL, shareArgs("g"), "task_instance_running", claimTypes},
			{"claim a share, two groups", dao.ClaimSQL, shareArgs("g", "h"), "task_instance_running", claimTypes},
			{"claim a share without pools", dao.ClaimUnpooledSQL, shareArgs("g"), "task_instance_running", claimTypes},
			{"claim a share without pools, two groups", dao.ClaimUnpooledSQL, shareArgs("g", "h"), "task_instance_running", claimTypes},
			{"finish", dao.FinishManySQL, []any{pq.Array(some), pq.Array(strs("w1")), pq.Array(ints), pq.Array(strs("succeeded")),
				pq.Array(bools), pq.Array(nulls), pq.Array(nulls), pq.Array(nulls), pq.Array(strs("succeeded")), pq.Array(nulls),
				pq.Array(nulls), pq.Array(nulls), pq.Array(nulls), pq.Array(nulls), pq.Array(bools), pq.Array(nulls)}, "task_instance_pkey|task_instance_running",
				"bigint[], text[], int[], text[], bool[], text[], text[], int[], text[], text[], text[], text[], bigint[], bigint[], bool[], text[]"},
			{"list by workflows", dao.ListByWorkflowsSQL, []any{pq.Array(ids)}, "task_instance_workflow_instance_id_name_key", "bigint[]"},
			{"claim workflows", dao.ClaimUnownedSQL, []any{"m2", 100}, "workflow_instance_claimable", "text, int"},
			{"sweep range", dao.SweepRangeSQL, []any{0, 1000}, "workflow_instance_unowned_running", "bigint, int"},
			{"claim stranded workflows", dao.ClaimStrandedSQL, []any{"m2", 0, 1 << 40}, "workflow_instance_unowned_running|workflow_instance_pkey", "text, bigint, bigint"},
			{"lock unowned workflows", dao.LockUnownedSQL, []any{pq.Array(ids)}, "workflow_instance_pkey", "bigint[]"},
			{"lock workflows", dao.LockManySQL, []any{pq.Array(ids), "m1"}, "workflow_instance_pkey", "bigint[], text"},
			{"finish workflows", dao.FinishManyWorkflowsSQL, []any{"m1", pq.Array(ids), pq.Array(strs("succeeded")[:len(ids)]),
				pq.Array(make([]*string, len(ids)))}, "workflow_instance_pkey", "text, bigint[], text[], text[]"},
		} {
			var nodes []string
			if stats == "generic plan" {
				nodes = genericPlan(t, db, c.query, c.types, c.args...)
			} else {
				nodes = plan(t, db, c.query, c.args...)
			}
			joined := strings.Join(nodes, "\n")
			for _, n := range nodes {
				// task_pool is the exception: a row per pool, never more.
				if (strings.HasPrefix(n, "Seq Scan|task_") && !strings.HasPrefix(n, "Seq Scan|task_pool|")) ||
					strings.HasPrefix(n, "Seq Scan|workflow_instance|") {
					t.Errorf("%s, %s: scans a whole table:\n%s", c.name, stats, joined)
				}
			}
			if !slices.ContainsFunc(strings.Split(c.index, "|"), func(ix string) bool { return strings.Contains(joined, "|"+ix) }) {
				t.Errorf("%s, %s: does not use %s:\n%s", c.name, stats, c.index, joined)
			}
			if ix := avoid[c.name]; ix != "" && strings.Contains(joined, "|"+ix) {
				t.Errorf("%s, %s: reads %s:\n%s", c.name, stats, ix, joined)
			}
		}
	}
}

// TestClaimWorkflowsOfABacklogByPrimaryKey checks the workflow claim against a backlog of new
// instances, where the claim of 100 looks big to the planner: written as a join with the
// locked rows it was planned as a hash join over a scan of every instance (12 ms a claim in
// the burn-down); it must update by primary key, planned with or without the parameters.
func TestClaimWorkflowsOfABacklogByPrimaryKey(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	daotest.Submit(t, db, "wf", map[string]any{"name": "wf"})
	if _, err := db.SQL().Exec(`INSERT INTO workflow_instance (workflow_name, workflow_version)
		SELECT 'wf', 1 FROM generate_series(1, 20000); ANALYZE workflow_instance`); err != nil {
		t.Fatal(err)
	}
	for _, generic := range []bool{false, true} {
		var nodes []string
		if generic {
			nodes = genericPlan(t, db, dao.ClaimUnownedSQL, "text, int", "m1", 100)
		} else {
			nodes = plan(t, db, dao.ClaimUnownedSQL, "m1", 100)
		}
		joined := strings.Join(nodes, "\n")
		if strings.Contains(joined, "Seq Scan|workflow_instance|") || !strings.Contains(joined, "|workflow_instance_pkey") {
			t.Errorf("claim of a backlog (generic plan: %v) does not update by primary key:\n%s", generic, joined)
		}
	}
}

// TestBulkSubmissionDoesNotPairSubmissions runs a bulk submission of 2,000 single-task
// instances with the generic plan (how a prepared statement ends up running) and checks, in
// EXPLAIN ANALYZE, that no join compared submissions pairwise: planned for the ten rows the
// planner assumes of an array, the statement's last join was a nested loop that compared
// every submission with every other (99,990,000 rows removed by its filter for 10,000; 8.5 s).
func TestBulkSubmissionDoesNotPairSubmissions(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		_, err := q.DefinitionEnsure(ctx, "bulk", []byte(`{"name":"bulk"}`), dao.DefinitionFacts{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	subs := make([]dao.Submission, n)
	for i := range subs {
		subs[i] = dao.Submission{Name: "bulk", Version: 1, Params: json.RawMessage(`{}`),
			Roots: []dao.NewTask{{Name: "t", Type: "noop", State: dao.TaskQueued, Group: "g"}}}
	}
	subs[7].Name = "never-defined"
	raw := explainGeneric(t, db, "ANALYZE,", dao.CreateSQL,
		"text[], int[], text[], int[], bool[], bigint[], text[], text[], text[], text[], int[], text[], text[], int[], bigint[], bigint[]",
		dao.CreateArgs(subs)...)
	removed := 0.0
	walkPlan(t, raw, func(n node) { removed += n.RemovedByJoinFilter * max(n.Loops, 1) })
	if removed > n {
		t.Errorf("joins removed %.0f rows for %d submissions: some join compares them pairwise\n%s", removed, n, raw)
	}
	var created, tasks int
	if err := db.SQL().Get(&created, `SELECT count(*) FROM workflow_instance WHERE workflow_name = 'bulk' AND state = 'running'`); err != nil || created != n-1 {
		t.Errorf("created %d instances, %v; want %d (one submission names no definition)", created, err, n-1)
	}
	if err := db.SQL().Get(&tasks, `SELECT count(*) FROM task_instance t JOIN workflow_instance w ON w.id = t.workflow_instance_id
		WHERE w.workflow_name = 'bulk' AND t.state = 'queued'`); err != nil || tasks != n-1 {
		t.Errorf("queued %d root tasks, %v; want %d, one an instance", tasks, err, n-1)
	}
}

// TestWorkerBatchesAreLinear checks, with EXPLAIN ANALYZE on analyzed tables, that the
// worker's claim and finish of a batch of single-task workflows read each row a bounded
// number of times and compare no two rows of the batch: the finish's instance update was
// planned as a loop over the tasks that read every ended instance again for each (5,100 rows
// for a batch of 100, 40 % of the statement), and its generic plan joined the results with
// the running tasks on the worker's id, the same for the whole batch (9,900 rows removed by
// the join's filter). With the plan PostgreSQL makes for these parameters, and the generic one.
func TestWorkerBatchesAreLinear(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	seedHistory(t, db, 5000, 0, 0)
	const n = 100
	createStarted(t, db, "single", 2*n)
	if _, err := db.SQL().Exec(`ANALYZE task_instance; ANALYZE workflow_instance`); err != nil {
		t.Fatal(err)
	}
	// check fails the statement if it read more than two rows of table for each of the batch
	// (the finish: an instance locked, then updated) or if a join dropped any row.
	check := func(what string, generic bool, raw, table string) {
		if read, removed := batchCost(t, raw, table); read > 2*n || removed > 0 {
			t.Errorf("%s, generic plan %v: read %.0f rows of %s for a batch of %d, its joins removed %.0f\n%s",
				what, generic, read, table, n, removed, raw)
		}
	}
	// The claims run as the workers run them: on a connection with the claims' settings
	// (a generic plan, no sequential or bitmap scans).
	claimConn, err := db.SQL().Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer claimConn.Close()
	for _, kv := range dao.ClaimSettings {
		if _, err := claimConn.ExecContext(ctx, "SET "+kv[0]+" = "+kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := claimConn.ExecContext(ctx, "PREPARE claim ("+claimTypes+") AS "+dao.ClaimUnpooledSQL); err != nil {
		t.Fatal(err)
	}
	for w, generic := range []bool{false, true} {
		worker := fmt.Sprint("w", w)
		var raw string
		if err := claimConn.QueryRowxContext(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim ('%s', '{g}', %d, '{}', '{}', 0, 0)",
			worker, n)).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		check("claim", true, raw, "task_instance")
		var toks []struct {
			ID      int64 `db:"id"`
			Attempt int64 `db:"attempt"`
		}
		if err := db.SQL().Select(&toks, `SELECT id, attempt FROM task_instance WHERE state = 'running' AND worker_id = $1`,
			worker); err != nil || len(toks) != n {
			t.Fatalf("claimed %d tasks, %v; want %d", len(toks), err, n)
		}
		ids, attempts, workers, states := make([]int64, n), make([]int64, n), make([]string, n), make([]string, n)
		for i, tok := range toks {
			ids[i], attempts[i], workers[i], states[i] = tok.ID, tok.Attempt, worker, "succeeded"
		}
		nulls := make([]*string, n)
		check("finish", generic, explainAnalyze(t, db, generic, dao.FinishManySQL,
			"bigint[], text[], int[], text[], bool[], text[], text[], int[], text[], text[], text[], text[], bigint[], bigint[], bool[], text[]",
			pq.Array(ids), pq.Array(workers), pq.Array(attempts), pq.Array(states), pq.Array(make([]bool, n)),
			pq.Array(nulls), pq.Array(nulls), pq.Array(make([]*int64, n)), pq.Array(states), pq.Array(nulls), pq.Array(nulls),
			pq.Array(nulls), pq.Array(make([]*int64, n)), pq.Array(make([]*int64, n)), pq.Array(make([]bool, n)), pq.Array(nulls)),
			"workflow_instance")
		var ended int
		if err := db.SQL().Get(&ended, `SELECT count(*) FROM workflow_instance WHERE id IN (
			SELECT workflow_instance_id FROM task_instance WHERE id = ANY($1)) AND state = 'succeeded'`, pq.Array(ids)); err != nil || ended != n {
			t.Errorf("generic plan %v: %d instances ended, %v; want %d", generic, ended, err, n)
		}
	}
}

// TestMasterBatchesAreLinear is TestWorkerBatchesAreLinear for the master's batch
// statements, on 100 instances the master drives: locking them, reading their tasks and
// finishing them compare no two of them and read each a bounded number of times. (The
// instance update of the worker's finish, written like finishManyWorkflowsSQL with an
// "id = ANY" beside the join, was planned as such a loop once the tables were analyzed.)
func TestMasterBatchesAreLinear(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	const n = 100
	seedHistory(t, db, 5000, 2*n, 0)
	if _, err := db.SQL().Exec(`INSERT INTO task_instance (workflow_instance_id, name, type, state, worker_id, attempt, ended_at)
		SELECT id, 't', 'noop', 'succeeded', 'w1', 1, now() FROM workflow_instance WHERE state = 'running';
		ANALYZE task_instance; ANALYZE workflow_instance`); err != nil {
		t.Fatal(err)
	}
	var running []int64
	if err := db.SQL().Select(&running, `SELECT id FROM workflow_instance WHERE state = 'running' ORDER BY id DESC LIMIT $1`, 2*n); err != nil || len(running) != 2*n {
		t.Fatalf("running instances = %d, %v", len(running), err)
	}
	states, errs := make([]string, n), make([]*string, n)
	for i := range states {
		states[i] = "succeeded"
	}
	for i, generic := range []bool{false, true} {
		ids := running[i*n : (i+1)*n]
		for _, c := range []struct {
			name, query, types string
			args               []any
		}{
			{"lock workflows", dao.LockManySQL, "bigint[], text", []any{pq.Array(ids), "m1"}},
			{"list by workflows", dao.ListByWorkflowsSQL, "bigint[]", []any{pq.Array(ids)}},
			{"finish workflows", dao.FinishManyWorkflowsSQL, "text, bigint[], text[], text[]",
				[]any{"m1", pq.Array(ids), pq.Array(states), pq.Array(errs)}},
		} {
			raw := explainAnalyze(t, db, generic, c.query, c.types, c.args...)
			if read, removed := batchCost(t, raw, "workflow_instance", "task_instance"); read > 2*n || removed > 0 {
				t.Errorf("%s, generic plan %v: read %.0f rows for %d instances, its joins removed %.0f\n%s",
					c.name, generic, read, n, removed, raw)
			}
		}
	}
	var ended int
	if err := db.SQL().Get(&ended, `SELECT count(*) FROM workflow_instance WHERE id = ANY($1) AND state = 'succeeded'`,
		pq.Array(running)); err != nil || ended != 2*n {
		t.Errorf("finished %d instances, %v; want %d", ended, err, 2*n)
	}
}

// TestSweepDoesNotProbeYoungInstances: the sweep takes an unowned running instance only when
// none of its tasks is live or ended in the last dao.StrandedAfter, which an instance that
// started less than that ago cannot satisfy, so it must not probe such an instance's tasks at
// all: a master starting on a fresh backlog of 30,000 probed every one of them (9 us each,
// 3 % of a burn-down's database time).
func TestSweepDoesNotProbeYoungInstances(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	const n = 200
	createStarted(t, db, "young", n)
	raw := explainGeneric(t, db, "ANALYZE,", dao.ClaimStrandedSQL, "text, bigint, bigint", "m1", 0, int64(1)<<40)
	probes := 0.0
	walkPlan(t, raw, func(n node) {
		if n.Relation == "task_instance" {
			probes += n.Loops
		}
	})
	if probes > 0 {
		t.Errorf("the sweep probed the tasks of %d instances that started a moment ago %.0f times\n%s", n, probes, raw)
	}
}

// TestClaimPlanMadeOnAnEmptyTable: the claims run with generic plans (dao's claimSettings),
// made once per connection from the statistics of that moment and kept until the next
// vacuum or analyze of the table. A plan made while task_instance was empty (and analyzed so)
// must still read the queued index once a backlog has arrived, not scan the table.
func TestClaimPlanMadeOnAnEmptyTable(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	conn, err := db.SQL().Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	setup := []string{"ANALYZE task_instance", "ANALYZE task_pool"}
	for _, kv := range dao.ClaimSettings {
		setup = append(setup, "SET "+kv[0]+" = "+kv[1])
	}
	setup = append(setup, "PREPARE pooled ("+claimTypes+") AS "+dao.ClaimSQL,
		"PREPARE unpooled ("+claimTypes+") AS "+dao.ClaimUnpooledSQL,
		// The first execution makes the plan, on the empty table.
		"EXECUTE pooled ('w1', '{g}', 100, '{w2}', '{100}', 100, 60000)", "EXECUTE unpooled ('w1', '{g}', 100, '{w2}', '{100}', 100, 60000)")
	for _, stmt := range setup {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt[:min(len(stmt), 40)], err)
		}
	}
	createStarted(t, db, "backlog", 20000)
	for _, name := range []string{"pooled", "unpooled"} {
		var raw string
		if err := conn.QueryRowxContext(ctx, "EXPLAIN (FORMAT JSON) EXECUTE "+name+" ('w1', '{g}', 100, '{w2}', '{100}', 100, 60000)").Scan(&raw); err != nil {
			t.Fatal(err)
		}
		nodes := flatten(t, raw)
		joined := strings.Join(nodes, "\n")
		if !strings.Contains(joined, "|task_instance_queued") {
			t.Errorf("%s claim, planned on an empty table: does not read task_instance_queued:\n%s", name, joined)
		}
		for _, n := range nodes {
			if strings.HasPrefix(n, "Seq Scan|task_instance") || strings.HasPrefix(n, "Bitmap Heap Scan|task_instance") {
				t.Errorf("%s claim, planned on an empty table: scans task_instance:\n%s", name, joined)
			}
		}
	}
}

// createStarted stores a definition name of one noop task "t" and creates n instances of it,
// each started with "t" queued in group g.
func createStarted(t *testing.T, db *dao.DB, name string, n int) {
	t.Helper()
	ctx := context.Background()
	raw := []byte(`{"name":"` + name + `","tasks":[{"name":"t","type":"noop"}]}`)
	if err := db.Tx(ctx, func(q *dao.Queries) error {
		if _, err := q.DefinitionEnsure(ctx, name, raw, daotest.Facts(t, raw)); err != nil {
			return err
		}
		return q.WorkflowCreateMany(ctx, dao.Submission{Name: name, Version: 1,
			Roots: []dao.NewTask{{Name: "t", Type: "noop", State: dao.TaskQueued, Group: "g"}}}, n)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestKeyAdmissionReadsItsKeyAlone: with thousands of keys, each with an instance running and
// one waiting, and a long history, the admission of one key (its count, its admission, the
// oldest of a full key) reads that key's instances alone through workflow_instance_key_active,
// with statistics and without; the pass over every key reads a few rows a key, not the history.
func TestKeyAdmissionReadsItsKeyAlone(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	// The first pass plans without statistics: autovacuum must not gather some midway. Between
	// the running keyed instances and the submitted ones, it told the planner that hardly any
	// instance is submitted, and the admission walked all 5,000 through the state index (seen
	// once in CI; an ANALYZE at that point does it every time). The second pass gathers them
	// itself.
	if _, err := db.SQL().Exec(`ALTER TABLE workflow_instance SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	const keys = 5000
	seedHistory(t, db, 20000, 0, 0)
	daotest.Submit(t, db, "chat", map[string]any{"name": "chat"})
	for _, stmt := range []string{
		`INSERT INTO workflow_instance (workflow_name, workflow_version, state, owner, started_at, concurrency_key, concurrency_max)
		 SELECT 'chat', 1, 'running', 'm1', now(), 'thread-' || g, 1 FROM generate_series(1, KEYS) g`,
		`INSERT INTO workflow_instance (workflow_name, workflow_version, concurrency_key, concurrency_max)
		 SELECT 'chat', 1, 'thread-' || g, 1 FROM generate_series(1, KEYS) g`,
	} {
		if _, err := db.SQL().Exec(strings.ReplaceAll(stmt, "KEYS", fmt.Sprint(keys))); err != nil {
			t.Fatal(err)
		}
	}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := db.SQL().Exec(`ANALYZE workflow_instance`); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name  string
			query string
			args  []any
			// most is how many rows of workflow_instance it may read.
			most float64
		}{
			{"count", dao.KeyCountSQL, []any{"chat", "thread-77"}, 2},
			{"oldest", dao.OldestActiveOfKeySQL, []any{"chat", "thread-77", 1}, 2},
			// One of its key runs: it admits nothing, having read the key's waiting one.
			{"admit", dao.AdmitKeyedSQL, []any{"chat", "thread-77", "m2", 1, nil, 100}, 2},
		} {
			raw := explainAnalyze(t, db, false, c.query, "", c.args...)
			read := examined(t, raw, "workflow_instance")
			joined := strings.Join(flatten(t, raw), "\n")
			if read > c.most || !strings.Contains(joined, "|workflow_instance_key_active") {
				t.Errorf("%s (analyzed: %v) read %v rows of workflow_instance, want at most %v through workflow_instance_key_active:\n%s",
					c.name, analyzed, read, c.most, joined)
			}
		}
		raw := explainAnalyze(t, db, false, dao.KeysAdmittableSQL, "", "", 100)
		read := examined(t, raw, "workflow_instance")
		if joined := strings.Join(flatten(t, raw), "\n"); read > 5*keys || strings.Contains(joined, "Seq Scan|workflow_instance|") {
			t.Errorf("the pass over every key (analyzed: %v) read %v rows of workflow_instance for %d keys; want a few a key, not the history:\n%s",
				analyzed, read, keys, joined)
		}
	}
}

// examined reads an EXPLAIN ANALYZE plan: the rows its scans of table read, those their
// filters dropped included, over all their loops.
func examined(t *testing.T, raw, table string) float64 {
	t.Helper()
	var doc []struct{ Plan scanned }
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	var n float64
	var walk func(s scanned)
	walk = func(s scanned) {
		if strings.Contains(s.Type, "Scan") && s.Relation == table {
			n += (s.Rows + s.Removed + s.RecheckRemoved) * max(s.Loops, 1)
		}
		for _, c := range s.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return n
}

type scanned struct {
	Type           string    `json:"Node Type"`
	Relation       string    `json:"Relation Name"`
	Plans          []scanned `json:"Plans"`
	Loops          float64   `json:"Actual Loops"`
	Rows           float64   `json:"Actual Rows"`
	Removed        float64   `json:"Rows Removed by Filter"`
	RecheckRemoved float64   `json:"Rows Removed by Index Recheck"`
}
