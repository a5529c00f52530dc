package workflow

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	tparse "text/template/parse"
	"time"
)

// Bounds of rendering a prompt template. A template is a small program: {{range}} loops,
// and since Go 1.22 ranges over an integer, so `{{range 2000000000}}{{end}}` would hold a
// worker's slot for minutes while writing nothing. Render refuses what is certain to exceed
// these bounds before running the template, enforces the rest as it runs, and stops as soon
// as its context ends (the task's timeout or a kill).
const (
	// MaxRangeItems is the most items one {{range}} may go over.
	MaxRangeItems = 100_000
	// MaxRenderSteps bounds the work of a template's loops: each {{range}} costs the items it
	// goes over times the size of its body, counted in template nodes, an inner loop again
	// for each turn of the outer one.
	MaxRenderSteps = 1_000_000
	// maxRendered bounds what one template may expand to, and every string a function
	// inside it makes.
	maxRendered = 1 << 20
	// maxFormatWidth bounds the width and precision of a printf verb, which would otherwise
	// make a string of any size from a few bytes of template.
	maxFormatWidth = 1000
	// maxArgs bounds the arguments of one function call, so that each call's work stays
	// proportional to the values it is given.
	maxArgs = 100
)

// TemplateData is what a prompt template sees: .params.<name>, .upstream.<task>.output, in
// an agent's steps .steps.<step>, and in the prompts of a for-each task's items .item and
// .index.
type TemplateData struct {
	Params   map[string]string
	Upstream map[string]Upstream
	// Steps are the outputs of the agent's earlier steps; nil outside an agent.
	Steps map[string]string
	// Item is the item a for-each task's instance runs on; nil outside one.
	Item *Item
	// Args are a tool call's arguments, .args in a tool's approve-when; nil elsewhere.
	Args map[string]any
	// Delivery is a webhook's delivery, .body and .headers in a hook's templates; nil
	// elsewhere.
	Delivery *Delivery
	// Assets are the asset events that started the run (.assets.<name>.output); nil for a
	// run no asset started.
	Assets map[string]AssetInput
	// Body is an http sensor's answer read as JSON, .body in its expect.json; nil elsewhere.
	Body any
	// Run is the workflow instance a workflow sensor's since is rendered for (.run); nil
	// elsewhere.
	Run *RunInput
}

// RunInput is a workflow instance as a workflow sensor's since reads it: .run.id,
// .run.created_at (its submission) and .run.started_at, the times in RFC 3339.
type RunInput struct {
	ID        int64
	CreatedAt time.Time
	StartedAt *time.Time
}

// runFields are the fields of .run.
var runFields = []string{"id", "created_at", "started_at"}

// Render expands the template text, named what in messages ("prompt", "step \"themes\"
// prompt"), over data. A reference to something data does not hold is an error, never an
// empty string: a prompt silently missing its input would still cost a model call. It returns
// as soon as ctx ends, with an error wrapping the context's cause, whatever the template is
// doing; and it refuses a template that goes past the bounds above.
func Render(ctx context.Context, what, text string, data TemplateData) (string, error) {
	tmpl, err := parseTemplate(what, text)
	if err != nil {
		return "", err
	}
	if err := staticProblem(tmpl); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	// The template runs on its own goroutine so that Render returns when ctx ends even in
	// the middle of one long function call; the goroutine itself stops at its next check of
	// the context (every loop turn, every write, every call of a function that makes a
	// string).
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := execute(ctx, what, tmpl, data)
		done <- result{out, err}
	}()
	select {
	case res := <-done:
		return res.out, res.err
	case <-ctx.Done():
		return "", stopped(ctx, what)
	}
}

func stopped(ctx context.Context, what string) error {
	return fmt.Errorf("%s: rendering stopped: %w", what, context.Cause(ctx))
}

