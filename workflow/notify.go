package workflow

import (
	"errors"
	"fmt"
	"net/mail"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Notify is one entry of a workflow's notify: list: the events it hears and where they go, a
// webhook (the URL in an environment variable of the masters, never in the file), email
// addresses, or both.
type Notify struct {
	// On lists the events heard: NotifyEvents. The file names them events: (on: is the old
	// name, still read: YAML 1.1 tools read the key on: as true); the stored JSON keeps "on".
	On []string `json:"on" yaml:"events"`
	// WebhookURLEnv names the environment variable holding the webhook's URL, read by the
	// master that sends.
	WebhookURLEnv string `json:"webhook-url-env,omitempty" yaml:"webhook-url-env,omitempty"`
	// Slack asks for a Slack-compatible body ({"text": ...}) on the webhook.
	Slack bool `json:"slack,omitempty" yaml:"slack,omitempty"`
	// Email lists the addresses mailed.
	Email []string `json:"email,omitempty" yaml:"email,omitempty"`
}

// NotifyEvents are the events a workflow's notify: entries may hear. The cluster's events
// (node-fenced, failover) belong to the masters' notify.default alone.
var NotifyEvents = []string{"failure", "success", "timeout", "deadline", "task-failed"}

// notifyFields are the keys of a notify: entry.
var notifyFields = []string{"events", "on", "webhook-url-env", "slack", "email"}

// MaxNotify is the most entries a notify: list may have.
const MaxNotify = 20

func (d *decoder) decodeNotify(v *yaml.Node) []Notify {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "notify must be a list of entries, like [{events: [failure], webhook-url-env: ZKSCHED_WEBHOOK_OPS}], not %s", kindName(v))
		return nil
	}
	if len(v.Content) > MaxNotify {
		d.errorf(v.Line, "notify has %d entries; the limit is %d", len(v.Content), MaxNotify)
		return nil
	}
	list := make([]Notify, 0, len(v.Content))
	for i, e := range v.Content {
		if !d.visit(1) {
			return nil
		}
		e = d.resolve(e)
		where := fmt.Sprintf("notify entry #%d", i+1)
		if e.Kind != yaml.MappingNode {
			d.errorf(e.Line, "%s must be a mapping like {events: [failure], email: [ops@example.com]}, not %s", where, kindName(e))
			continue
		}
		d.pos.fields[fmt.Sprintf("notify.%d", i)] = e.Line
		var n Notify
		events := false
		for _, kv := range d.mapping(e, where) {
			key := kv.key.Value
			what := where + ": " + key
			switch key {
			case "events", "on":
				if events {
					d.errorf(kv.key.Line, "%s: give events or on (its old name), not both", where)
				}
				events = true
				n.On = d.scalarList(kv.value, what, "event names")
			case "webhook-url-env":
				n.WebhookURLEnv, _ = d.scalar(kv.value, what, "a string")
			case "slack":
				if s, ok := d.scalar(kv.value, what, "true or false"); ok {
					switch s {
					case "true":
						n.Slack = true
					case "false":
					default:
						d.errorf(kv.value.Line, "%s must be true or false, not %s", what, quote(s))
					}
				}
			case "email":
				n.Email = d.scalarList(kv.value, what, "email addresses")
			default:
				d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), where, didYouMean(key, notifyFields))
			}
		}
		list = append(list, n)
	}
	return list
}

// scalarList decodes a list of strings (want says what they are).
func (d *decoder) scalarList(v *yaml.Node, what, want string) []string {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "%s must be a list of %s, like [a, b], not %s", what, want, kindName(v))
		return nil
	}
	var list []string
	for _, item := range v.Content {
		if !d.visit(1) {
			return nil
		}
		if s, ok := d.scalar(item, what+" entries", want); ok {
			list = append(list, s)
		}
	}
	return list
}

// NotifyProblems checks one notify entry against the events it may hear (NotifyEvents for a
// workflow's) and returns what is wrong with it, each a sentence without its subject: at
// least one event, each known and once; a webhook or an email address or both; the
// webhook's variable a valid environment variable name; each address a bare address.
func NotifyProblems(n Notify, events []string) []string {
	var probs []string
	if len(n.On) == 0 {
		probs = append(probs, fmt.Sprintf("events: is required, a list of events (%s)", strings.Join(events, ", ")))
	}
	for i, ev := range n.On {
		switch {
		case !slices.Contains(events, ev):
			probs = append(probs, fmt.Sprintf("events: unknown event %s (known events: %s)", quote(ev), strings.Join(events, ", ")))
		case slices.Index(n.On, ev) < i:
			probs = append(probs, fmt.Sprintf("events: event %s is listed twice", quote(ev)))
		}
	}
	if n.WebhookURLEnv == "" && len(n.Email) == 0 {
		probs = append(probs, "has no channel: give webhook-url-env, email, or both")
	}
	if n.WebhookURLEnv != "" && !envRE.MatchString(n.WebhookURLEnv) {
		probs = append(probs, fmt.Sprintf("webhook-url-env %s is not an environment variable name: %s", quote(n.WebhookURLEnv), envRule))
	}
	if n.Slack && n.WebhookURLEnv == "" {
		probs = append(probs, "slack: true needs webhook-url-env: it is the webhook's body")
	}
	for _, addr := range n.Email {
		if a, err := mail.ParseAddress(addr); err != nil || a.Address != addr {
			probs = append(probs, fmt.Sprintf("email %s is not an email address like ops@example.com", quote(addr)))
		}
	}
	return probs
}

// notifyProblems checks the workflow's notify: list and its deadline.
func (s *Spec) notifyProblems() []problem {
	var probs []problem
	for i, n := range s.Notify {
		for _, msg := range NotifyProblems(n, NotifyEvents) {
			probs = append(probs, problem{task: -1, field: fmt.Sprintf("notify.%d", i),
				msg: fmt.Sprintf("notify entry #%d: %s", i+1, msg)})
		}
	}
	if s.Deadline < 0 {
		probs = append(probs, problem{task: -1, field: "deadline", msg: fmt.Sprintf("workflow deadline %s is negative", s.Deadline)})
	}
	return probs
}

// DefaultWebhookEnvPattern is the default of notify.webhook-env-pattern. Variables of this
// form hold nothing but webhook URLs, and being ZKSCHED_* they never reach a task.
const DefaultWebhookEnvPattern = "ZKSCHED_WEBHOOK_*"

// WebhookEnvAllowed reports whether a notify entry may name the variable name as its
// webhook-url-env under pattern (notify.webhook-env-pattern, a path.Match glob). The masters
// read that variable and post to what it holds, so a name outside the pattern (PATH, a proxy
// setting, a secret) would let the file's author send a master's variable where it points.
// A malformed pattern allows nothing.
func WebhookEnvAllowed(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return ok && err == nil
}

// CheckWebhookEnv reports the notify entries whose webhook-url-env does not match pattern
// (notify.webhook-env-pattern); call it where a file is stored, with the config's pattern.
func (s *Spec) CheckWebhookEnv(pattern string) error {
	var errs []error
	for i, n := range s.Notify {
		if n.WebhookURLEnv != "" && !WebhookEnvAllowed(pattern, n.WebhookURLEnv) {
			errs = append(errs, &Error{Msg: fmt.Sprintf(
				"notify entry #%d: webhook-url-env %s is not a webhook variable: the masters' notify.webhook-env-pattern "+
					"allows names like %s, so that a workflow cannot name their other variables", i+1, quote(n.WebhookURLEnv), pattern)})
		}
	}
	return errors.Join(errs...)
}
