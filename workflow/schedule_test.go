package workflow

import (
	"strings"
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t
}

// fires lists the fire times of cron in zone from after, count of them, as UTC "2006-01-02
// 15:04" strings.
func fires(t *testing.T, sc Schedule, after time.Time, count int) []string {
	t.Helper()
	tt, err := sc.Timetable()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for next := tt.Next(after); !next.IsZero() && len(out) < count; next = tt.Next(next) {
		out = append(out, next.UTC().Format("2006-01-02 15:04"))
	}
	return out
}

// TestTimetableDST walks fire times across daylight-saving changes. Each case starts shortly
// before a change and lists the fire times in UTC, so a skipped or doubled fire shows as a
// gap or a repeat of the expected rhythm.
func TestTimetableDST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cron  string
		zone  string
		after string // UTC
		want  []string
	}{
		// New York springs forward on 2026-03-08: 02:00 EST becomes 03:00 EDT.
		{"daily in the gap fires once, moved forward by the jump", "30 2 * * *", "America/New_York", "2026-03-06 12:00",
			[]string{"2026-03-07 07:30", "2026-03-08 07:30", "2026-03-09 06:30"}},
		{"daily at the start of the gap", "0 2 * * *", "America/New_York", "2026-03-07 12:00",
			[]string{"2026-03-08 07:00", "2026-03-09 06:00"}},
		{"hourly keeps its rhythm across the gap", "30 * * * *", "America/New_York", "2026-03-08 05:00",
			[]string{"2026-03-08 05:30", "2026-03-08 06:30", "2026-03-08 07:30", "2026-03-08 08:30"}},
		{"every 30 minutes across the gap", "*/30 * * * *", "America/New_York", "2026-03-08 05:50",
			[]string{"2026-03-08 06:00", "2026-03-08 06:30", "2026-03-08 07:00", "2026-03-08 07:30", "2026-03-08 08:00"}},
		{"a day before the gap is untouched", "30 1 * * *", "America/New_York", "2026-03-07 00:00",
			[]string{"2026-03-07 06:30", "2026-03-08 06:30", "2026-03-09 05:30"}},
		// New York falls back on 2026-11-01: 02:00 EDT becomes 01:00 EST; 01:00-02:00 repeats.
		{"daily in the repeated hour fires at the first occurrence only", "30 1 * * *", "America/New_York", "2026-10-31 00:00",
			[]string{"2026-10-31 05:30", "2026-11-01 05:30", "2026-11-02 06:30"}},
		{"fixed hour with several minutes fires once per wall time", "*/20 1 * * *", "America/New_York", "2026-11-01 04:30",
			[]string{"2026-11-01 05:00", "2026-11-01 05:20", "2026-11-01 05:40", "2026-11-02 06:00"}},
		{"hourly fires in both occurrences", "30 * * * *", "America/New_York", "2026-11-01 04:00",
			[]string{"2026-11-01 04:30", "2026-11-01 05:30", "2026-11-01 06:30", "2026-11-01 07:30"}},
		{"@hourly fires in both occurrences", "@hourly", "America/New_York", "2026-11-01 04:30",
			[]string{"2026-11-01 05:00", "2026-11-01 06:00", "2026-11-01 07:00"}},
		{"from inside the second occurrence, a fixed hour waits for the next day", "30 1 * * *", "America/New_York", "2026-11-01 06:10",
			[]string{"2026-11-02 06:30"}},
		{"from inside the second occurrence, hourly fires in it", "45 * * * *", "America/New_York", "2026-11-01 06:10",
			[]string{"2026-11-01 06:45", "2026-11-01 07:45"}},
		// London springs forward on 2026-03-29 at 01:00 GMT, falls back on 2026-10-25 at 02:00 BST.
		{"London gap", "30 1 * * *", "Europe/London", "2026-03-28 00:00",
			[]string{"2026-03-28 01:30", "2026-03-29 01:30", "2026-03-30 00:30"}},
		{"London repeat", "30 1 * * *", "Europe/London", "2026-10-24 00:00",
			[]string{"2026-10-24 00:30", "2026-10-25 00:30", "2026-10-26 01:30"}},
		// Lord Howe Island moves by 30 minutes: 02:00 +10:30 becomes 02:30 +11 on 2026-10-04.
		{"half-hour jump", "15 2 * * *", "Australia/Lord_Howe", "2026-10-02 00:00",
			[]string{"2026-10-02 15:45", "2026-10-03 15:45", "2026-10-04 15:15"}},
		{"UTC has no changes", "0 0 * * *", "UTC", "2026-03-08 00:00",
			[]string{"2026-03-09 00:00", "2026-03-10 00:00"}},
		{"weekday list", "0 9 * * mon-fri", "Europe/Berlin", "2026-11-20 12:00",
			[]string{"2026-11-23 08:00", "2026-11-24 08:00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := fires(t, Schedule{Cron: tt.cron, Timezone: tt.zone}, utc(tt.after), len(tt.want))
			if strings.Join(got, ", ") != strings.Join(tt.want, ", ") {
				t.Errorf("fires after %s:\n got  %v\n want %v", tt.after, got, tt.want)
			}
		})
	}
}

