package lifecycle

import (
	"slices"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/workflow"
)

// Facts returns what the statements creating spec's instances need to know of it, to store
// with its definition (dao.DefinitionEnsure): computed here once, from the parsed spec, so that
// no statement reads the workflow file's keys out of the stored JSON.
//
// Each fact is what migration 00015 computed from json.Marshal(spec) for the definitions stored
// before it, so old and new definitions agree: a timeout is any non-zero one, a cap any
// non-zero max-active-instances (Validate refuses a negative one), and a spec without tasks
// has no task count rather than a count of 0. A spec with a for-each task, which came after
// that migration, has no task count either.
func Facts(spec *workflow.Spec) dao.DefinitionFacts {
	f := dao.DefinitionFacts{
		HasTimeout:   spec.Timeout != 0,
		WhenFullSkip: spec.WhenFull == workflow.WhenFullSkip,
	}
	// An instance with a for-each task has more task instances than its spec has tasks: only
	// a master ends it, so it has no task count for the worker's statement to go by.
	if n := len(spec.Tasks); n > 0 && !slices.ContainsFunc(spec.Tasks, func(t workflow.Task) bool { return t.ForEach != "" }) {
		f.TaskCount = &n
	}
	if n := spec.MaxActiveInstances; n != 0 {
		f.MaxActive = &n
	}
	f.Notify = NotifyRules(spec.Notify)
	f.Deadline = time.Duration(spec.Deadline)
	for _, t := range spec.Tasks {
		if t.Deadline > 0 {
			if f.TaskDeadlines == nil {
				f.TaskDeadlines = map[string]time.Duration{}
			}
			f.TaskDeadlines[t.Name] = time.Duration(t.Deadline)
		}
	}
	return f
}

// NotifyRules flattens notify: entries into the rows of notify_rule: one per event and
// channel target, each once.
func NotifyRules(entries []workflow.Notify) []dao.NotifyRule {
	var rules []dao.NotifyRule
	add := func(r dao.NotifyRule) {
		if !slices.Contains(rules, r) {
			rules = append(rules, r)
		}
	}
	for _, n := range entries {
		for _, ev := range n.On {
			if n.WebhookURLEnv != "" {
				add(dao.NotifyRule{Event: ev, Channel: dao.ChannelWebhook, Target: n.WebhookURLEnv, Slack: n.Slack})
			}
			for _, addr := range n.Email {
				add(dao.NotifyRule{Event: ev, Channel: dao.ChannelEmail, Target: addr})
			}
		}
	}
	return rules
}
