package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
	"github.com/zksched/zksched/workflow"
)

// Webhook triggers: POST /api/v1/hooks/{name} submits a run of the workflow that declares
// the hook (its latest stored version declaring it). The route asks for no user: the
// delivery's signature, made with the hook's secret (a master's environment variable named
// by the file), is the credential, checked in constant time. What follows the check:
//
//   - the body is read up to Config.HookBodyLimit (413 past it);
//   - the delivery id (the hook's dedupe header) is required when the hook has one;
//   - the filter renders; false answers 202 and starts nothing;
//   - the params render and are checked against the workflow's declarations (400);
//   - lifecycle.Deliver records the delivery and submits the run in one transaction, unique
//     on (hook, delivery id): a delivery seen within Config.HookDedupeWindow answers 200 and
//     starts nothing, even when two masters receive it at once.
//
// Every delivery, accepted or refused, is an audit_event row whose actor is "hook/<name>";
// refusals fold as every refusal does. Wrong signatures are limited per client address as
// wrong tokens are (failLimiter): past the burst they are answered 429.

// hookRoute is the route of deliveries; hookPrefix its path's start, which requireAuth lets
// through without a user.
const (
	hookRoute  = "POST /api/v1/hooks/{name}"
	hookPrefix = "/api/v1/hooks/"
)

// AuditHookDeliver is the action of a delivery's audit row.
const AuditHookDeliver = "hook.deliver"

// Defaults of the hooks' settings (conf.API has the reasons).
const (
	defaultHookBodyLimit    = 1 << 20
	defaultHookDedupeWindow = 24 * time.Hour
)

// maxDeliveryID bounds a delivery id: GitHub's are UUIDs.
const maxDeliveryID = 200

// hookDeliveryJSON is the answer to a delivery.
type hookDeliveryJSON struct {
	Hook     string `json:"hook"`
	Workflow string `json:"workflow_name"`
	// Outcome is submitted, filtered or duplicate.
	Outcome string `json:"outcome"`
	// WorkflowInstanceID is the run started, or for a duplicate the run its first delivery
	// started.
	WorkflowInstanceID *int64 `json:"workflow_instance_id,omitempty"`
	DeliveryID         string `json:"delivery_id,omitempty"`
}

// hookDelivery is what the handler has learnt of a delivery, for its audit row.
type hookDelivery struct {
	hook       string
	workflow   string
	version    int
	deliveryID string
	// outcome is what an answered delivery came to: submitted, filtered or duplicate.
	outcome string
}

// refusalOutcome is the metric's outcome of a delivery refused with status.
func refusalOutcome(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "bad_signature"
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status >= 500:
		return "failed"
	}
	return "refused"
}

func (d *hookDelivery) auditEvent(r *http.Request) dao.AuditEvent {
	if d.hook == "" {
		return dao.AuditEvent{Actor: "hook", Role: "hook", Action: AuditHookDeliver, Target: "hook/",
			Params: dao.AuditParams(map[string]any{"hook": clipName(r.PathValue("name"))}), Client: clientAddr(r), Outcome: dao.AuditOK}
	}
	params := map[string]any{"hook": d.hook}
	if d.workflow != "" {
		params["workflow"], params["version"] = d.workflow, d.version
	}
	if d.deliveryID != "" {
		params["delivery_id"] = d.deliveryID
	}
	return dao.AuditEvent{Actor: "hook/" + d.hook, Role: "hook", Action: AuditHookDeliver, Target: "hook/" + d.hook,
		Params: dao.AuditParams(params), Client: clientAddr(r), Outcome: dao.AuditOK}
}

