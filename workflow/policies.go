package workflow

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// scheduleFields are the keys of a schedule mapping.
var scheduleFields = []string{"cron", "timezone", "start", "end", "enabled", "misfire", "misfire-limit"}

var misfirePolicies = []string{MisfireSkip, MisfireRunOnce, MisfireRunAll}

var whenFullPolicies = []string{WhenFullQueue, WhenFullSkip}

// decodeSchedule reads the schedule mapping. Its fields' lines are kept as "schedule.<key>"
// so validation problems point at the line at fault.
func (d *decoder) decodeSchedule(v *yaml.Node) *Schedule {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "schedule must be a mapping with a cron expression, like {cron: \"0 2 * * *\"}, not %s", kindName(v))
		return nil
	}
	s := &Schedule{Enabled: true}
	for _, kv := range d.mapping(v, "the schedule") {
		key := kv.key.Value
		d.pos.fields["schedule."+key] = kv.key.Line
		what := "schedule: " + key
		switch key {
		case "cron":
			s.Cron, _ = d.scalar(kv.value, what, "a string")
		case "timezone":
			s.Timezone, _ = d.scalar(kv.value, what, "a string")
		case "start":
			s.Start, _ = d.scalar(kv.value, what, "a time")
		case "end":
			s.End, _ = d.scalar(kv.value, what, "a time")
		case "misfire":
			s.Misfire, _ = d.scalar(kv.value, what, "a string")
		case "misfire-limit":
			s.MisfireLimit, _ = d.intValue(kv.value, what)
		case "enabled":
			n := d.resolve(kv.value)
			if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&s.Enabled) != nil {
				d.errorf(n.Line, "%s must be true or false, not %s", what, kindName(n))
			}
		default:
			d.errorf(kv.key.Line, "unknown field %s in the schedule%s", quote(key), didYouMean(key, scheduleFields))
		}
	}
	return s
}

// setPolicyDefaults fills in the workflow-level policies a file may leave out.
func (s *Spec) setPolicyDefaults() {
	if s.MaxActiveInstances > 0 && s.WhenFull == "" {
		s.WhenFull = WhenFullQueue
	}
	if s.Concurrency != nil {
		s.Concurrency.setDefaults()
	}
	if sc := s.Schedule; sc != nil {
		if sc.Timezone == "" {
			sc.Timezone = "UTC"
		}
		if sc.Misfire == "" {
			sc.Misfire = MisfireRunOnce
		}
		if sc.Misfire == MisfireRunAll && sc.MisfireLimit == 0 {
			sc.MisfireLimit = DefaultMisfireLimit
		}
	}
}

// policyProblems checks the workflow-level fields: the schedule, max-active-instances,
// when-full, concurrency, timeout and priority.
func (s *Spec) policyProblems() []problem {
	var probs []problem
	add := func(field, format string, args ...any) {
		probs = append(probs, problem{task: -1, field: field, msg: fmt.Sprintf(format, args...)})
	}
	if s.MaxActiveInstances < 0 || s.MaxActiveInstances > MaxActiveInstances {
		add("max-active-instances", "max-active-instances %d is out of range 0..%d (0 means no cap)",
			s.MaxActiveInstances, MaxActiveInstances)
	}
	switch {
	case s.WhenFull == "":
	case !slices.Contains(whenFullPolicies, s.WhenFull):
		add("when-full", "when-full %s is not one of %s", quote(s.WhenFull), strings.Join(whenFullPolicies, ", "))
	case s.MaxActiveInstances == 0:
		add("when-full", "when-full needs max-active-instances: without a cap a workflow is never full")
	}
	if s.Timeout < 0 {
		add("timeout", "workflow timeout %s is negative", s.Timeout)
	}
	if s.Priority < MinPriority || s.Priority > MaxPriority {
		add("priority", "workflow priority %d is out of range %d..%d", s.Priority, MinPriority, MaxPriority)
	}
	if s.Schedule != nil {
		probs = append(probs, s.Schedule.problems()...)
	}
	if s.Concurrency != nil {
		probs = append(probs, s.Concurrency.problems()...)
	}
	probs = append(probs, s.notifyProblems()...)
	return probs
}

func (sc *Schedule) problems() []problem {
	var probs []problem
	add := func(field, format string, args ...any) {
		probs = append(probs, problem{task: -1, field: "schedule." + field, msg: "schedule: " + fmt.Sprintf(format, args...)})
	}
	switch {
	case sc.Misfire == "":
		add("misfire", "misfire is required (%s)", strings.Join(misfirePolicies, ", "))
	case !slices.Contains(misfirePolicies, sc.Misfire):
		add("misfire", "misfire %s is not one of %s", quote(sc.Misfire), strings.Join(misfirePolicies, ", "))
	case sc.Misfire != MisfireRunAll && sc.MisfireLimit != 0:
		add("misfire-limit", "misfire-limit applies to misfire: run-all only")
	case sc.Misfire == MisfireRunAll && (sc.MisfireLimit < 1 || sc.MisfireLimit > MaxMisfireLimit):
		add("misfire-limit", "misfire-limit %d is out of range 1..%d", sc.MisfireLimit, MaxMisfireLimit)
	}
	// Each part is checked on its own, so that one file reports all of its mistakes.
	_, cronErr := ParseCron(sc.Cron)
	if cronErr != nil {
		add("cron", "%v", cronErr)
	}
	loc, tzErr := LoadLocation(sc.Timezone)
	if tzErr != nil {
		add("timezone", "%v", tzErr)
		return probs
	}
	var bad bool
	for _, f := range []struct{ name, value string }{{"start", sc.Start}, {"end", sc.End}} {
		if f.value == "" {
			continue
		}
		if _, err := ParseTime(f.value, loc); err != nil {
			add(f.name, "%s %v", f.name, err)
			bad = true
		}
	}
	if cronErr != nil || bad {
		return probs
	}
	tt, err := sc.Timetable()
	if err != nil {
		add("end", "%v", err)
		return probs
	}
	switch {
	case tt.spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero():
		add("cron", "cron %s never fires: no date matches it", quote(sc.Cron))
	case !tt.start.IsZero() && tt.Next(tt.start.Add(-time.Nanosecond)).IsZero():
		if tt.end.IsZero() {
			add("cron", "cron %s never fires after the start %s", quote(sc.Cron), sc.Start)
		} else {
			add("cron", "cron %s has no fire time between start %s and end %s", quote(sc.Cron), sc.Start, sc.End)
		}
	}
	return probs
}
