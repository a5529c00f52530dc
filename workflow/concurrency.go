package workflow

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Concurrency is a workflow's concurrency: key: the instances whose Key renders the same run at
// most Max at a time, the others wait in submit order, and WhenFull says what a new one does
// when its key is full.
type Concurrency struct {
	// Key is a template over the instance's params alone ({{ .params.thread }}), rendered once
	// when the instance is submitted. Keys are the workflow's own: two workflows' instances
	// with the same key never wait for each other.
	Key string `json:"key" yaml:"key"`
	// Max is how many instances with one key may run at once, 1..MaxActiveInstances. Parse
	// sets 1 when the file names none.
	Max int `json:"max" yaml:"max"`
	// WhenFull is what a new instance does when its key has Max instances active: one of
	// ConcurrencyPolicies. Parse sets WhenFullQueue when the file names none.
	WhenFull string `json:"when-full" yaml:"when-full"`
}

// WhenFullCancelOldest stops the oldest active instance of a full concurrency key, so the new
// one takes its place.
const WhenFullCancelOldest = "cancel-oldest"

// MaxConcurrencyKey is the longest a concurrency key may render, in bytes.
const MaxConcurrencyKey = 512

// ConcurrencyPolicies are the when-full policies of a concurrency key.
func ConcurrencyPolicies() []string {
	return []string{WhenFullQueue, WhenFullSkip, WhenFullCancelOldest}
}

// concurrencyFields are the keys of the concurrency mapping.
var concurrencyFields = []string{"key", "max", "when-full"}

// decodeConcurrency reads the concurrency mapping. Its fields' lines are kept as
// "concurrency.<key>" so validation problems point at the line at fault.
func (d *decoder) decodeConcurrency(v *yaml.Node) *Concurrency {
	v = d.resolve(v)
	if v.Tag == "!!null" {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.errorf(v.Line, "concurrency must be a mapping with a key, like {key: \"{{ .params.thread }}\", max: 1}, not %s", kindName(v))
		return nil
	}
	c := &Concurrency{}
	for _, kv := range d.mapping(v, "concurrency") {
		key := kv.key.Value
		d.pos.fields["concurrency."+key] = kv.key.Line
		what := "concurrency: " + key
		switch key {
		case "key":
			c.Key, _ = d.scalar(kv.value, what, "a string")
		case "max":
			c.Max, _ = d.intValue(kv.value, what)
		case "when-full":
			c.WhenFull, _ = d.scalar(kv.value, what, "a string")
		default:
			d.errorf(kv.key.Line, "unknown field %s in concurrency%s", quote(key), didYouMean(key, concurrencyFields))
		}
	}
	return c
}

// setDefaults fills in what a concurrency mapping may leave out.
func (c *Concurrency) setDefaults() {
	if c.Max == 0 {
		c.Max = 1
	}
	if c.WhenFull == "" {
		c.WhenFull = WhenFullQueue
	}
}

// problems checks the concurrency mapping: a key that is a template over params alone, a max
// in range, a known policy.
func (c *Concurrency) problems() []problem {
	var probs []problem
	add := func(field, format string, args ...any) {
		probs = append(probs, problem{task: -1, field: "concurrency." + field, msg: "concurrency: " + fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(c.Key) == "" {
		add("key", "key is required, a template over the params like \"{{ .params.thread }}\"")
	} else if msg := keyTemplateProblem(c.Key); msg != "" {
		add("key", "%s", msg)
	}
	if c.Max < 1 || c.Max > MaxActiveInstances {
		add("max", "max %d is out of range 1..%d", c.Max, MaxActiveInstances)
	}
	if !slices.Contains(ConcurrencyPolicies(), c.WhenFull) {
		add("when-full", "when-full %s is not one of %s", quote(c.WhenFull), strings.Join(ConcurrencyPolicies(), ", "))
	}
	return probs
}

// keyTemplateProblem says what makes text unfit to be a concurrency key, "" if nothing: it must
// parse, stay within the bounds of any template, and read nothing but .params.
func keyTemplateProblem(text string) string {
	tmpl, err := parseTemplate("key", text)
	if err != nil {
		return err.Error()
	}
	if err := staticProblem(tmpl); err != nil {
		return fmt.Sprintf("key: %v", err)
	}
	for _, ref := range templateRefs(tmpl) {
		if ref[0] != "params" {
			return fmt.Sprintf("key: %s is unknown: a key is rendered at submit and can use only .params.<name>",
				clip("."+strings.Join(ref, ".")))
		}
	}
	return ""
}

// RenderKey renders the concurrency key of an instance whose params (the definition's defaults
// overridden by the submission's) are params. A key that renders empty, only blanks, or
// longer than MaxConcurrencyKey is an error: an instance is never submitted without the key
// its workflow says it has.
func (c *Concurrency) RenderKey(ctx context.Context, params map[string]string) (string, error) {
	key, err := Render(ctx, "concurrency key", c.Key, TemplateData{Params: params})
	if err != nil {
		return "", err
	}
	switch {
	case strings.TrimSpace(key) == "":
		return "", fmt.Errorf("concurrency key %s renders empty for these params: give the params it uses a value", quote(c.Key))
	case len(key) > MaxConcurrencyKey:
		return "", fmt.Errorf("concurrency key %s renders %d bytes; the limit is %d", quote(c.Key), len(key), MaxConcurrencyKey)
	}
	return key, nil
}
