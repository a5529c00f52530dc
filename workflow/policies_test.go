package workflow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

const policyTasks = "tasks:\n  - {name: t, type: noop}\n"

func TestParsePolicies(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`name: nightly
priority: 20
timeout: 2h
max-active-instances: 2
schedule:
  cron: "30 2 * * *"
  timezone: Europe/Berlin
  start: 2026-11-01
  end: "2027-01-01T00:00:00Z"
  misfire: run-all
` + policyTasks))
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Name: "nightly", Priority: 20, Timeout: Duration(2 * time.Hour), MaxActiveInstances: 2, WhenFull: WhenFullQueue,
		Schedule: &Schedule{Cron: "30 2 * * *", Timezone: "Europe/Berlin", Start: "2026-11-01", End: "2027-01-01T00:00:00Z",
			Enabled: true, Misfire: MisfireRunAll, MisfireLimit: DefaultMisfireLimit},
		Tasks: []Task{{Name: "t", Type: "noop", Group: DefaultGroup}}}
	if !reflect.DeepEqual(*s, want) {
		t.Fatalf("Parse =\n %+v %+v\nwant\n %+v %+v", *s, *s.Schedule, want, *want.Schedule)
	}
	raw, _ := json.Marshal(s)
	var back Spec
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("JSON round trip = %+v, %v (%s)", back, err, raw)
	}
	if !strings.Contains(string(raw), `"max-active-instances":2`) || !strings.Contains(string(raw), `"misfire":"run-all"`) {
		t.Errorf("stored form does not use the file's names: %s", raw)
	}

	d, err := Parse([]byte("name: d\nschedule: {cron: '@daily'}\n" + policyTasks))
	if err != nil {
		t.Fatal(err)
	}
	if got := *d.Schedule; got != (Schedule{Cron: "@daily", Timezone: "UTC", Enabled: true, Misfire: MisfireRunOnce}) {
		t.Errorf("defaults = %+v", got)
	}
}

// TestParsePolicyErrors: bad schedules and policies are refused with the line and a message
// that says what to write instead.
func TestParsePolicyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		want       []string
	}{
		{"invalid cron", "schedule: {cron: '61 * * * *'}\n", []string{"line 2: schedule: cron \"61 * * * *\" is invalid", "minute hour day-of-month month day-of-week"}},
		{"too few fields", "schedule:\n  cron: '* *'\n", []string{"line 3: schedule: cron \"* *\" is invalid: expected exactly 5 fields"}},
		{"@every", "schedule: {cron: '@every 1h'}\n", []string{"@every is not supported"}},
		{"TZ prefix", "schedule: {cron: 'TZ=UTC 0 * * * *'}\n", []string{"timezone field"}},
		{"no cron", "schedule: {timezone: UTC}\n", []string{"schedule: cron is required"}},
		{"never fires", "schedule: {cron: '0 0 30 2 *'}\n", []string{"never fires: no date matches it"}},
		{"unknown zone", "schedule:\n  cron: '@daily'\n  timezone: Europe/Pariss\n", []string{
			`line 4: schedule: timezone "Europe/Pariss" is not a known IANA time zone (such as "UTC"`}},
		{"Local zone", "schedule: {cron: '@daily', timezone: Local}\n", []string{`timezone "Local" is not an IANA time zone name`}},
		{"end before start", "schedule:\n  cron: '@daily'\n  start: 2026-12-01\n  end: 2026-11-01\n", []string{
			"schedule: end 2026-11-01 is before start 2026-12-01"}},
		{"no fire in range", "schedule: {cron: '0 0 1 1 *', start: 2026-02-01, end: 2026-03-01}\n", []string{
			"has no fire time between start 2026-02-01 and end 2026-03-01"}},
		{"bad start", "schedule: {cron: '@daily', start: tomorrow}\n", []string{`schedule: start "tomorrow" is not a time`}},
		{"bad misfire", "schedule: {cron: '@daily', misfire: later}\n", []string{`misfire "later" is not one of skip, run-once, run-all`}},
		{"limit without run-all", "schedule: {cron: '@daily', misfire-limit: 3}\n", []string{"misfire-limit applies to misfire: run-all only"}},
		{"limit out of range", "schedule: {cron: '@daily', misfire: run-all, misfire-limit: 5000}\n", []string{"misfire-limit 5000 is out of range 1..1000"}},
		{"enabled not a bool", "schedule: {cron: '@daily', enabled: maybe}\n", []string{"schedule: enabled must be true or false"}},
		{"unknown schedule field", "schedule: {cron: '@daily', timezon: UTC}\n", []string{`unknown field "timezon" in the schedule (did you mean "timezone"?)`}},
		{"schedule not a mapping", "schedule: '@daily'\n", []string{"schedule must be a mapping"}},
		{"when-full alone", "when-full: skip\n", []string{"when-full needs max-active-instances"}},
		{"bad when-full", "max-active-instances: 1\nwhen-full: wait\n", []string{`when-full "wait" is not one of queue, skip`}},
		{"negative cap", "max-active-instances: -1\n", []string{"max-active-instances -1 is out of range"}},
		{"negative timeout", "timeout: -1s\n", []string{"workflow timeout -1s is negative"}},
		{"priority range", "priority: 5000\n", []string{"workflow priority 5000 is out of range -1000..1000"}},
		{"several at once", "schedule: {cron: 'x', timezone: Nowhere/Land}\n", []string{"cron \"x\" is invalid", "\"Nowhere/Land\" is not a known"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("name: w\n" + tt.file + policyTasks))
			if err == nil {
				t.Fatal("Parse accepted the file")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\ndoes not contain %q", err, want)
				}
			}
		})
	}
}