// execute runs a parsed template over data within the bounds, stopping at its first check of
// ctx after ctx ends.
func execute(ctx context.Context, what string, tmpl *template.Template, data TemplateData) (string, error) {
	upstream := make(map[string]map[string]string, len(data.Upstream))
	for name, u := range data.Upstream {
		upstream[name] = map[string]string{"output": u.Output}
	}
	m := map[string]any{"params": nonNil(data.Params), "upstream": upstream}
	if data.Steps != nil {
		m["steps"] = data.Steps
	}
	if data.Item != nil {
		m["item"], m["index"] = data.Item.Value, data.Item.Index
	}
	if data.Args != nil {
		m["args"] = data.Args
	}
	if data.Delivery != nil {
		m["body"], m["headers"] = data.Delivery.Body, nonNil(data.Delivery.Headers)
	}
	assets := make(map[string]map[string]any, len(data.Assets))
	for name, a := range data.Assets {
		assets[name] = map[string]any{"output": a.Output, "event": a.Event}
	}
	m["assets"] = assets
	if data.Body != nil {
		m["body"] = data.Body
	}
	if r := data.Run; r != nil {
		run := map[string]any{"id": r.ID, "created_at": r.CreatedAt.UTC().Format(time.RFC3339Nano), "started_at": ""}
		if r.StartedAt != nil {
			run["started_at"] = r.StartedAt.UTC().Format(time.RFC3339Nano)
		}
		m["run"] = run
	}
	r := &renderer{ctx: ctx}
	funcs := r.funcs()
	guardRanges(tmpl.Tree, funcs, r)
	tmpl.Funcs(funcs)
	out := &boundedWriter{ctx: ctx}
	err := tmpl.Execute(out, m)
	switch {
	case err == nil:
		return out.String(), nil
	case ctx.Err() != nil:
		return "", stopped(ctx, what)
	case r.err != nil:
		return "", fmt.Errorf("%s: %w", what, r.err)
	case errors.Is(err, errTooLong):
		return "", fmt.Errorf("%s expands to more than %d bytes", what, maxRendered)
	}
	return "", fmt.Errorf("%s: %s", what, clipTo(strings.TrimPrefix(err.Error(), "template: "), maxMessage))
}

func parseTemplate(name, text string) (*template.Template, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		// "template: prompt:1: unexpected ..." names the template already.
		return nil, fmt.Errorf("%s is not a valid template: %s", name,
			clipTo(strings.TrimPrefix(err.Error(), "template: "), maxMessage))
	}
	return tmpl, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// staticProblem reports what makes a template unfit to render whatever its data: a