func TestTimetableStartEnd(t *testing.T) {
	t.Parallel()
	sc := Schedule{Cron: "0 * * * *", Timezone: "Europe/Paris", Start: "2026-11-01T10:00", End: "2026-11-01 12:00"}
	got := fires(t, sc, utc("2026-01-01 00:00"), 10)
	want := []string{"2026-11-01 09:00", "2026-11-01 10:00", "2026-11-01 11:00"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fires = %v, want %v (start and end are inclusive, in the schedule's zone)", got, want)
	}
	tt, err := sc.Timetable()
	if err != nil {
		t.Fatal(err)
	}
	between, more := tt.Between(utc("2026-11-01 09:00"), utc("2026-11-01 10:00"), 0)
	if len(between) != 2 || more {
		t.Errorf("Between inclusive = %v, %v; want 2 fires", between, more)
	}
	between, more = tt.Between(utc("2026-11-01 00:00"), utc("2026-11-02 00:00"), 2)
	if len(between) != 2 || !more {
		t.Errorf("Between with limit = %v, %v; want 2 fires and more", between, more)
	}
	p := tt.FireParams(utc("2026-11-01 23:30"))
	if p[ParamFireTime] != "2026-11-02T00:30:00+01:00" || p[ParamFireDate] != "2026-11-02" {
		t.Errorf("FireParams = %v; want the local time and date in Europe/Paris", p)
	}
}

// TestEndDateIncludesTheDay: an end written as a date alone (a schedule's end, a backfill's
// --to) includes the fires of that day; with a time, it ends at that time.
func TestEndDateIncludesTheDay(t *testing.T) {
	t.Parallel()
	sc := Schedule{Cron: "30 2 * * *", Timezone: "Europe/Berlin", Start: "2026-10-29", End: "2026-10-31"}
	got := fires(t, sc, utc("2026-01-01 00:00"), 10)
	want := []string{"2026-10-29 01:30", "2026-10-30 01:30", "2026-10-31 01:30"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fires = %v, want %v (the end's whole day included)", got, want)
	}
	berlin, _ := LoadLocation("Europe/Berlin")
	for in, want := range map[string]string{
		"2026-10-31":       "2026-10-31T23:59:59.999999999+01:00",
		"2026-10-25":       "2026-10-25T23:59:59.999999999+01:00", // a 25-hour day
		"2026-10-31T02:30": "2026-10-31T02:30:00+01:00",
	} {
		end, err := ParseEnd(in, berlin)
		if err != nil || end.Format(time.RFC3339Nano) != want {
			t.Errorf("ParseEnd(%q) = %v, %v; want %s", in, end.Format(time.RFC3339Nano), err, want)
		}
	}
}

func TestParseTime(t *testing.T) {
	t.Parallel()
	ny, _ := LoadLocation("America/New_York")
	tests := []struct {
		in, want string // want in UTC, or "error"
	}{
		{"2026-11-01T02:00:00Z", "2026-11-01 02:00"},
		{"2026-11-01T02:00:00+01:00", "2026-11-01 01:00"},
		{"2026-11-01", "2026-11-01 04:00"},
		{"2026-11-01T12:30", "2026-11-01 17:30"},
		{"2026-11-01 12:30:00", "2026-11-01 17:30"},
		{"2026-03-08T02:30", "2026-03-08 07:30"}, // in the gap: moved forward
		{"yesterday", "error"},
		{"2026-13-01", "error"},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in, ny)
		switch {
		case tt.want == "error" && err == nil:
			t.Errorf("ParseTime(%q) = %v, want an error", tt.in, got)
		case tt.want != "error" && (err != nil || got.UTC().Format("2006-01-02 15:04") != tt.want):
			t.Errorf("ParseTime(%q) = %v, %v; want %s UTC", tt.in, got.UTC(), err, tt.want)
		}
	}
}

// BenchmarkTimetableNext measures one step of a timetable in a zone with daylight-saving
// time, the work a master does per fire (and per missed fire when it catches up).
func BenchmarkTimetableNext(b *testing.B) {
	tt, err := (&Schedule{Cron: "*/5 * * * *", Timezone: "Europe/Berlin"}).Timetable()
	if err != nil {
		b.Fatal(err)
	}
	t := utc("2026-01-01 00:00")
	for b.Loop() {
		if t = tt.Next(t); t.IsZero() {
			b.Fatal("no next fire")
		}
	}
}
