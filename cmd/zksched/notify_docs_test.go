package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/notify"
	"github.com/zksched/zksched/workflow"
)

// TestDocsNotifications: docs/notifications.md shows a workflow file that
// parses, a masters' config that loads and lets that file's webhooks be stored, and a
// webhook body that is notify.Message's.
func TestDocsNotifications(t *testing.T) {
	t.Parallel()
	blocks := func(lang string) []string {
		return testenv.DocBlocks(t, "docs/notifications.md", "Notifications", lang)
	}
	yamls, jsons := blocks("yaml"), blocks("json")
	if len(yamls) != 2 || len(jsons) != 1 {
		t.Fatalf("Notifications section has %d yaml and %d json blocks; want 2 and 1", len(yamls), len(jsons))
	}
	spec, err := workflow.Parse([]byte(yamls[0]))
	if err != nil {
		t.Fatalf("the docs' workflow: %v", err)
	}
	if len(spec.Notify) != 3 || spec.Deadline == 0 || spec.Tasks[0].Deadline == 0 {
		t.Errorf("the docs' workflow parsed as %+v", spec)
	}
	path := filepath.Join(t.TempDir(), "master.yaml")
	if err := os.WriteFile(path, []byte(yamls[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(path, nil)
	if err != nil {
		t.Fatalf("the docs' config: %v", err)
	}
	if len(cfg.Notify.Default) != 1 || cfg.Notify.Email.Host == "" || cfg.API.PublicURL == "" ||
		cfg.Notify.WebhookEnvPattern != workflow.DefaultWebhookEnvPattern || cfg.Notify.AllowPrivateTargets {
		t.Errorf("the docs' config loaded as %+v", cfg.Notify)
	}
	if err := spec.CheckWebhookEnv(cfg.Notify.WebhookEnvPattern); err != nil {
		t.Errorf("the docs' workflow is refused by their config: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(jsons[0])))
	dec.DisallowUnknownFields()
	var m notify.Message
	if err := dec.Decode(&m); err != nil || m.Event == "" || m.URL == "" {
		t.Fatalf("the docs' webhook body is not a notify.Message: %+v, %v", m, err)
	}
}
