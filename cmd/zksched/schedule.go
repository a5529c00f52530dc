package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

const scheduleUsage = "list [--next N] [--json] | enable NAME | disable NAME | trigger NAME [--param k=v]... [--wait]"

// runSchedule is `zksched schedule list|enable|disable|trigger`.
func runSchedule(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("schedule", stdout)
	config := configFlag(fs)
	next := fs.Int("next", 3, "list: how many next fire times to show")
	asJSON := fs.Bool("json", false, "list: print JSON")
	params := paramFlags{}
	fs.Var(params, "param", "trigger: workflow parameter k=v (repeatable); overrides the fire's and the file's")
	wait := fs.Bool("wait", false, "trigger: wait for the instance to finish, printing task state changes")
	what, args, err := parseSub(fs, args, scheduleUsage, "list", "enable", "disable", "trigger")
	if err != nil {
		return err
	}
	name, args := first(args)
	switch {
	case len(args) > 0:
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	case what == "list" && name != "":
		return usageError{fmt.Errorf("schedule list takes no workflow name, got %q", name)}
	case what != "list" && name == "":
		return usageError{fmt.Errorf("schedule %s: want a workflow name", what)}
	}
	if err := workflow.CheckParams(params); err != nil {
		return exitError{code: exitUsage, msg: "--param rejected, nothing triggered:\n" + err.Error()}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, cfg, newLogger(cfg.Log, stderr))
	if err != nil {
		return err
	}
	defer db.Close()
	switch what {
	case "list":
		views, err := lifecycle.Schedules(ctx, db, *next)
		if err != nil {
			return err
		}
		return writeSchedules(stdout, views, *asJSON)
	case "enable", "disable":
		s, err := lifecycle.SetScheduleEnabled(ctx, db, name, what == "enable", time.Now(),
			cliAudit("schedule."+what, "schedule/"+name, map[string]any{}))
		if err != nil {
			return scheduleError(err)
		}
		msg := fmt.Sprintf("schedule of %s %sd", name, what)
		if s.Enabled && s.NextFireAt != nil {
			msg += "; next fire " + inZone(*s.NextFireAt, s.Timezone)
		}
		fmt.Fprintln(stdout, msg)
		return nil
	}
	if err := traceAsTheMasters(ctx, db, cfg); err != nil {
		return err
	}
	res, err := lifecycle.TriggerSchedule(ctx, db, name, params, cliID(), time.Now(),
		cliAudit(dao.AuditScheduleTrigger, "schedule/"+name, map[string]any{"params": map[string]string(params)}))
	if err != nil {
		return scheduleError(err)
	}
	if res.Instance == 0 {
		return exitError{code: exitFailed, msg: fmt.Sprintf("trigger of %s created no instance: %s", name, res.Skipped)}
	}
	fmt.Fprintln(stdout, res.Instance)
	if !*wait {
		return nil
	}
	fmt.Fprintf(stderr, "triggered %s as workflow instance %d; waiting\n", name, res.Instance)
	return waitFor(ctx, db, res.Instance, liveGroups(ctx, cfg), stderr)
}

// runBackfill is `zksched backfill WORKFLOW --from T1 --to T2`.
func runBackfill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backfill", stdout)
	config := configFlag(fs)
	from := fs.String("from", "", "first fire time, included: 2026-11-01, 2026-11-01T02:00 (in the schedule's timezone) or RFC 3339")
	to := fs.String("to", "", "last fire time, included; same forms as --from, a date alone including that whole day")
	dryRun := fs.Bool("dry-run", false, "list the fire times and create nothing")
	name, args, err := parseNamed(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	}
	if name == "" || *from == "" || *to == "" {
		return usageError{errors.New("want a workflow name, --from and --to")}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, cfg, newLogger(cfg.Log, stderr))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := traceAsTheMasters(ctx, db, cfg); err != nil {
		return err
	}
	// The bounds are read in the schedule's own zone, so the schedule is read first.
	sched, err := db.ScheduleGet(ctx, name)
	if err != nil {
		return scheduleError(err)
	}
	loc, err := workflow.LoadLocation(sched.Timezone)
	if err != nil {
		return err
	}
	t1, err := workflow.ParseTime(*from, loc)
	if err != nil {
		return usageError{fmt.Errorf("--from: %w", err)}
	}
	t2, err := workflow.ParseEnd(*to, loc)
	if err != nil {
		return usageError{fmt.Errorf("--to: %w", err)}
	}
	res, err := lifecycle.Backfill(ctx, db, name, t1, t2, cliID(), *dryRun,
		cliAudit(dao.AuditBackfill, "schedule/"+name, map[string]any{"from": t1, "to": t2}))
	if err != nil {
		return scheduleError(err)
	}
	created, before := 0, 0
	for _, f := range res.Fires {
		line := f.Time.In(res.Location).Format(time.RFC3339)
		switch {
		case *dryRun:
			line += "  would be created"
		case f.Instance != 0:
			created++
			line += fmt.Sprintf("  workflow instance %d", f.Instance)
		default:
			before++
			line += "  " + f.Skipped
		}
		fmt.Fprintln(stdout, line)
	}
	switch {
	case *dryRun:
		fmt.Fprintf(stderr, "%d fire times of %s between %s and %s; nothing created (--dry-run)\n", len(res.Fires), name, *from, *to)
	default:
		fmt.Fprintf(stderr, "backfill of %s: %d instances created, %d fire times handled before; "+
			"they run within the workflow's max-active-instances\n", name, created, before)
	}
	return nil
}

