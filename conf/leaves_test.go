package conf_test

import (
	"testing"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/tracing"
	"github.com/zksched/zksched/worker/executor"
	"github.com/zksched/zksched/worker/llm"
	"github.com/zksched/zksched/workflow"
)

// TestLeavesTakeConfValues: the packages that take their own options instead of importing
// conf (tracing, worker/llm, worker/executor) accept conf's values as they are. The
// conversions below compile only while the types have the same fields.
func TestLeavesTakeConfValues(t *testing.T) {
	t.Parallel()
	_ = tracing.Config(conf.Defaults().Tracing)
	_ = llm.Provider(conf.Provider{})
	for _, c := range []struct{ conf, leaf string }{
		{conf.TaskCgroupAuto, executor.TaskCgroupAuto},
		{conf.TaskCgroupOff, executor.TaskCgroupOff},
		{conf.ProviderOpenAI, llm.ProviderOpenAI},
		{conf.ProviderOllama, llm.ProviderOllama},
		{conf.ProviderAnthropic, llm.ProviderAnthropic},
		{conf.ProviderOffline, llm.ProviderOffline},
	} {
		if c.conf != c.leaf {
			t.Errorf("conf's value %q is %q in its package", c.conf, c.leaf)
		}
	}
	if conf.MaxOutputLimit != workflow.MaxOutputLimit || conf.Defaults().Worker.OutputLimit != workflow.DefaultOutputLimit {
		t.Errorf("conf's output limits (max %d, default %d) are not workflow's (%d, %d)", conf.MaxOutputLimit,
			conf.Defaults().Worker.OutputLimit, workflow.MaxOutputLimit, workflow.DefaultOutputLimit)
	}
}