// apiHookDeliver serves a delivery, recording a refusal of it in the audit trail (and, once
// its signature is verified, among the hook's deliveries).
func (s *Server) apiHookDeliver(w http.ResponseWriter, r *http.Request) error {
	d := &hookDelivery{hook: r.PathValue("name")}
	verified, err := s.deliver(w, r, d)
	if err == nil {
		s.cfg.HookDelivered(d.outcome)
		return nil
	}
	status, msg := classify(err)
	s.cfg.HookDelivered(refusalOutcome(status))
	if status >= 500 {
		return err
	}
	if d.workflow == "" {
		// No such hook: one actor and one reason for every name, so that a flood over many
		// names folds into a row a minute; the name asked for is in the params.
		d.hook, msg = "", "no such hook"
	}
	if len(msg) > maxRefusalReason {
		msg = msg[:maxRefusalReason] + "…"
	}
	ev := d.auditEvent(r)
	ev.Outcome = dao.AuditRefused(strings.ToLower(http.StatusText(status)) + ": " + msg)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if werr := s.db.AuditRefusal(ctx, ev); werr != nil {
		s.refusalsUnrecorded.Add(1)
		logFor(r).Error().Err(werr).Str("hook", d.hook).Int("status", status).Msg("refused delivery not recorded in the audit trail")
	}
	if verified {
		if werr := s.db.HookDeliveryRefuse(ctx, d.hook, ev.Outcome, clientAddr(r)); werr != nil {
			logFor(r).Error().Err(werr).Str("hook", d.hook).Msg("refused delivery not recorded among the hook's")
		}
	}
	return err
}

// deliver does the work of apiHookDeliver; verified reports that the signature was right.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, d *hookDelivery) (verified bool, err error) {
	if !workflow.ValidHookName(d.hook) {
		return false, errorf(http.StatusNotFound, "no hook %q", clipName(d.hook))
	}
	h, err := s.db.HookGet(r.Context(), d.hook)
	if errors.Is(err, dao.ErrNoHook) {
		return false, errorf(http.StatusNotFound, "no hook %q: no stored workflow declares it", d.hook)
	}
	if err != nil {
		return false, err
	}
	d.workflow, d.version = h.WorkflowName, h.WorkflowVersion
	spec, err := s.specs.Get(r.Context(), s.db.Queries, h.WorkflowName, h.WorkflowVersion)
	if err != nil {
		return false, err
	}
	hook, ok := spec.Webhook(d.hook)
	if !ok {
		return false, errorf(http.StatusNotFound, "no hook %q in workflow %s version %d", d.hook, h.WorkflowName, h.WorkflowVersion)
	}
	if r.ContentLength > s.cfg.HookBodyLimit {
		return false, &http.MaxBytesError{Limit: s.cfg.HookBodyLimit}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false, err
	}
	secret, err := s.hookSecret(hook)
	if err != nil {
		// The sender learns no variable name: the log has it.
		logFor(r).Error().Err(err).Str("hook", d.hook).Msg("hook cannot be checked")
		return false, errorf(http.StatusServiceUnavailable, "hook %s cannot check deliveries on this master now: its log says why", d.hook)
	}
	if !verifySignature(hook.Signature, secret, r.Header, body, time.Now()) {
		key := clientKey(r)
		if wait := s.hookFails.retryAfter(key); wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(wait)))
			return false, errorf(http.StatusTooManyRequests, "too many wrong signatures from your address: try again after Retry-After")
		}
		s.hookFails.fail(key)
		if hook.Signature == workflow.SignatureHMAC {
			return false, errorf(http.StatusUnauthorized, "the delivery's signature is wrong or missing, or its %s is not within %v of "+
				"this master's clock (hook %s checks a %s signature)", workflow.HeaderTimestamp, workflow.HookTimestampTolerance, d.hook, hook.Signature)
		}
		return false, errorf(http.StatusUnauthorized, "the delivery's signature is wrong or missing (hook %s checks a %s signature)", d.hook, hook.Signature)
	}
	var id *string
	if header := hook.DeliveryHeader(); header != "" {
		v := r.Header.Get(header)
		switch {
		case v == "":
			return true, badRequest("the delivery has no %s header: hook %s deduplicates on it", header, d.hook)
		case len(v) > maxDeliveryID || !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			return true, badRequest("the %s header is not a delivery id: at most %d bytes of text", header, maxDeliveryID)
		}
		id, d.deliveryID = &v, v
	}
	delivery := workflow.Delivery{Body: deliveryBody(body), Headers: deliveryHeaders(r.Header)}
	accepts, err := hook.Accepts(r.Context(), delivery)
	if err != nil {
		return true, badRequest("hook %s: %v", d.hook, err)
	}
	var params map[string]string
	if accepts {
		if params, err = hook.RunParams(r.Context(), delivery); err != nil {
			return true, paramsRefused(err)
		}
	}
	ev := d.auditEvent(r)
	auditParams := map[string]any{"hook": d.hook, "workflow": d.workflow, "version": d.version, "delivery_id": d.deliveryID}
	if accepts {
		auditParams["params"] = params
	} else {
		auditParams["outcome"] = dao.HookFiltered
	}
	ev.Params = dao.AuditParams(auditParams)
	res, err := lifecycle.Deliver(r.Context(), s.db, lifecycle.Delivery{Hook: d.hook, Spec: spec, Version: h.WorkflowVersion, ID: id,
		Window: s.cfg.HookDedupeWindow, Params: params, Filtered: !accepts, Client: clientAddr(r), Audit: ev})
	var keyErr *lifecycle.KeyError
	var paramsErr *lifecycle.ParamsError
	switch {
	case errors.As(err, &keyErr):
		return true, badRequest("not submitted: %v", err)
	case errors.As(err, &paramsErr):
		return true, paramsRefused(err)
	case err != nil:
		return true, err
	}
	out := hookDeliveryJSON{Hook: d.hook, Workflow: d.workflow, DeliveryID: d.deliveryID}
	l := logFor(r).Info().Str("hook", d.hook).Str("workflow", d.workflow).Str("delivery", d.deliveryID).Str("remote", r.RemoteAddr)
	switch {
	case res.Duplicate:
		out.Outcome, out.WorkflowInstanceID = "duplicate", res.Previous.WorkflowInstanceID
		d.outcome = out.Outcome
		l.Msg("hook delivery already seen: nothing started")
		// A duplicate is recorded as refusals are, folded: a replayed delivery costs a row a
		// minute, not a row a replay.
		ev.Outcome = dao.AuditRefused("duplicate delivery: started nothing")
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if werr := s.db.AuditRefusal(ctx, ev); werr != nil {
			s.refusalsUnrecorded.Add(1)
			logFor(r).Error().Err(werr).Str("hook", d.hook).Msg("duplicate delivery not recorded in the audit trail")
		}
		writeJSON(w, http.StatusOK, out)
	case !accepts:
		out.Outcome, d.outcome = dao.HookFiltered, dao.HookFiltered
		l.Msg("hook delivery filtered out: nothing started")
		writeJSON(w, http.StatusAccepted, out)
	default:
		out.Outcome, out.WorkflowInstanceID, d.outcome = dao.HookSubmitted, &res.Instance, dao.HookSubmitted
		l.Int64("workflow_instance", res.Instance).Msg("hook delivery started a run")
		writeJSON(w, http.StatusCreated, out)
	}
	return true, nil
}