// parseNamed parses args with fs and returns the first argument (a subcommand, a workflow,
// a user, an instance id), "" for none, and the arguments after it. Flags may come anywhere
// (see parse).
func parseNamed(fs *flag.FlagSet, args []string) (name string, rest []string, err error) {
	if err := parse(fs, args); err != nil {
		return "", nil, err
	}
	if fs.NArg() == 0 {
		return "", nil, nil
	}
	return fs.Arg(0), fs.Args()[1:], nil
}

// parseSub parses the args of a command with subcommands (schedule list, user add) with fs,
// whose --help prints usage, and returns the subcommand, one of subs, and the arguments after
// it. Flags may come anywhere, before the subcommand too.
func parseSub(fs *flag.FlagSet, args []string, usage string, subs ...string) (what string, rest []string, err error) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: zksched %s %s\n", fs.Name(), usage)
		fs.PrintDefaults()
	}
	what, rest, err = parseNamed(fs, args)
	if err != nil {
		return "", nil, err
	}
	want := strings.Join(subs[:len(subs)-1], ", ") + " or " + subs[len(subs)-1]
	switch {
	case what == "":
		return "", nil, usageError{fmt.Errorf("want %s", want)}
	case !slices.Contains(subs, what):
		return "", nil, usageError{fmt.Errorf("unknown %s command %q: want %s", fs.Name(), what, want)}
	}
	return what, rest, nil
}

// first returns the first of args, "" for none, and the rest.
func first(args []string) (string, []string) {
	if len(args) == 0 {
		return "", nil
	}
	return args[0], args[1:]
}

// scheduleError turns a missing schedule into a plain failure with a hint.
func scheduleError(err error) error {
	if errors.Is(err, dao.ErrNoSchedule) {
		return exitError{code: exitFailed, msg: err.Error() + " (submit a file with a schedule: section; zksched schedule list shows them)"}
	}
	if errors.As(err, new(*lifecycle.ParamsError)) {
		return exitError{code: exitUsage, msg: "--param rejected, nothing triggered:\n" + err.Error()}
	}
	return err
}

// cliID names the command-line process on the fires it makes: host and pid.
func cliID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("cli:%s:%d", host, os.Getpid())
}

func inZone(t time.Time, zone string) string {
	if loc, err := workflow.LoadLocation(zone); err == nil {
		t = t.In(loc)
	}
	return t.Format(time.RFC3339)
}

// writeSchedules prints the schedules as a table or JSON.
func writeSchedules(w io.Writer, views []lifecycle.ScheduleView, asJSON bool) error {
	if asJSON {
		out := make([]lifecycle.ScheduleJSON, len(views))
		for i, v := range views {
			out[i] = v.JSON()
		}
		return writeJSON(w, out)
	}
	if len(views) == 0 {
		fmt.Fprintln(w, "no schedules")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tSTATE\tCRON\tTIMEZONE\tMISFIRE\tACTIVE\tLAST FIRE\tNEXT FIRES")
	for _, v := range views {
		state := "enabled"
		switch {
		case v.Problem != "":
			state = "broken: " + v.Problem
		case !v.Enabled:
			state = "disabled"
		case v.NextFireAt == nil:
			state = "ended"
		}
		misfire := v.Misfire
		if v.Misfire == workflow.MisfireRunAll {
			misfire += fmt.Sprintf(" (%d)", v.MisfireLimit)
		}
		last := "-"
		if v.LastFireAt != nil {
			last = inZone(*v.LastFireAt, v.Timezone)
		}
		next := make([]string, len(v.Next))
		for i, t := range v.Next {
			next[i] = t.Format(time.RFC3339)
		}
		if len(next) == 0 {
			next = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", v.WorkflowName, state, v.Cron, v.Timezone, misfire,
			v.Active, last, strings.Join(next, ", "))
	}
	return tw.Flush()
}
