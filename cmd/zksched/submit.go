package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
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
	fs.Var(params, "param", "workflow parameter k=v (repeatable), one the file declares under params; overrides its default")
	priority := fs.Int("priority", 0, "priority of this instance, added to each task's priority (default: the workflow's priority)")
	wait := fs.Bool("wait", false, "wait for the instance to finish, printing task state changes; exit 1 if it fails")
	timeout := fs.Duration("connect-timeout", 30*time.Second, "how long to wait for PostgreSQL")
	// The file may come before the flags or after them.
	path, rest, err := parseNamed(fs, args)
	if err != nil {
		return err
	}
	if path == "" || len(rest) > 0 {
		n := len(rest)
		if path != "" {
			n++
		}
		return usageError{fmt.Errorf("want one workflow file, got %d arguments", n)}
	}
	if err := workflow.CheckParams(params); err != nil {
		return exitError{code: exitUsage, msg: "--param rejected, nothing stored:\n" + err.Error()}
	}
	spec, file, err := readWorkflowFile(path)
	if err != nil {
		return err
	}
	// The params are checked again with the instance's creation; checked here, a mistake in
	// them is told before anything is opened or stored.
	if _, err := spec.RunParams(params); err != nil && spec.Schedule == nil {
		return exitError{code: exitUsage, msg: "--param rejected, nothing stored:\n" + err.Error()}
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
	if err := checkConfigured(ctx, db, spec, cfg); err != nil {
		return err
	}
	if err := traceAsTheMasters(ctx, db, cfg); err != nil {
		return err
	}

	if !flagSet(fs, "priority") {
		*priority = spec.Priority
	}
	if spec.Schedule != nil && (*wait || len(params) > 0 || flagSet(fs, "priority")) {
		return usageError{fmt.Errorf("%s has a schedule: submit stores it and runs nothing; "+
			"run it now with zksched schedule trigger %s (which takes --param and --wait)", path, spec.Name)}
	}
	stored, err := lifecycle.Define(ctx, db, lifecycle.Definition{Spec: spec, File: file,
		Run: &lifecycle.Run{Params: params, Priority: *priority}, By: cliActor()}, time.Now())
	if errors.Is(err, dao.ErrWorkflowFull) {
		return exitError{code: exitFailed, msg: fmt.Sprintf("not submitted: %v; try again once an instance has finished", err)}
	}
	if errors.As(err, new(*lifecycle.ParamsError)) {
		return exitError{code: exitUsage, msg: "--param rejected, nothing stored:\n" + err.Error()}
	}
	if err != nil {
		return err
	}
	id, version, sched := stored.Instance, stored.Version, stored.Schedule
	if sched != nil {
		return printStoredSchedule(stdout, spec, version, sched)
	}
	if stored.Unscheduled {
		fmt.Fprintf(stderr, "the schedule of %s was removed: this file has none\n", spec.Name)
	}
	fmt.Fprintln(stdout, id)
	if !*wait {
		return nil
	}
	fmt.Fprintf(stderr, "submitted %s version %d as workflow instance %d; waiting\n", spec.Name, version, id)
	return waitFor(ctx, db, id, liveGroups(ctx, cfg), stderr)
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// printStoredSchedule tells what submitting a scheduled workflow did.
func printStoredSchedule(w io.Writer, spec *workflow.Spec, version int, s *dao.Schedule) error {
	state := "enabled"
	if !s.Enabled {
		state = "disabled (zksched schedule enable " + spec.Name + " turns it on)"
	}
	fmt.Fprintf(w, "stored %s version %d with schedule %q in %s, %s\n", spec.Name, version, s.Cron, s.Timezone, state)
	tt, err := spec.Schedule.Timetable()
	if err != nil || s.NextFireAt == nil {
		fmt.Fprintln(w, "no fire time ahead: the schedule has ended")
		return nil
	}
	fmt.Fprint(w, "next fires:")
	for t, i := tt.Next(s.NextFireAt.Add(-time.Nanosecond)), 0; !t.IsZero() && i < 3; t, i = tt.Next(t), i+1 {
		fmt.Fprint(w, "  ", t.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	return nil
}

// waitFor prints every task state change of a workflow instance until it finishes. A task
// queued again after a failed attempt is shown with the attempt's error and when the next
// one is due (queuedAgain). A queued
// task whose group has no live worker (groups says which have one, nil when unknown) is shown
// as waiting for one: it stays queued, it does not fail. A task that waits for a person (a
// wait task, a paused agent) is shown with the command that signals it.
func waitFor(ctx context.Context, db *dao.DB, id int64, groups func() map[string]bool, w io.Writer) error {
	seen := map[string]string{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		tasks, err := db.TaskListByWorkflow(ctx, id)
		if err == nil {
			for _, t := range tasks {
				line, countdown := string(t.State), ""
				switch {
				case t.State == dao.TaskRunning && t.WorkerID != nil:
					line = fmt.Sprintf("running on %s (attempt %d)", *t.WorkerID, t.Attempt)
				case t.State == dao.TaskQueued && noWorker(groups, t.WorkerGroup):
					line = fmt.Sprintf("queued: waiting for a worker of group %s (none is running)", t.WorkerGroup)
				case t.State == dao.TaskQueued && t.Attempt > 0:
					line, countdown = queuedAgain(&t, time.Now())
				case t.State == dao.TaskWaiting && t.Type == workflow.TypeSensor && t.PausedStep != nil &&
					strings.HasPrefix(*t.PausedStep, workflow.WorkflowRunStep):
					line = "waiting for a run of " + strings.TrimPrefix(*t.PausedStep, workflow.WorkflowRunStep) + " to end: a workflow sensor, on no worker"
				case t.State == dao.TaskWaiting && t.Type == workflow.TypeSensor:
					line = "waiting for its condition: a sensor, holding no slot until its next check"
				case t.State == dao.TaskWaiting && t.PausedStep != nil:
					line = fmt.Sprintf("waiting at its step %s: zksched signal %d --output TEXT [--fail], or Approve on its page",
						*t.PausedStep, t.ID)
				case t.State == dao.TaskWaiting && t.Type == workflow.TypeWait:
					line = fmt.Sprintf("waiting: zksched signal %d --output TEXT [--fail], or Approve on its page", t.ID)
				case t.State.Terminal() && t.Error != nil:
					line = fmt.Sprintf("%s: %s", t.State, *t.Error)
				}
				if t.State.Terminal() && t.EndReason != nil {
					line += fmt.Sprintf(" (end reason %s: %s)", *t.EndReason, t.EndReason.Describe())
				}
				if t.OutputTruncated {
					line += " (output truncated at its output-limit)"
				}
				if seen[t.Name] != line {
					seen[t.Name] = line
					fmt.Fprintf(w, "%s  %-20s %s%s\n", time.Now().Format("15:04:05.000"), t.Name, line, countdown)
				}
			}
		}
		wf, err := db.WorkflowGet(ctx, id)
		if err == nil && wf.State.Terminal() {
			msg := fmt.Sprintf("workflow instance %d %s", id, wf.State)
			if wf.EndReason != nil {
				msg += fmt.Sprintf(" (end reason %s: %s)", *wf.EndReason, wf.EndReason.Describe())
			}
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
