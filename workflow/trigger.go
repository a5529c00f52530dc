package workflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Trigger is one entry of a workflow's triggers: list: an event from outside that submits a
// run of the stored workflow. Webhook is the only kind so far.
type Trigger struct {
	// Webhook makes POST /api/v1/hooks/<name> submit a run, for a delivery whose signature
	// its secret verifies.
	Webhook *Webhook `json:"webhook,omitempty" yaml:"webhook,omitempty"`
}

// Webhook is a webhook trigger. Its name is the hook's, unique across the cluster: storing a
// workflow that claims a hook another workflow holds is refused.
type Webhook struct {
	// Name is the hook's name, the last part of its URL.
	Name string `json:"name" yaml:"name"`
	// SecretEnv names the masters' environment variable holding the hook's secret; it must
	// match api.hook-secret-env-pattern (CheckHookSecretEnv).
	SecretEnv string `json:"secret-env" yaml:"secret-env"`
	// Signature is how a delivery proves it knows the secret: one of Signatures.
	Signature string `json:"signature" yaml:"signature"`
	// Params are the run's params, each a template over the delivery (.body, .headers).
	Params map[string]string `json:"params,omitempty" yaml:"params,omitempty"`
	// DedupeHeader names the header holding the delivery's id: a delivery whose id the hook
	// has seen within the masters' api.hook-dedupe-window starts nothing. Empty means
	// X-GitHub-Delivery for the github signature, and no deduplication for the others.
	DedupeHeader string `json:"dedupe-header,omitempty" yaml:"dedupe-header,omitempty"`
	// Filter is a template over the delivery that renders true or false; false accepts the
	// delivery and starts nothing. Empty means true.
	Filter string `json:"filter,omitempty" yaml:"filter,omitempty"`
}

// The signatures of a webhook trigger.
const (
	// SignatureGitHub is GitHub's: X-Hub-Signature-256 is "sha256=" and the hex HMAC-SHA256
	// of the body under the secret.
	SignatureGitHub = "github"
	// SignatureHMAC is HeaderSignature holding the hex HMAC-SHA256, under the secret, of
	// HeaderTimestamp's value, a ".", and the body (a "sha256=" before it is allowed); the
	// timestamp must be within HookTimestampTolerance of the master's clock, so a delivery
	// captured and sent again later is refused.
	SignatureHMAC = "hmac-sha256"
	// SignatureBearer is "Authorization: Bearer <secret>".
	SignatureBearer = "bearer"
)

// Signatures returns the signatures a webhook trigger may use.
func Signatures() []string { return []string{SignatureGitHub, SignatureHMAC, SignatureBearer} }

// The headers of the signatures.
const (
	// HeaderGitHubSignature is the header of the github signature.
	HeaderGitHubSignature = "X-Hub-Signature-256"
	// HeaderGitHubDelivery is the delivery id GitHub sends, the github hooks' dedupe header.
	HeaderGitHubDelivery = "X-GitHub-Delivery"
	// HeaderSignature is the header of the hmac-sha256 signature.
	HeaderSignature = "X-Zksched-Signature-256"
	// HeaderTimestamp is the hmac-sha256 delivery's time, in seconds since 1970 (UTC),
	// which its signature covers.
	HeaderTimestamp = "X-Zksched-Timestamp"
	// HeaderDelivery is the hmac-sha256 hooks' dedupe header unless they name another.
	HeaderDelivery = "X-Zksched-Delivery"
)

// HookTimestampTolerance is how far an hmac-sha256 delivery's timestamp may be from the
// master's clock, either way.
const HookTimestampTolerance = 5 * time.Minute

// MaxTriggers is the most entries a triggers: list may have.
const MaxTriggers = 20

// DefaultHookSecretEnvPattern is the default of api.hook-secret-env-pattern: variables of
// this form hold nothing but hooks' secrets, and being ZKSCHED_* they never reach a task.
const DefaultHookSecretEnvPattern = "ZKSCHED_HOOK_SECRET_*"

// ValidHookName reports whether s may be a hook's name: the rule of workflow names, which
// needs no escaping as the last segment of a URL.
func ValidHookName(s string) bool { return nameRE.MatchString(s) }

// triggerFields and webhookFields are the keys of a triggers: entry and of its webhook.
var (
	triggerFields = []string{"webhook"}
	webhookFields = []string{"name", "secret-env", "signature", "params", "dedupe-header", "filter"}
)

