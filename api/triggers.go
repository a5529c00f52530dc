package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// The Triggers page (/triggers) and GET /api/v1/triggers answer "what is waiting on what":
// the webhook triggers with their latest delivery, the workflows that on-assets starts with
// the assets they have and those they still miss, and the sensor tasks waiting now. Each
// section is one statement with a limit (package dao's trigger_overview.go); cron schedules
// have their own page (/schedules), which this one links to.

// triggersShown is how many rows each section of the page shows at most.
const triggersShown = 100

// sensorTargetShown bounds the target a sensor row shows, in characters.
const sensorTargetShown = 120

// sensorWaitJSON is a sensor task waiting now.
type sensorWaitJSON struct {
	TaskInstance     int64  `json:"task_instance"`
	WorkflowInstance int64  `json:"workflow_instance"`
	WorkflowName     string `json:"workflow_name"`
	Task             string `json:"task"`
	// Kind is its condition's kind (http, sql, file, time, …), from its task's spec.
	Kind string `json:"kind"`
	// Target is its condition, as the file gives it, in short.
	Target string `json:"target"`
	// Mode is reschedule or poke.
	Mode string `json:"mode"`
	// PausedStep is what it waits at (sensor: its next check); null for a time sensor,
	// which waits for its time on no worker.
	PausedStep *string `json:"paused_step"`
	// NextAt is when the masters next act on it: its next check, or its time or timeout.
	NextAt *time.Time `json:"next_at"`
	// WaitingSince is when it began to wait.
	WaitingSince *time.Time `json:"waiting_since"`
	// Timeout bounds all its checks, from its first ("" for none).
	Timeout string `json:"timeout"`
	// OnTimeout is what it comes to at its timeout: fail, skip or succeed.
	OnTimeout string `json:"on_timeout"`
}

// triggersJSON is the answer of GET /api/v1/triggers, and what the page shows.
type triggersJSON struct {
	Hooks          []dao.HookTrigger        `json:"hooks"`
	AssetConsumers []dao.AssetConsumerWaits `json:"asset_consumers"`
	Sensors        []sensorWaitJSON         `json:"sensors"`
}

// loadTriggers reads the three sections.
func (s *Server) loadTriggers(ctx context.Context) (*triggersJSON, error) {
	out := &triggersJSON{Hooks: []dao.HookTrigger{}, AssetConsumers: []dao.AssetConsumerWaits{}, Sensors: []sensorWaitJSON{}}
	hooks, err := s.db.TriggerHooks(ctx, triggersShown)
	if err != nil {
		return nil, err
	}
	consumers, err := s.db.AssetConsumerWaits(ctx, "", triggersShown)
	if err != nil {
		return nil, err
	}
	sensors, err := s.db.WaitingSensors(ctx, triggersShown)
	if err != nil {
		return nil, err
	}
	out.Hooks = append(out.Hooks, hooks...)
	out.AssetConsumers = append(out.AssetConsumers, consumers...)
	for _, w := range sensors {
		out.Sensors = append(out.Sensors, sensorWait(w))
	}
	return out, nil
}

// sensorWait describes the waiting sensor w from its task's spec. The kind is the spec's own
// (Task.SensorKind), and the target that kind's mapping as the file wrote it: a kind this
// page knows nothing of shows as well as the others.
func sensorWait(w dao.WaitingSensor) sensorWaitJSON {
	out := sensorWaitJSON{TaskInstance: w.TaskInstance, WorkflowInstance: w.WorkflowInstance, WorkflowName: w.WorkflowName,
		Task: w.Name, PausedStep: w.PausedStep, NextAt: w.WaitUntil, WaitingSince: w.Waiting,
		Mode: workflow.SensorReschedule, OnTimeout: workflow.OnTimeoutFail}
	var spec workflow.Task
	if json.Unmarshal(w.Task, &spec) != nil {
		return out
	}
	out.Kind = spec.SensorKind()
	if spec.Mode != "" {
		out.Mode = spec.Mode
	}
	if spec.OnTimeout != "" {
		out.OnTimeout = spec.OnTimeout
	}
	if spec.Timeout > 0 {
		out.Timeout = time.Duration(spec.Timeout).String()
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(w.Task, &fields) == nil && out.Kind != "" {
		var buf bytes.Buffer
		if json.Compact(&buf, fields[out.Kind]) == nil {
			out.Target = clipRunes(buf.String(), sensorTargetShown)
		}
	}
	return out
}

// clipRunes returns s cut to at most n characters, ending with "…" when cut.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// apiTriggers answers GET /api/v1/triggers: what the Triggers page shows.
func (s *Server) apiTriggers(w http.ResponseWriter, r *http.Request) error {
	if _, err := newQuery(r.URL.Query()); err != nil {
		return err
	}
	t, err := s.loadTriggers(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

type triggersPage struct {
	base
	*triggersJSON
	Error string
}

// pageTriggers shows what is waiting on what.
func (s *Server) pageTriggers(w http.ResponseWriter, r *http.Request) error {
	if _, err := newQuery(r.URL.Query()); err != nil {
		return err
	}
	p := &triggersPage{base: base{Title: "Triggers", Nav: "triggers"}, triggersJSON: &triggersJSON{}}
	status := http.StatusOK
	t, err := s.loadTriggers(r.Context())
	if err != nil {
		status, p.Error = classify(err)
		if status >= 500 {
			logFor(r).Error().Err(err).Msg("triggers")
		}
	} else {
		p.triggersJSON = t
	}
	s.render(w, r, status, "triggers", p)
	return nil
}