// {{define}}, {{block}} or {{template}} (one template calling another, or itself, can do
// work that grows exponentially with its size, and a prompt has no need of them); a call with
// more than maxArgs arguments; a {{range}} over a literal integer above MaxRangeItems; nested
// ranges over literal integers whose steps alone go past MaxRenderSteps; a printf whose
// literal format asks for a width or precision above maxFormatWidth.
func staticProblem(tmpl *template.Template) error {
	if len(tmpl.Templates()) > 1 {
		return errors.New("{{define}} and {{block}} are not allowed in a prompt")
	}
	var err error
	fail := func(n tparse.Node, format string, args ...any) {
		if err == nil {
			loc, _ := tmpl.Tree.ErrorContext(n)
			err = fmt.Errorf("%s: %s", loc, fmt.Sprintf(format, args...))
		}
	}
	// steps returns the least number of steps a list takes: loops over a literal integer
	// multiply their body's steps, other loops count as going over one item.
	var steps func(n tparse.Node) int
	steps = func(n tparse.Node) int {
		switch n := n.(type) {
		case *tparse.ListNode:
			if n == nil {
				return 0
			}
			total := 0
			for _, c := range n.Nodes {
				total = min(total+steps(c), MaxRenderSteps+1)
			}
			return total
		case *tparse.TemplateNode:
			fail(n, "{{template}} is not allowed in a prompt")
		case *tparse.IfNode:
			return 1 + steps(n.Pipe) + steps(n.List) + steps(n.ElseList)
		case *tparse.WithNode:
			return 1 + steps(n.Pipe) + steps(n.List) + steps(n.ElseList)
		case *tparse.RangeNode:
			items := 1
			if v, ok := literalInt(n.Pipe); ok {
				if v > MaxRangeItems {
					fail(n, "range over %d items; a prompt may range over at most %d", v, MaxRangeItems)
				}
				items = int(max(v, 0))
			}
			body := 1 + steps(n.List)
			total := 1 + steps(n.Pipe) + steps(n.ElseList)
			if items > 0 && body > (MaxRenderSteps+1)/items {
				return MaxRenderSteps + 1
			}
			return min(total+items*body, MaxRenderSteps+1)
		case *tparse.ActionNode:
			return 1 + steps(n.Pipe)
		case *tparse.PipeNode:
			if n == nil {
				return 0
			}
			total := 0
			for _, c := range n.Cmds {
				total += steps(c)
			}
			return total
		case *tparse.CommandNode:
			if len(n.Args) > maxArgs+1 {
				fail(n, "a call with %d arguments; a prompt's calls take at most %d", len(n.Args)-1, maxArgs)
			}
			if len(n.Args) == 0 {
				return 1
			}
			if id, ok := n.Args[0].(*tparse.IdentifierNode); ok && id.Ident == "printf" && len(n.Args) > 1 {
				if s, ok := n.Args[1].(*tparse.StringNode); ok {
					if e := checkFormat(s.Text); e != nil {
						fail(n, "%v", e)
					}
				}
			}
			total := 1
			for _, a := range n.Args {
				total += steps(a)
			}
			return total
		case *tparse.ChainNode:
			return 1 + steps(n.Node)
		}
		return 1
	}
	if s := steps(tmpl.Tree.Root); err == nil && s > MaxRenderSteps {
		return fmt.Errorf("its loops take more than %d steps (a loop's items times the nodes of its body, "+
			"inner loops again for each turn of the outer one)", MaxRenderSteps)
	}
	return err
}

// literalInt returns the integer a {{range}} goes over when it is written as a number.
func literalInt(p *tparse.PipeNode) (int64, bool) {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return 0, false
	}
	if n, ok := p.Cmds[0].Args[0].(*tparse.NumberNode); ok && n.IsInt {
		return n.Int64, true
	}
	return 0, false
}

// renderer holds the state of one Render: its context, the steps its loops have taken and
// the first bound they broke.
type renderer struct {
	ctx   context.Context
	steps int
	err   error
}

// fail records err as the reason rendering stopped and returns it, for a template function
// to return.
func (r *renderer) fail(err error) error {
	if r.err == nil {
		r.err = err
	}
	return err
}

// errStop is what a template function returns once the context has ended; Render reports
// the context's cause instead.
var errStop = errors.New("rendering stopped")

func (r *renderer) check() error {
	if r.ctx.Err() != nil {
		return errStop
	}
	return nil
}

// funcs returns the functions a template runs with: the builtins that make strings, with the
// context checked and the size of what they make bounded.
func (r *renderer) funcs() template.FuncMap {
	sized := func(name string, f func(args ...any) string) func(args ...any) (string, error) {
		return func(args ...any) (string, error) {
			if err := r.check(); err != nil {
				return "", err
			}
			if n := stringBytes(args); n > maxRendered {
				return "", r.fail(fmt.Errorf("%s of %d bytes: a string in a prompt is at most %d bytes", name, n, maxRendered))
			}
			s := f(args...)
			if len(s) > maxRendered {
				return "", r.fail(fmt.Errorf("%s makes %d bytes: a string in a prompt is at most %d bytes", name, len(s), maxRendered))
			}
			return s, nil
		}
	}
	return template.FuncMap{
		"print":    sized("print", fmt.Sprint),
		"println":  sized("println", fmt.Sprintln),
		"html":     sized("html", template.HTMLEscaper),
		"js":       sized("js", template.JSEscaper),
		"urlquery": sized("urlquery", template.URLQueryEscaper),
		"printf": func(format string, args ...any) (string, error) {
			if err := checkFormat(format); err != nil {
				return "", r.fail(err)
			}
			return sized("printf", func(args ...any) string { return fmt.Sprintf(format, args...) })(args...)
		},
		"_zktick": func() (string, error) { return "", r.check() },
	}
}