func (d *decoder) decodeTriggers(v *yaml.Node) []Trigger {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.errorf(v.Line, "triggers must be a list of entries, like [{webhook: {name: deploy, secret-env: ZKSCHED_HOOK_SECRET_DEPLOY, signature: github}}], not %s", kindName(v))
		return nil
	}
	if len(v.Content) > MaxTriggers {
		d.errorf(v.Line, "triggers has %d entries; the limit is %d", len(v.Content), MaxTriggers)
		return nil
	}
	list := make([]Trigger, 0, len(v.Content))
	for i, e := range v.Content {
		if !d.visit(1) {
			return nil
		}
		e = d.resolve(e)
		where := fmt.Sprintf("trigger #%d", i+1)
		if e.Kind != yaml.MappingNode {
			d.errorf(e.Line, "%s must be a mapping like {webhook: {...}}, not %s", where, kindName(e))
			continue
		}
		d.pos.fields[fmt.Sprintf("triggers.%d", i)] = e.Line
		var t Trigger
		for _, kv := range d.mapping(e, where) {
			switch key := kv.key.Value; key {
			case "webhook":
				t.Webhook = d.decodeWebhook(i, kv.value, where+": webhook")
			default:
				d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), where, didYouMean(key, triggerFields))
			}
		}
		list = append(list, t)
	}
	return list
}

func (d *decoder) decodeWebhook(i int, v *yaml.Node, where string) *Webhook {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "%s must be a mapping with a name, secret-env and signature, not %s", where, kindName(v))
		return nil
	}
	w := &Webhook{}
	for _, kv := range d.mapping(v, where) {
		key := kv.key.Value
		d.pos.fields[fmt.Sprintf("triggers.%d.%s", i, key)] = kv.key.Line
		what := where + ": " + key
		switch key {
		case "name":
			w.Name, _ = d.scalar(kv.value, what, "a string")
		case "secret-env":
			w.SecretEnv, _ = d.scalar(kv.value, what, "a string")
		case "signature":
			w.Signature, _ = d.scalar(kv.value, what, "a string")
		case "params":
			w.Params = d.stringMap(kv.value, what)
		case "dedupe-header":
			w.DedupeHeader, _ = d.scalar(kv.value, what, "a string")
		case "filter":
			w.Filter, _ = d.scalar(kv.value, what, "a string")
		default:
			d.errorf(kv.key.Line, "unknown field %s in %s%s", quote(key), where, didYouMean(key, webhookFields))
		}
	}
	return w
}

