package workflow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseNotify: the issue's own notify: list and deadlines parse as written.
func TestParseNotify(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`name: w
deadline: 30m
notify:
  - {on: [failure, timeout, deadline], webhook-url-env: OPS_WEBHOOK}   # the variable is read by the masters
  - {on: [failure], email: [ops@example.com]}
  - {on: [success, task-failed], webhook-url-env: SLACK_HOOK, slack: true}
tasks:
  - {name: a, type: noop, deadline: 5m}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Notify{
		{On: []string{"failure", "timeout", "deadline"}, WebhookURLEnv: "OPS_WEBHOOK"},
		{On: []string{"failure"}, Email: []string{"ops@example.com"}},
		{On: []string{"success", "task-failed"}, WebhookURLEnv: "SLACK_HOOK", Slack: true},
	}
	if !reflect.DeepEqual(s.Notify, want) {
		t.Errorf("notify = %+v; want %+v", s.Notify, want)
	}
	if time.Duration(s.Deadline) != 30*time.Minute || time.Duration(s.Tasks[0].Deadline) != 5*time.Minute {
		t.Errorf("deadlines = %s, %s; want 30m, 5m", s.Deadline, s.Tasks[0].Deadline)
	}
}

// TestParseNotifyErrors: a bad notify: list or deadline is refused with its line and what
// to write instead.
func TestParseNotifyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, file, want string }{
		{"not a list", "notify: {on: [failure]}\n", "line 2: notify must be a list of entries"},
		{"entry not a mapping", "notify: [failure]\n", "notify entry #1 must be a mapping"},
		{"no events", "notify:\n  - {email: [a@example.com]}\n", "line 3: notify entry #1: events: is required, a list of events (failure, success, timeout, deadline, task-failed)"},
		{"unknown event", "notify: [{on: [failed], email: [a@example.com]}]\n", `notify entry #1: events: unknown event "failed"`},
		{"cluster event", "notify: [{events: [node-fenced], email: [a@example.com]}]\n", `events: unknown event "node-fenced"`},
		{"events and on", "notify: [{events: [failure], on: [success], email: [a@example.com]}]\n", "notify entry #1: give events or on (its old name), not both"},
		{"event twice", "notify: [{on: [failure, failure], email: [a@example.com]}]\n", `event "failure" is listed twice`},
		{"no channel", "notify: [{on: [failure]}]\n", "notify entry #1: has no channel: give webhook-url-env, email, or both"},
		{"bad variable", "notify: [{on: [failure], webhook-url-env: 'https://hooks.example.com/x'}]\n", `webhook-url-env "https://hooks.example.com/x" is not an environment variable name`},
		{"bad address", "notify: [{on: [failure], email: [ops]}]\n", `email "ops" is not an email address like ops@example.com`},
		{"named address", "notify: [{on: [failure], email: ['Ops <ops@example.com>']}]\n", "is not an email address"},
		{"slack without webhook", "notify: [{on: [failure], email: [a@example.com], slack: true}]\n", "slack: true needs webhook-url-env"},
		{"slack not a bool", "notify: [{on: [failure], webhook-url-env: X, slack: yes}]\n", `notify entry #1: slack must be true or false, not "yes"`},
		{"unknown field", "notify: [{on: [failure], webhook: X}]\n", `unknown field "webhook" in notify entry #1`},
		{"on not a list", "notify: [{on: failure, email: [a@example.com]}]\n", "notify entry #1: on must be a list of event names"},
		{"negative deadline", "deadline: -1m\n", "workflow deadline -1m0s is negative"},
		{"bad deadline", "deadline: soon\n", "workflow deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("name: w\n" + tt.file + "tasks: [{name: a, type: noop}]\n"))
			if err == nil {
				t.Fatal("Parse accepted the file")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tt.want)
			}
		})
	}
	_, err := Parse([]byte("name: w\ntasks: [{name: a, type: noop, deadline: -2s}]\n"))
	if err == nil || !strings.Contains(err.Error(), `task "a": deadline -2s is negative`) {
		t.Errorf("negative task deadline: %v", err)
	}
}

// TestCheckWebhookEnv: a webhook-url-env outside notify.webhook-env-pattern is refused with
// the entry and the pattern; one inside it, or an entry without a webhook, is not.
func TestCheckWebhookEnv(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`name: w
notify:
  - {on: [failure], webhook-url-env: ZKSCHED_WEBHOOK_OPS}
  - {on: [failure], webhook-url-env: PATH}
  - {on: [failure], email: [ops@example.com]}
  - {on: [failure], webhook-url-env: HTTPS_PROXY}
tasks:
  - {name: a, type: noop}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckWebhookEnv(DefaultWebhookEnvPattern)
	if err == nil {
		t.Fatal("CheckWebhookEnv passed PATH and HTTPS_PROXY")
	}
	for _, want := range []string{
		`notify entry #2: webhook-url-env "PATH" is not a webhook variable: the masters' notify.webhook-env-pattern allows names like ZKSCHED_WEBHOOK_*`,
		`notify entry #4: webhook-url-env "HTTPS_PROXY" is not a webhook variable`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "#1") || strings.Contains(err.Error(), "#3") {
		t.Errorf("error %q names an entry that is allowed", err)
	}
	if err := s.CheckWebhookEnv("*"); err != nil {
		t.Errorf("CheckWebhookEnv(*) = %v; want nil", err)
	}
	for _, bad := range []string{"", "ZKSCHED_["} {
		if WebhookEnvAllowed(bad, "ZKSCHED_WEBHOOK_OPS") {
			t.Errorf("WebhookEnvAllowed(%q) allowed a variable", bad)
		}
	}
}

// TestNotifyEventsAndItsOldName: events: is the name of a notify entry's events; on:, its old
// name (which YAML 1.1 tools read as true), still reads the same, and the stored JSON is alike.
func TestNotifyEventsAndItsOldName(t *testing.T) {
	t.Parallel()
	var specs []string
	for _, key := range []string{"events", "on"} {
		s, err := Parse([]byte("name: w\nnotify: [{" + key + ": [failure, deadline], email: [a@example.com]}]\ntasks: [{name: a, type: noop}]\n"))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if len(s.Notify) != 1 || strings.Join(s.Notify[0].On, ",") != "failure,deadline" {
			t.Errorf("%s: notify = %+v, want failure and deadline", key, s.Notify)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, string(b))
	}
	if specs[0] != specs[1] {
		t.Errorf("stored as\n%s\nand\n%s\nwant them alike", specs[0], specs[1])
	}
}
