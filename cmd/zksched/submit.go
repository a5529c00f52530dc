package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// paramFlags collects repeated --param k=v.
type paramFlags map[string]string

func (p paramFlags) String() string { return fmt.Sprint(map[string]string(p)) }

func (p paramFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want k=v, got %q", s)
	}
	p[k] = v
	return nil
}

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("submit", stdout)
	config := configFlag(fs)
	params := paramFlags{}
	fs.Var(params, "param", "workflow parameter k=v (repeatable); overrides the file's params")
	priority := fs.Int("priority", 0, "priority of this instance; added to each task's priority")
	wait := fs.Bool("wait", false, "wait for the instance to finish, printing task state changes; exit 1 if it fails")
	timeout := fs.Duration("connect-timeout", 30*time.Second, "how long to wait for PostgreSQL")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("want one workflow file, got %d arguments", fs.NArg())}
	}
	spec, err := workflow.ParseFile(fs.Arg(0))
	if err != nil {
		return exitError{code: exitFailed, msg: "rejected, nothing stored:\n" + err.Error()}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	cctx, cancel := context.WithTimeout(ctx, *timeout)
	db, err := openDB(cctx, cfg, log)
	cancel()
	if err != nil {
		return err
	}
	defer db.Close()

	rawSpec, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	rawParams, err := json.Marshal(map[string]string(params))
	if err != nil {
		return err
	}
	var id int64
	var version int
	err = db.Tx(ctx, func(q *dao.Queries) error {
		if version, err = q.DefinitionEnsure(ctx, spec.Name, rawSpec); err != nil {
			return err
		}
		id, err = q.WorkflowCreate(ctx, spec.Name, version, rawParams, *priority)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, id)
	if !*wait {
		return nil
	}
	fmt.Fprintf(stderr, "submitted %s version %d as workflow instance %d; waiting\n", spec.Name, version, id)
	return waitFor(ctx, db, id, stderr)
}

// waitFor prints every task state change of a workflow instance until it finishes.
func waitFor(ctx context.Context, db *dao.DB, id int64, w io.Writer) error {
	seen := map[string]string{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		tasks, err := db.TaskListByWorkflow(ctx, id)
		if err == nil {
			for _, t := range tasks {
				line := string(t.State)
				switch {
				case t.State == dao.TaskRunning && t.WorkerID != nil:
					line = fmt.Sprintf("running on %s (attempt %d)", *t.WorkerID, t.Attempt)
				case t.State == dao.TaskQueued && t.Attempt > 0:
					line = fmt.Sprintf("queued again after attempt %d", t.Attempt)
				case t.State.Terminal() && t.Error != nil:
					line = fmt.Sprintf("%s: %s", t.State, *t.Error)
				}
				if seen[t.Name] != line {
					seen[t.Name] = line
					fmt.Fprintf(w, "%s  %-20s %s\n", time.Now().Format("15:04:05.000"), t.Name, line)
				}
			}
		}
		wf, err := db.WorkflowGet(ctx, id)
		if err == nil && wf.State.Terminal() {
			msg := fmt.Sprintf("workflow instance %d %s", id, wf.State)
			if wf.Error != nil {
				msg += ": " + *wf.Error
			}
			if wf.State != dao.WorkflowSucceeded {
				return exitError{code: exitFailed, msg: msg}
			}
			fmt.Fprintln(w, msg)
			return nil
		}
		select {
		case <-ctx.Done():
			return exitError{code: exitFailed, msg: fmt.Sprintf("interrupted; workflow instance %d goes on", id)}
		case <-tick.C:
		}
	}
}
