package workflow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestItems: what a for-each renders is read as a JSON array (strings as they are, other
// elements as their JSON text) or as one item a line; an error names the task and says why.
func TestItems(t *testing.T) {
	t.Parallel()
	many := "[" + strings.Repeat("1,", MaxItems) + "1]"
	for _, tc := range []struct {
		name, forEach string
		params        map[string]string
		want          []string
		err           string
	}{
		{name: "array of strings", forEach: `["a b", "c\n", ""]`, want: []string{"a b", "c\n", ""}},
		{name: "other JSON as its text", forEach: `[1, 2.5, true, null, {"k": [1, 2]}, ["x"]]`,
			want: []string{"1", "2.5", "true", "null", `{"k":[1,2]}`, `["x"]`}},
		{name: "an upstream array, spaces around it", forEach: "{{ .params.list }}", params: map[string]string{"list": "  [\"x\",\"y\"]\n"},
			want: []string{"x", "y"}},
		{name: "lines", forEach: "{{ range 3 }}  item-{{ . }} \n\n{{ end }}", want: []string{"item-0", "item-1", "item-2"}},
		{name: "a line that is not an array", forEach: "a, b", want: []string{"a, b"}},
		{name: "empty array", forEach: "[ ]", want: []string{}},
		{name: "nothing", forEach: "{{ .params.list }}", params: map[string]string{"list": " \n "}, want: nil},
		{name: "not JSON", forEach: "[a, b]", err: `task "t": for-each rendered text starting with '[' that is not a JSON array: invalid character 'a' looking for beginning of value ("[a, b]")`},
		{name: "too many", forEach: "{{ .params.list }}", params: map[string]string{"list": many},
			err: fmt.Sprintf(`task "t": for-each rendered %d items; the limit is %d`, MaxItems+1, MaxItems)},
		{name: "render error", forEach: "{{ .params.missing }}",
			err: `map has no entry for key "missing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := &Task{Name: "t", Type: "noop", ForEach: tc.forEach}
			got, err := task.Items(context.Background(), TemplateData{Params: tc.params})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Items = %q, %v; want the error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) && len(got) != 0 {
				t.Fatalf("Items = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestItemNames: an item's name reads back as its task and index; no other name does.
func TestItemNames(t *testing.T) {
	t.Parallel()
	for _, i := range []int{0, 7, MaxItems - 1} {
		if task, idx, ok := ParseItemName(ItemName("sum-up.v2", i)); !ok || task != "sum-up.v2" || idx != i {
			t.Errorf("ParseItemName(ItemName(sum-up.v2, %d)) = %q, %d, %v", i, task, idx, ok)
		}
	}
	for _, name := range []string{"plain", "[0]", "a[]", "a[01]", "a[-1]", "a[1", "a[x]", "a[1]b"} {
		if _, _, ok := ParseItemName(name); ok {
			t.Errorf("ParseItemName(%q) ok; want it refused", name)
		}
	}
}

// TestRenderSeesTheItem: the prompts of a for-each task's instance see its item and index;
// other templates have neither.
func TestRenderSeesTheItem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	got, err := Render(ctx, "prompt", "{{ .index }}: {{ .item }}", TemplateData{Item: &Item{Value: "doc.md", Index: 3}})
	if err != nil || got != "3: doc.md" {
		t.Fatalf("Render = %q, %v; want %q", got, err, "3: doc.md")
	}
	if got, err := Render(ctx, "prompt", "{{ .item }}", TemplateData{}); err == nil {
		t.Fatalf("Render without an item = %q; want an error", got)
	}
}