// triggerProblems checks the triggers: list: each entry a webhook with a valid name (once in
// the file), a secret variable, a known signature, a valid dedupe header, and params and a
// filter that are templates over the delivery; the params it renders must be the workflow's
// own, and together with the defaults give every required one.
func (s *Spec) triggerProblems() []problem {
	var probs []problem
	seen := map[string]int{}
	for i, t := range s.Triggers {
		label := fmt.Sprintf("trigger #%d", i+1)
		add := func(field, format string, args ...any) {
			f := fmt.Sprintf("triggers.%d", i)
			if field != "" {
				f += "." + field
			}
			probs = append(probs, problem{task: -1, field: f, msg: label + ": " + fmt.Sprintf(format, args...)})
		}
		w := t.Webhook
		if w == nil {
			add("", "it names no trigger: give webhook: {name, secret-env, signature}")
			continue
		}
		label += " (webhook)"
		switch {
		case w.Name == "":
			add("name", "name is required: the hook's URL is /api/v1/hooks/<name>")
		case !nameRE.MatchString(w.Name):
			add("name", "name %s is invalid: %s", quote(w.Name), nameRule)
		default:
			if first, dup := seen[w.Name]; dup {
				add("name", "hook %s is already declared by trigger #%d", quote(w.Name), first+1)
			}
			seen[w.Name] = i
		}
		switch {
		case w.SecretEnv == "":
			add("secret-env", "secret-env is required: the masters' environment variable holding the hook's secret, like ZKSCHED_HOOK_SECRET_DEPLOY")
		case !envRE.MatchString(w.SecretEnv):
			add("secret-env", "secret-env %s is not an environment variable name: %s", quote(w.SecretEnv), envRule)
		}
		switch {
		case w.Signature == "":
			add("signature", "signature is required: one of %s", strings.Join(Signatures(), ", "))
		case !slices.Contains(Signatures(), w.Signature):
			add("signature", "signature %s is unknown: use %s", quote(w.Signature), strings.Join(Signatures(), ", "))
		}
		if w.DedupeHeader != "" && !headerNameRE.MatchString(w.DedupeHeader) {
			add("dedupe-header", "dedupe-header %s is not a header name: letters, digits and !#$%%&'*+-.^_`|~", quote(w.DedupeHeader))
		}
		if w.Filter != "" {
			if msg := hookTemplateProblem("filter", w.Filter); msg != "" {
				add("filter", "%s", msg)
			}
		}
		if len(w.Params) > MaxParams {
			add("params", "params: %d of them; a run has at most %d", len(w.Params), MaxParams)
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(w.Params)) {
			switch _, declared := s.Params[k]; {
			case !envRE.MatchString(k) || len(k) > maxNameLen:
				add("params", "params: name %s is invalid: %s", quote(k), paramRule)
			case !declared && !s.extraAllowed(k):
				add("params", "%s", s.undeclared(k))
			default:
				if msg := hookTemplateProblem("params."+k, w.Params[k]); msg != "" {
					add("params", "%s", msg)
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			if _, given := w.Params[k]; !given && s.Params[k].Required {
				add("params", "params: %s is required and has no default: give the hook a template for it", k)
			}
		}
	}
	return probs
}

// hookTemplateProblem says what makes text unfit to be a hook's template, named what, "" if
// nothing: it must parse, stay within the bounds of any template, and read nothing but
// .body and .headers.
func hookTemplateProblem(what, text string) string {
	tmpl, err := parseTemplate(what, text)
	if err != nil {
		return err.Error()
	}
	if err := staticProblem(tmpl); err != nil {
		return fmt.Sprintf("%s: %v", what, err)
	}
	for _, ref := range templateRefs(tmpl) {
		if ref[0] != "body" && ref[0] != "headers" {
			return fmt.Sprintf("%s: %s is unknown: a hook's templates see the delivery alone, .body (its JSON, or its text) "+
				"and .headers (by lower-case name, as in index .headers \"x-github-event\")", what, clip("."+strings.Join(ref, ".")))
		}
	}
	return ""
}

// Webhooks returns the workflow's webhook triggers, in file order.
func (s *Spec) Webhooks() []Webhook {
	var hooks []Webhook
	for _, t := range s.Triggers {
		if t.Webhook != nil {
			hooks = append(hooks, *t.Webhook)
		}
	}
	return hooks
}

// Webhook returns the workflow's webhook trigger called name.
func (s *Spec) Webhook(name string) (Webhook, bool) {
	for _, w := range s.Webhooks() {
		if w.Name == name {
			return w, true
		}
	}
	return Webhook{}, false
}

// DeliveryHeader is the header holding a delivery's id, "" when the hook does not
// deduplicate.
func (w Webhook) DeliveryHeader() string {
	switch {
	case w.DedupeHeader != "":
	case w.Signature == SignatureGitHub:
		return HeaderGitHubDelivery
	case w.Signature == SignatureHMAC:
		return HeaderDelivery
	}
	return w.DedupeHeader
}

// Delivery is what a hook's templates see of a delivery: .body, the body parsed as JSON (or,
// when it is not JSON, its text), and .headers, each header by its lower-case name, its
// values joined with ", ".
type Delivery struct {
	Body    any
	Headers map[string]string
}

// Accepts reports whether the hook's filter lets the delivery start a run: true without a
// filter; the filter must render true or false.
func (w Webhook) Accepts(ctx context.Context, d Delivery) (bool, error) {
	if w.Filter == "" {
		return true, nil
	}
	out, err := Render(ctx, "filter", w.Filter, TemplateData{Delivery: &d})
	if err != nil {
		return false, err
	}
	switch v := strings.TrimSpace(out); v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, fmt.Errorf("filter rendered %s; it must render true or false", quote(clip(v)))
	}
}

// RunParams renders the hook's params over the delivery: the params of the run it submits,
// checked as any run's are (CheckParams); the workflow's declarations are checked where the
// run is submitted.
func (w Webhook) RunParams(ctx context.Context, d Delivery) (map[string]string, error) {
	out := make(map[string]string, len(w.Params))
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(w.Params)) {
		v, err := Render(ctx, "params."+k, w.Params[k], TemplateData{Delivery: &d})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[k] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := CheckParams(out); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckHookSecretEnv reports the webhook triggers whose secret-env does not match pattern
// (api.hook-secret-env-pattern, a path.Match glob); call it where a file is stored, with the
// config's pattern. The masters read that variable to check signatures, so a name outside
// the pattern (a database password, a token) would let a file's author make a master check
// deliveries against a secret of its own, and so learn it.
func (s *Spec) CheckHookSecretEnv(pattern string) error {
	var errs []error
	for i, t := range s.Triggers {
		if w := t.Webhook; w != nil && w.SecretEnv != "" && !WebhookEnvAllowed(pattern, w.SecretEnv) {
			errs = append(errs, &Error{Msg: fmt.Sprintf(
				"trigger #%d (webhook %s): secret-env %s is not a hook secret variable: the masters' api.hook-secret-env-pattern "+
					"allows names like %s, so that a workflow cannot name their other variables", i+1, quote(w.Name), quote(w.SecretEnv), pattern)})
		}
	}
	return errors.Join(errs...)
}
