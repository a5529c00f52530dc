package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxItems is the most items a for-each task may have: each is a task instance of its own.
const MaxItems = 10_000

// forEachTypes are the task types that may have a for-each: those that run on workers. A task
// that runs nowhere (a wait task) has nothing to run once per item.
var forEachTypes = []string{"agent", "llm", "noop", "shell"}

// Item is what one task instance of a for-each task runs on: its item and the item's place
// in the list, from 0. Templates see them as .item and .index, shell tasks as $ZKSCHED_ITEM
// and $ZKSCHED_INDEX.
type Item struct {
	Value string `json:"value"`
	Index int    `json:"index"`
}

// ItemName is the name of the task instance of item index of the for-each task named task:
// task[index]. Task names cannot hold '[', so it never names a task of the workflow.
func ItemName(task string, index int) string {
	return task + "[" + strconv.Itoa(index) + "]"
}

// ParseItemName splits a task instance name made by ItemName into the task's name and the
// item's index; ok is false for any other name.
func ParseItemName(name string) (task string, index int, ok bool) {
	open := strings.IndexByte(name, '[')
	if open <= 0 || !strings.HasSuffix(name, "]") {
		return "", 0, false
	}
	digits := name[open+1 : len(name)-1]
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || strconv.Itoa(i) != digits {
		return "", 0, false
	}
	return name[:open], i, true
}

// Items renders the task's for-each template over data and returns its items. The rendered
// text (spaces around it ignored) is either a JSON array — each string element is an item
// as it is, any other element its JSON text (compacted) — or, when it does not start with
// '[', one item a line: its non-empty lines, each with the spaces around it removed. An error
// names the task: a template that fails, text starting with '[' that is not a JSON array, or
// more than MaxItems items.
func (t *Task) Items(ctx context.Context, data TemplateData) ([]string, error) {
	out, err := Render(ctx, "for-each", t.ForEach, data)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", quote(t.Name), err)
	}
	items, err := splitItems(strings.TrimSpace(out))
	if err != nil {
		return nil, fmt.Errorf("task %s: for-each %w", quote(t.Name), err)
	}
	if len(items) > MaxItems {
		return nil, fmt.Errorf("task %s: for-each rendered %d items; the limit is %d", quote(t.Name), len(items), MaxItems)
	}
	return items, nil
}

// splitItems reads rendered for-each text as Items describes; its errors follow "for-each".
func splitItems(text string) ([]string, error) {
	if !strings.HasPrefix(text, "[") {
		var items []string
		for line := range strings.Lines(text) {
			if line = strings.TrimSpace(line); line != "" {
				items = append(items, line)
			}
		}
		return items, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("rendered text starting with '[' that is not a JSON array: %s (%s)", clip(err.Error()), quote(clip(text)))
	}
	items := make([]string, len(raw))
	for i, r := range raw {
		var s string
		if r[0] == '"' && json.Unmarshal(r, &s) == nil {
			items[i] = s
			continue
		}
		var b bytes.Buffer
		if err := json.Compact(&b, r); err != nil {
			return nil, fmt.Errorf("item %d: %v", i, err)
		}
		items[i] = b.String()
	}
	return items, nil
}

// checkForEach checks a task's for-each and max-parallel.
func checkForEach(t *Task) []problem {
	var probs []problem
	if t.MaxParallel < 0 {
		probs = append(probs, problem{field: "max-parallel", msg: fmt.Sprintf("max-parallel %d is negative; 0 means no cap", t.MaxParallel)})
	}
	if t.ForEach == "" {
		if t.MaxParallel != 0 {
			probs = append(probs, problem{field: "max-parallel", msg: "max-parallel caps the items of a for-each: the task has no for-each"})
		}
		return probs
	}
	if t.Type != "" && !slices.Contains(forEachTypes, t.Type) {
		if _, known := lookupType(t.Type); known {
			probs = append(probs, problem{field: "for-each", msg: fmt.Sprintf(
				"for-each is for tasks that run on workers (%s), not for %s task", strings.Join(forEachTypes, ", "), aType(t.Type))})
		}
	}
	return append(probs, checkTemplate(t, "for-each", "for-each", t.ForEach, nil)...)
}
