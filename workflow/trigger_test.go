package workflow

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const hookFile = `name: deploy
params:
  ref: {required: true}
  sha: ""
triggers:
  - webhook:
      name: deploy-main
      secret-env: ZKSCHED_HOOK_SECRET_DEPLOY
      signature: github
      params:
        ref: "{{ .body.ref }}"
        sha: "{{ .body.after }}"
      filter: '{{ and (eq (index .headers "x-github-event") "push") (eq .body.ref "refs/heads/main") }}'
` + policyTasks

func TestParseTriggers(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(hookFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []Trigger{{Webhook: &Webhook{Name: "deploy-main", SecretEnv: "ZKSCHED_HOOK_SECRET_DEPLOY", Signature: SignatureGitHub,
		Params: map[string]string{"ref": "{{ .body.ref }}", "sha": "{{ .body.after }}"},
		Filter: `{{ and (eq (index .headers "x-github-event") "push") (eq .body.ref "refs/heads/main") }}`}}}
	if !reflect.DeepEqual(s.Triggers, want) {
		t.Fatalf("Triggers = %+v, want %+v", s.Triggers, want)
	}
	raw, _ := json.Marshal(s)
	var back Spec
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, *s) {
		t.Errorf("JSON round trip = %+v, %v (%s)", back, err, raw)
	}
	if !strings.Contains(string(raw), `"triggers":[{"webhook":{"name":"deploy-main","secret-env":"ZKSCHED_HOOK_SECRET_DEPLOY","signature":"github"`) {
		t.Errorf("stored form does not use the file's names: %s", raw)
	}
	w, ok := s.Webhook("deploy-main")
	if !ok || w.DeliveryHeader() != HeaderGitHubDelivery {
		t.Errorf("Webhook(deploy-main) = %+v, %v; want the hook, deduplicated on %s", w, ok, HeaderGitHubDelivery)
	}
	if _, ok := s.Webhook("other"); ok {
		t.Error("Webhook(other) found a hook the file does not declare")
	}
}

// TestParseTriggerErrors: a bad trigger is refused when the file is stored, with its line and
// what to write instead.
func TestParseTriggerErrors(t *testing.T) {
	t.Parallel()
	hook := func(fields string) string {
		return "triggers:\n  - webhook: {name: h, secret-env: ZKSCHED_HOOK_SECRET_H, signature: bearer" + fields + "}\n"
	}
	tests := []struct {
		name, file string
		want       []string
	}{
		{"fine", hook(""), nil},
		{"bad signature kind", "triggers:\n  - webhook: {name: h, secret-env: S, signature: md5}\n",
			[]string{`line 3: trigger #1 (webhook): signature "md5" is unknown: use github, hmac-sha256, bearer`}},
		{"no signature", "triggers:\n  - webhook: {name: h, secret-env: S}\n", []string{"signature is required: one of github, hmac-sha256, bearer"}},
		{"missing secret-env", "triggers:\n  - webhook: {name: h, signature: github}\n",
			[]string{"trigger #1 (webhook): secret-env is required: the masters' environment variable holding the hook's secret"}},
		{"secret-env not a name", "triggers:\n  - webhook: {name: h, secret-env: 'A-B', signature: github}\n",
			[]string{`secret-env "A-B" is not an environment variable name`}},
		{"no name", "triggers:\n  - webhook: {secret-env: S, signature: github}\n", []string{"name is required: the hook's URL is /api/v1/hooks/<name>"}},
		{"name with a slash", "triggers:\n  - webhook: {name: a/b, secret-env: S, signature: github}\n", []string{`name "a/b" is invalid`}},
		{"name twice", "triggers:\n  - webhook: {name: h, secret-env: S, signature: github}\n  - webhook: {name: h, secret-env: S, signature: github}\n",
			[]string{`line 4: trigger #2 (webhook): hook "h" is already declared by trigger #1`}},
		{"bad template", hook(", filter: '{{ .body.ref '"), []string{"trigger #1 (webhook): filter is not a valid template"}},
		{"filter reads params", hook(", filter: '{{ .params.x }}'"),
			[]string{"filter: .params.x is unknown: a hook's templates see the delivery alone, .body (its JSON, or its text) and .headers"}},
		{"param template reads upstream", "params: {ref: x}\n" + hook(", params: {ref: '{{ .upstream.a.output }}'}"), []string{"params.ref: .upstream.a.output is unknown"}},
		{"param undeclared", hook(", params: {nope: '{{ .body }}'}"), []string{`params: "nope" is not a param of workflow w: it declares none`}},
		{"required param not given", "params:\n  ref: {required: true}\n" + hook(""),
			[]string{"params: ref is required and has no default: give the hook a template for it"}},
		{"bad dedupe header", hook(", dedupe-header: 'X Id'"), []string{`dedupe-header "X Id" is not a header name`}},
		{"unknown field", hook(", secret: x"), []string{`unknown field "secret" in trigger #1: webhook`}},
		{"unknown kind", "triggers:\n  - cron: {}\n", []string{`unknown field "cron" in trigger #1`}},
		{"no kind", "triggers:\n  - {}\n", []string{"trigger #1: it names no trigger"}},
		{"not a list", "triggers: {webhook: {}}\n", []string{"triggers must be a list of entries"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("name: w\n" + tt.file + policyTasks))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Parse refused the file: %v", err)
				}
				return
			}
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

func TestWebhookRender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Parse([]byte(hookFile))
	if err != nil {
		t.Fatal(err)
	}
	w := s.Webhooks()[0]
	var body any
	if err := json.Unmarshal([]byte(`{"ref": "refs/heads/main", "after": "abc123"}`), &body); err != nil {
		t.Fatal(err)
	}
	push := Delivery{Body: body, Headers: map[string]string{"x-github-event": "push"}}
	if ok, err := w.Accepts(ctx, push); !ok || err != nil {
		t.Errorf("Accepts(push to main) = %v, %v; want true", ok, err)
	}
	params, err := w.RunParams(ctx, push)
	if want := map[string]string{"ref": "refs/heads/main", "sha": "abc123"}; err != nil || !reflect.DeepEqual(params, want) {
		t.Errorf("RunParams = %v, %v; want %v", params, err, want)
	}
	ping := Delivery{Body: body, Headers: map[string]string{"x-github-event": "ping"}}
	if ok, err := w.Accepts(ctx, ping); ok || err != nil {
		t.Errorf("Accepts(ping) = %v, %v; want false", ok, err)
	}
	w.Filter = "{{ .body.ref }}"
	if _, err := w.Accepts(ctx, push); err == nil || !strings.Contains(err.Error(), `filter rendered "refs/heads/main"; it must render true or false`) {
		t.Errorf("Accepts with a filter that renders text: %v", err)
	}
	if _, err := w.RunParams(ctx, Delivery{Body: "not json"}); err == nil || !strings.Contains(err.Error(), "params.ref") {
		t.Errorf("RunParams over a text body: %v; want an error naming params.ref", err)
	}
}

func TestCheckHookSecretEnv(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(hookFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckHookSecretEnv(DefaultHookSecretEnvPattern); err != nil {
		t.Errorf("CheckHookSecretEnv(default) = %v", err)
	}
	s.Triggers[0].Webhook.SecretEnv = "PGPASSWORD"
	err = s.CheckHookSecretEnv(DefaultHookSecretEnvPattern)
	if err == nil || !strings.Contains(err.Error(), `secret-env "PGPASSWORD" is not a hook secret variable`) {
		t.Errorf("CheckHookSecretEnv(PGPASSWORD) = %v", err)
	}
}
