package soak

import (
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

func TestJudgeAssets(t *testing.T) {
	t.Parallel()
	task := func(id int64) *int64 { return &id }
	all := assetConsumerRow{Name: "all", All: true, Assets: []string{"a", "b"}}
	anyOf := assetConsumerRow{Name: "any", Assets: []string{"a", "b"}}
	// good is a settled history: tasks 1 and 2 succeeded, 3 failed; events 10 (task 1, a),
	// 11 (task 2, b), 12 (emitted, a); all ran once on 10 and 11 and keeps 12 queued; any ran
	// three times.
	good := func() assetHistory {
		return assetHistory{
			producers: []assetProducer{{ID: 1, Succeeded: true, Assets: []string{"a"}},
				{ID: 2, Succeeded: true, Assets: []string{"b"}}, {ID: 3, Assets: []string{"a"}}},
			events: []assetEventRow{{ID: 10, Asset: "a", Task: task(1)}, {ID: 11, Asset: "b", Task: task(2)},
				{ID: 12, Asset: "a", Output: "emit-1"}},
			emits:     []emitSent{{Asset: "a", Tag: "emit-1", Sent: 1, Acked: true}, {Asset: "b", Tag: "emit-2", Sent: 2}},
			consumers: []assetConsumerRow{all, anyOf},
			runs:      map[string][]int64{"all": {100}, "any": {200, 201, 202}},
			consumed: []assetLink{{Consumer: "all", Event: 10, Run: 100}, {Consumer: "all", Event: 11, Run: 100},
				{Consumer: "any", Event: 10, Run: 200}, {Consumer: "any", Event: 11, Run: 201}, {Consumer: "any", Event: 12, Run: 202}},
			pending: []assetLink{{Consumer: "all", Event: 12}},
		}
	}
	tests := []struct {
		name   string
		change func(h *assetHistory)
		want   string
	}{
		{name: "settled"},
		{name: "an event of a failed task", want: "task 3 (succeeded false) wrote 1 event(s) of a; want 0", change: func(h *assetHistory) {
			h.events = append(h.events, assetEventRow{ID: 13, Asset: "a", Task: task(3)})
			h.pending = append(h.pending, assetLink{Consumer: "all", Event: 13}, assetLink{Consumer: "any", Event: 13})
		}},
		{name: "two events of one success", want: "task 1 (succeeded true) wrote 2 event(s) of a", change: func(h *assetHistory) {
			h.events = append(h.events, assetEventRow{ID: 13, Asset: "a", Task: task(1)})
		}},
		{name: "no event of a success", want: "task 2 (succeeded true) wrote 0 event(s) of b", change: func(h *assetHistory) {
			h.events = h.events[:1]
		}},
		{name: "an acknowledged emit lost", want: "emitted event emit-1 of a was acknowledged but not written", change: func(h *assetHistory) {
			h.events[2].Output = "emit-3"
		}},
		{name: "an emit written twice", want: "emitted event emit-2 of b was written 3 times", change: func(h *assetHistory) {
			for id := int64(13); id < 16; id++ {
				h.events = append(h.events, assetEventRow{ID: id, Asset: "b", Output: "emit-2"})
			}
		}},
		{name: "an event taken twice", want: "event 10 of a started 2 runs [100 101] of all", change: func(h *assetHistory) {
			h.runs["all"] = append(h.runs["all"], 101)
			h.consumed = append(h.consumed, assetLink{Consumer: "all", Event: 10, Run: 101})
		}},
		{name: "an event lost", want: "event 12 of a was neither taken by a run of all nor queued for it", change: func(h *assetHistory) {
			h.pending = nil
		}},
		{name: "a run on two events of one asset", want: "run 100 of all started on events [10 12] of [a a]", change: func(h *assetHistory) {
			h.consumed[1].Event = 12
			h.pending[0].Event = 11
		}},
		{name: "a run due and not started", want: "all has queued events map[a:1 b:1] and no run for them", change: func(h *assetHistory) {
			h.events = append(h.events, assetEventRow{ID: 13, Asset: "b", Output: "emit-2"})
			h.pending = append(h.pending, assetLink{Consumer: "all", Event: 13})
			h.runs["any"] = append(h.runs["any"], 203)
			h.consumed = append(h.consumed, assetLink{Consumer: "any", Event: 13, Run: 203})
		}},
		{name: "a run with no events", want: "run 203 of any started on events [] of []", change: func(h *assetHistory) {
			h.runs["any"] = append(h.runs["any"], 203)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := good()
			if tt.change != nil {
				tt.change(&h)
			}
			problems, _ := judgeAssets(h)
			got := strings.Join(problems, "\n")
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("problems:\n%s\nwant one with %q", got, tt.want)
			}
		})
	}
}

func TestJudgeSensor(t *testing.T) {
	t.Parallel()
	at := func(s float64) *time.Time { tm := sec(s); return &tm }
	tests := []struct {
		name string
		s    sensorEnd
		want string
	}{
		{name: "true in time", s: sensorEnd{State: dao.TaskSucceeded, Output: "ok", Ended: at(5), TrueAt: sec(4), Timeout: 8 * time.Second}},
		{name: "true late, checked late", s: sensorEnd{State: dao.TaskSucceeded, Output: "ok", Ended: at(12), TrueAt: sec(9), Timeout: 8 * time.Second}},
		{name: "succeeded before true", want: "before its condition was true",
			s: sensorEnd{State: dao.TaskSucceeded, Output: "ok", Ended: at(3), TrueAt: sec(4), Timeout: 8 * time.Second}},
		{name: "succeeded, never true", want: "before its condition was true (never)",
			s: sensorEnd{State: dao.TaskSucceeded, Output: "ok", Ended: at(3), Timeout: 8 * time.Second}},
		{name: "skipped, never true", s: sensorEnd{State: dao.TaskSkipped, OnTimeout: workflow.OnTimeoutSkip, Ended: at(9), Timeout: 8 * time.Second}},
		{name: "failed, true after the timeout", s: sensorEnd{State: dao.TaskFailed, Ended: at(9), TrueAt: sec(8.5), Timeout: 8 * time.Second}},
		{name: "timed out with no output", s: sensorEnd{State: dao.TaskSucceeded, OnTimeout: workflow.OnTimeoutSucceed, Ended: at(3.2), Timeout: 3 * time.Second}},
		{name: "timed out though true", want: "though its condition was true",
			s: sensorEnd{State: dao.TaskFailed, OnTimeout: workflow.OnTimeoutFail, Ended: at(9), TrueAt: sec(7), Timeout: 8 * time.Second}},
		{name: "timed out early", want: "before its timeout of 8s",
			s: sensorEnd{State: dao.TaskSkipped, OnTimeout: workflow.OnTimeoutSkip, Ended: at(6), Timeout: 8 * time.Second}},
		{name: "an end its on-timeout does not give", want: "ended skipped",
			s: sensorEnd{State: dao.TaskSkipped, OnTimeout: workflow.OnTimeoutFail, Ended: at(9), Timeout: 8 * time.Second}},
		{name: "not ended", want: "has not ended", s: sensorEnd{State: dao.TaskWaiting, Timeout: 8 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.s.Created = t0
			got := judgeSensor(tt.s)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("judgeSensor = %q; want %q", got, tt.want)
			}
		})
	}
}
