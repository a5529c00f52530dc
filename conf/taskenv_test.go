package conf_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/zksched/zksched/conf"
)

func TestValidateTaskEnvAndUser(t *testing.T) {
	t.Parallel()
	withKey := func(c *conf.Config) {
		c.LLM.Providers["main"] = conf.Provider{Type: conf.ProviderOpenAI, Model: "m", APIKeyEnv: "OPENAI_API_KEY"}
	}
	for _, tc := range []struct {
		name     string
		taskEnv  []string
		taskUser string
		want     string // "" for valid
	}{
		{"names and a pattern", []string{"AWS_REGION", "HTTP_PROXY", "MY_APP_*"}, "", ""},
		{"a user name", nil, "zksched-task", ""},
		{"a numeric uid", nil, "1001", ""},
		{"not a name", []string{"A-B"}, "", `worker.task-env[0]: "A-B": want a variable name or a prefix followed by *`},
		{"star alone", []string{"*"}, "", `worker.task-env[0]: "*": want a variable name or a prefix`},
		{"star inside", []string{"A*B"}, "", `worker.task-env[0]: "A*B"`},
		{"twice", []string{"A", "A"}, "", `worker.task-env[1]: "A" is listed twice`},
		{"the DSN", []string{"ZKSCHED_DB_DSN"}, "", `worker.task-env[0]: "ZKSCHED_DB_DSN" would pass ZKSCHED_* variables to tasks`},
		{"the API token", []string{"ZKSCHED_API_TOKEN"}, "", `"ZKSCHED_API_TOKEN" would pass ZKSCHED_* variables`},
		{"every ZKSCHED variable", []string{"ZKSCHED_*"}, "", `"ZKSCHED_*" would pass ZKSCHED_* variables`},
		{"a pattern reaching ZKSCHED", []string{"ZK*"}, "", `"ZK*" would pass ZKSCHED_* variables`},
		{"a task's own variables", []string{"ZKSCHED_PARAM_*"}, "", `"ZKSCHED_PARAM_*" would pass ZKSCHED_* variables`},
		{"a provider key", []string{"OPENAI_API_KEY"}, "", `worker.task-env[0]: "OPENAI_API_KEY" would pass OPENAI_API_KEY, a model provider's API key`},
		{"a pattern reaching a provider key", []string{"OPENAI_*"}, "", `"OPENAI_*" would pass OPENAI_API_KEY`},
		{"a neighbour of a provider key", []string{"OPENAI_BASE_URL"}, "", ""},
		{"bad user", nil, "bad user", `worker.task-user: "bad user": want a user name or a numeric uid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			withKey(&c)
			c.Worker.TaskEnv, c.Worker.TaskUser = tc.taskEnv, tc.taskUser
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestTaskEnvFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := conf.Load("", []string{"ZKSCHED_WORKER_TASK_ENV=AWS_REGION, LC_*", "ZKSCHED_WORKER_TASK_USER=nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"AWS_REGION", "LC_*"}; !reflect.DeepEqual(cfg.Worker.TaskEnv, want) || cfg.Worker.TaskUser != "nobody" {
		t.Errorf("task-env = %q, task-user = %q; want %q, nobody", cfg.Worker.TaskEnv, cfg.Worker.TaskUser, want)
	}
	_, err = conf.Load("", []string{"ZKSCHED_WORKER_TASK_ENV=ZKSCHED_DB_DSN"})
	if err == nil || !strings.Contains(err.Error(), "worker.task-env[0]") {
		t.Errorf("Load with ZKSCHED_DB_DSN in task-env = %v, want a worker.task-env error", err)
	}
}

func TestSecretValues(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OPENAI_API_KEY": "sk-openai-0123456789", "EMPTY_KEY": ""}
	authFile := filepath.Join(t.TempDir(), "zk-auth")
	if err := os.WriteFile(authFile, []byte("zksched:zk-digest-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dsn string
		want      []string
	}{
		{"URL with a password", "postgres://zksched:pa%40ss-word@db:5432/zksched",
			[]string{"postgres://zksched:pa%40ss-word@db:5432/zksched", "pa@ss-word", "pa%40ss-word"}},
		{"URL with a password parameter", "postgres://zksched@db/zksched?password=hunter2-long",
			[]string{"postgres://zksched@db/zksched?password=hunter2-long", "hunter2-long"}},
		{"key=value", "host=db user=zksched password='p w-long'", []string{"host=db user=zksched password='p w-long'", "p w-long"}},
		{"no password", "postgres://zksched@db/zksched", []string{"postgres://zksched@db/zksched"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := conf.Defaults()
			c.DB.DSN = tc.dsn
			c.API.Token = "0123456789abcdef-token"
			c.Registry.AuthFile = authFile
			c.LLM.Providers["main"] = conf.Provider{Type: conf.ProviderOpenAI, Model: "m", APIKeyEnv: "OPENAI_API_KEY"}
			c.LLM.Providers["other"] = conf.Provider{Type: conf.ProviderOpenAI, Model: "m", APIKeyEnv: "EMPTY_KEY"}
			got, err := c.SecretValues(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			want := append(tc.want, "0123456789abcdef-token", "zksched:zk-digest-secret", "zk-digest-secret", "sk-openai-0123456789")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("SecretValues() = %q, want %q", got, want)
			}
		})
	}
}