// hookSecret returns the secret of hook: the master's variable its secret-env names, which
// must match Config.HookSecretEnvPattern (checked when the file was stored, and again here,
// as the pattern may have changed since).
func (s *Server) hookSecret(hook workflow.Webhook) ([]byte, error) {
	if !workflow.WebhookEnvAllowed(s.cfg.HookSecretEnvPattern, hook.SecretEnv) {
		return nil, fmt.Errorf("hook %s: its secret-env %s does not match api.hook-secret-env-pattern (%s) of this master",
			hook.Name, hook.SecretEnv, s.cfg.HookSecretEnvPattern)
	}
	v, ok := s.cfg.LookupEnv(hook.SecretEnv)
	if !ok || v == "" {
		return nil, fmt.Errorf("hook %s: its secret variable %s is not set on this master", hook.Name, hook.SecretEnv)
	}
	return []byte(v), nil
}

// verifySignature reports whether header carries the signature kind of body under secret,
// and for hmac-sha256 a timestamp within workflow.HookTimestampTolerance of now. Each
// comparison takes a time that depends on the lengths alone, never on where the values
// differ.
func verifySignature(kind string, secret []byte, header http.Header, body []byte, now time.Time) bool {
	switch kind {
	case workflow.SignatureGitHub, workflow.SignatureHMAC:
		name := workflow.HeaderGitHubSignature
		if kind == workflow.SignatureHMAC {
			name = workflow.HeaderSignature
		}
		got := header.Get(name)
		hexSig, prefixed := strings.CutPrefix(got, "sha256=")
		if kind == workflow.SignatureGitHub && !prefixed {
			return false
		}
		sig, err := hex.DecodeString(strings.TrimSpace(hexSig))
		if err != nil {
			return false
		}
		mac := hmac.New(sha256.New, secret)
		if kind == workflow.SignatureHMAC {
			stamp := header.Get(workflow.HeaderTimestamp)
			secs, err := strconv.ParseInt(stamp, 10, 64)
			if err != nil {
				return false
			}
			if d := now.Sub(time.Unix(secs, 0)); d > workflow.HookTimestampTolerance || d < -workflow.HookTimestampTolerance {
				return false
			}
			mac.Write([]byte(stamp + "."))
		}
		mac.Write(body)
		return hmac.Equal(sig, mac.Sum(nil))
	case workflow.SignatureBearer:
		scheme, token, _ := strings.Cut(header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return false
		}
		// Compared as hashes, so the time does not depend on the secret's length either.
		got, want := sha256.Sum256([]byte(strings.TrimSpace(token))), sha256.Sum256(secret)
		return subtle.ConstantTimeCompare(got[:], want[:]) == 1
	}
	return false
}