// stringBytes adds up the lengths of the strings among args.
func stringBytes(args []any) int {
	n := 0
	for _, a := range args {
		if s, ok := a.(string); ok {
			n += len(s)
		}
	}
	return n
}

// checkFormat refuses a printf format that asks for a width or precision above
// maxFormatWidth, or takes one from an argument (*).
func checkFormat(format string) error {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		for i++; i < len(format); i++ {
			c := format[i]
			if c == '*' {
				return errors.New("printf: a width or precision from an argument (*) is not allowed in a prompt")
			}
			if c >= '0' && c <= '9' {
				j := i
				for j < len(format) && format[j] >= '0' && format[j] <= '9' {
					j++
				}
				if n, err := strconv.Atoi(format[i:j]); err != nil || n > maxFormatWidth {
					return fmt.Errorf("printf: a width or precision of %s; a prompt's are at most %d", clip(format[i:j]), maxFormatWidth)
				}
				i = j - 1
				continue
			}
			if (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '%' {
				break
			}
		}
	}
	return nil
}

// guardRanges makes every {{range}} of the tree check its bounds: the value it goes over
// is passed through a function (added to funcs) that refuses more than MaxRangeItems items
// and counts items times the body's size against MaxRenderSteps, before the first turn;
// and each turn starts by checking the context.
func guardRanges(tree *tparse.Tree, funcs template.FuncMap, r *renderer) {
	var walk func(n tparse.Node)
	walk = func(n tparse.Node) {
		switch n := n.(type) {
		case *tparse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *tparse.IfNode:
			walk(n.List)
			walk(n.ElseList)
		case *tparse.WithNode:
			walk(n.List)
			walk(n.ElseList)
		case *tparse.RangeNode:
			walk(n.List)
			walk(n.ElseList)
			name := "_zkrange" + strconv.Itoa(len(funcs))
			loc, _ := tree.ErrorContext(n)
			weight := 1 + nodeCount(n.List)
			funcs[name] = func(v any) (any, error) { return r.charge(loc, weight, v) }
			n.Pipe.Cmds = append(n.Pipe.Cmds, command(n.Pos, name))
			if n.List == nil {
				n.List = &tparse.ListNode{NodeType: tparse.NodeList, Pos: n.Pos}
			}
			tick := &tparse.ActionNode{NodeType: tparse.NodeAction, Pos: n.Pos, Line: n.Line,
				Pipe: &tparse.PipeNode{NodeType: tparse.NodePipe, Pos: n.Pos, Line: n.Line,
					Cmds: []*tparse.CommandNode{command(n.Pos, "_zktick")}}}
			n.List.Nodes = append([]tparse.Node{tick}, n.List.Nodes...)
		}
	}
	walk(tree.Root)
}

// command is the call of a function by name with no arguments of its own (in a pipeline,
// the value before it is its argument).
func command(pos tparse.Pos, name string) *tparse.CommandNode {
	return &tparse.CommandNode{NodeType: tparse.NodeCommand, Pos: pos,
		Args: []tparse.Node{tparse.NewIdentifier(name).SetPos(pos)}}
}

// nodeCount is the size of a range body in nodes, counting an inner range as one: it
// charges its own turns.
func nodeCount(n tparse.Node) int {
	switch n := n.(type) {
	case *tparse.ListNode:
		if n == nil {
			return 0
		}
		c := 0
		for _, x := range n.Nodes {
			c += nodeCount(x)
		}
		return c
	case *tparse.IfNode:
		return 1 + nodeCount(n.Pipe) + nodeCount(n.List) + nodeCount(n.ElseList)
	case *tparse.WithNode:
		return 1 + nodeCount(n.Pipe) + nodeCount(n.List) + nodeCount(n.ElseList)
	case *tparse.RangeNode:
		return 1 + nodeCount(n.Pipe) + nodeCount(n.ElseList)
	case *tparse.ActionNode:
		return 1 + nodeCount(n.Pipe)
	case *tparse.PipeNode:
		if n == nil {
			return 0
		}
		c := 0
		for _, x := range n.Cmds {
			c += nodeCount(x)
		}
		return c
	case *tparse.CommandNode:
		c := 1
		for _, a := range n.Args {
			c += nodeCount(a)
		}
		return c
	}
	return 1
}

