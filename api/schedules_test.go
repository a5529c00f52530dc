package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSchedulesAPI: a file with a schedule submitted through the API stores the schedule;
// the list shows its next fire times, enable/disable switch it, trigger runs it, and the
// definitions page shows the next fires.
func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{open: true})
	file := "name: nightly\nparams: {k: {}}\nschedule: {cron: '30 2 * * *', timezone: Asia/Tokyo}\ntasks:\n  - {name: t, type: noop}\n"
	if r := b.do(t, "POST", "/api/v1/definitions", file, "Content-Type", "application/yaml"); r.status != http.StatusOK ||
		!strings.Contains(r.body, `"next_fire_at"`) {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	var list struct {
		Schedules []struct {
			Workflow string      `json:"workflow"`
			Enabled  bool        `json:"enabled"`
			Next     []time.Time `json:"next"`
		} `json:"schedules"`
	}
	b.do(t, "GET", "/api/v1/schedules?next=2", "").json(t, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].Workflow != "nightly" || len(list.Schedules[0].Next) != 2 {
		t.Fatalf("schedules = %+v", list)
	}
	if next := list.Schedules[0].Next[0]; next.Hour() != 2 || next.Minute() != 30 {
		t.Errorf("next fire %v, want 02:30 in Asia/Tokyo", next)
	}
	if r := b.do(t, "GET", "/api/v1/schedules?next=-1", ""); r.status != http.StatusBadRequest {
		t.Errorf("next=-1: %d", r.status)
	}
	if r := b.do(t, "POST", "/api/v1/schedules/nightly/disable", ""); r.status != http.StatusOK || !strings.Contains(r.body, `"enabled": false`) {
		t.Errorf("disable: %d %s", r.status, r.body)
	}
	if r := b.do(t, "POST", "/api/v1/schedules/nightly/enable", ""); r.status != http.StatusOK || !strings.Contains(r.body, `"enabled": true`) {
		t.Errorf("enable: %d %s", r.status, r.body)
	}
	r := b.do(t, "POST", "/api/v1/schedules/nightly/trigger", `{"params": {"k": "v"}}`, "Content-Type", "application/json")
	if r.status != http.StatusCreated || !strings.Contains(r.body, `"id": 1`) {
		t.Errorf("trigger: %d %s", r.status, r.body)
	}
	if r := b.do(t, "POST", "/api/v1/schedules/other/trigger", ""); r.status != http.StatusNotFound || !strings.Contains(r.errorMessage(t), "has no schedule") {
		t.Errorf("trigger without schedule: %d %s", r.status, r.body)
	}
	page := b.do(t, "GET", "/definitions", "")
	if page.status != http.StatusOK || !strings.Contains(page.body, "30 2 * * *") || !strings.Contains(page.body, " JST</time>") {
		t.Errorf("definitions page lacks the schedule and its next fires: %d\n%s", page.status, page.body)
	}
}