// deliveryBody is .body of a delivery: its JSON (numbers as written), or its text when it is
// not JSON.
func deliveryBody(body []byte) any {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil && !dec.More() {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			return v
		}
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

// deliveryHeaders are .headers of a delivery: by lower-case name, values joined with ", ".
// Authorization is left out, as with a bearer hook it is the secret, and so is Cookie: a
// delivery posted by a browser would carry its user's session, which a hook's params could
// otherwise copy into a run for anyone to read.
func deliveryHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		k = strings.ToLower(k)
		if k == "authorization" || k == "cookie" {
			continue
		}
		out[k] = strings.Join(vs, ", ")
	}
	return out
}

// hookJSON is a hook with its URL and latest deliveries, for `zksched hooks list` and the UI.
type hookJSON struct {
	dao.Hook
	// URL is where deliveries go: under api.public-url when it is set, else the path alone.
	URL string `json:"url"`
	// Deliveries are the latest deliveries whose signature was verified, newest first.
	Deliveries []dao.HookDelivery `json:"deliveries"`
}

// hookDeliveriesShown is how many deliveries of each hook the list shows.
const hookDeliveriesShown = 10

// loadHooks returns every hook with its latest deliveries.
func (s *Server) loadHooks(ctx context.Context) ([]hookJSON, error) {
	hooks, err := s.db.HookList(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = h.Name
	}
	deliveries, err := s.db.HookDeliveries(ctx, names, hookDeliveriesShown)
	if err != nil {
		return nil, err
	}
	out := make([]hookJSON, len(hooks))
	for i, h := range hooks {
		out[i] = hookJSON{Hook: h, URL: strings.TrimSuffix(s.cfg.PublicURL, "/") + hookPrefix + h.Name, Deliveries: deliveries[h.Name]}
		if out[i].Deliveries == nil {
			out[i].Deliveries = []dao.HookDelivery{}
		}
	}
	return out, nil
}

// apiHooks lists the hooks.
func (s *Server) apiHooks(w http.ResponseWriter, r *http.Request) error {
	if _, err := newQuery(r.URL.Query()); err != nil {
		return err
	}
	hooks, err := s.loadHooks(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": hooks})
	return nil
}

type hooksPage struct {
	base
	Hooks []hookJSON
	Error string
}

// pageHooks shows each hook with its URL and latest deliveries.
func (s *Server) pageHooks(w http.ResponseWriter, r *http.Request) error {
	if _, err := newQuery(r.URL.Query()); err != nil {
		return err
	}
	p := &hooksPage{base: base{Title: "Hooks", Nav: "hooks"}}
	status := http.StatusOK
	hooks, err := s.loadHooks(r.Context())
	if err != nil {
		status, p.Error = classify(err)
		if status >= 500 {
			logFor(r).Error().Err(err).Msg("hook list")
		}
	}
	p.Hooks = hooks
	s.render(w, r, status, "hooks", p)
	return nil
}