// charge is run before a {{range}} (at loc, whose body is weight nodes) goes over v: it
// refuses more than MaxRangeItems items, or a loop that would take the template past
// MaxRenderSteps, and returns v for the range.
func (r *renderer) charge(loc string, weight int, v any) (any, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	items, err := rangeItems(v)
	if err != nil {
		return nil, r.fail(fmt.Errorf("%s: %w", loc, err))
	}
	if items > MaxRangeItems {
		return nil, r.fail(fmt.Errorf("%s: range over %d items; a prompt may range over at most %d", loc, items, MaxRangeItems))
	}
	r.steps += int(items) * weight
	if r.steps > MaxRenderSteps {
		return nil, r.fail(fmt.Errorf("%s: the template's loops take more than %d steps (a loop's items times the "+
			"nodes of its body, inner loops again for each turn of the outer one)", loc, MaxRenderSteps))
	}
	return v, nil
}

// rangeItems is the number of items a {{range}} over v goes over.
func rangeItems(v any) (int64, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return 0, nil
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Invalid:
		return 0, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return max(rv.Int(), 0), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if rv.Uint() > MaxRangeItems {
			return MaxRangeItems + 1, nil
		}
		return int64(rv.Uint()), nil
	case reflect.Array, reflect.Slice, reflect.Map, reflect.String:
		return int64(rv.Len()), nil
	}
	return 0, fmt.Errorf("range over %s: a prompt ranges over numbers, lists and maps", rv.Kind())
}

var errTooLong = errors.New("template output too long")

// boundedWriter collects a template's output: it fails writes past maxRendered bytes and
// any write once its context has ended.
type boundedWriter struct {
	ctx context.Context
	strings.Builder
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.ctx.Err() != nil {
		return 0, errStop
	}
	if w.Len()+len(p) > maxRendered {
		return 0, errTooLong
	}
	return w.Builder.Write(p)
}

// Runs reports whether the task's when: condition holds over data: true for a task without
// one. The condition must render true or false (spaces around it ignored); anything else, or
// a template that fails, is an error naming the task.
func (t *Task) Runs(ctx context.Context, data TemplateData) (bool, error) {
	if t.When == "" {
		return true, nil
	}
	out, err := Render(ctx, "when", t.When, data)
	if err != nil {
		return false, fmt.Errorf("task %s: %w", quote(t.Name), err)
	}
	switch v := strings.TrimSpace(out); v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, fmt.Errorf("task %s: when rendered %s; it must render true or false", quote(t.Name), quote(clip(v)))
	}
}

// NeedsApproval reports whether a call of the tool with args must wait for a person's
// approval: always with approve: true, and when approve-when renders true over the params,
// the upstream outputs and .args. approve-when must render true or false.
func (t Tool) NeedsApproval(ctx context.Context, data TemplateData, args map[string]any) (bool, error) {
	switch {
	case t.Approve:
		return true, nil
	case t.ApproveWhen == "":
		return false, nil
	}
	data.Args = args
	if data.Args == nil {
		data.Args = map[string]any{}
	}
	out, err := Render(ctx, "approve-when", t.ApproveWhen, data)
	if err != nil {
		return false, fmt.Errorf("tool %s: %w", quote(t.Name), err)
	}
	switch v := strings.TrimSpace(out); v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, fmt.Errorf("tool %s: approve-when rendered %s; it must render true or false", quote(t.Name), quote(clip(v)))
	}
}
