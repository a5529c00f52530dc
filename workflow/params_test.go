package workflow

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCheckParams(t *testing.T) {
	t.Parallel()
	many := make(map[string]string, MaxParams+1)
	for i := range MaxParams + 1 {
		many[fmt.Sprintf("p%d", i)] = "v"
	}
	name128 := strings.Repeat("n", 128)
	tests := []struct {
		name   string
		params map[string]string
		want   []string
		// notInFile is set where YAML cannot write the value (it reads "\xff" as ÿ).
		notInFile bool
	}{
		{"none", nil, nil, false},
		{"the largest", map[string]string{name128: strings.Repeat("v", MaxParamValue)}, nil, false},
		{"too many", many, []string{"params: 101 of them; a run has at most 100"}, false},
		{"a name too long", map[string]string{name128 + "n": "v"}, []string{fmt.Sprintf(
			`params: name "%s" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`, name128+"n")}, false},
		{"a name that is no variable", map[string]string{"my-day": "v"}, []string{
			`params: name "my-day" is invalid: use 1 to 128 letters, digits and '_', not starting with a digit (tasks read it as $ZKSCHED_PARAM_<name>)`}, false},
		{"a value too long", map[string]string{"big": strings.Repeat("v", MaxParamValue+1)}, []string{
			"params: big is 65537 bytes; a value is at most 65536"}, false},
		{"NUL", map[string]string{"a": "x\x00y"}, []string{"params: a is not text: a value is UTF-8 without NUL"}, false},
		{"not UTF-8", map[string]string{"a": "\xff"}, []string{"params: a is not text: a value is UTF-8 without NUL"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := problems(t, CheckParams(tt.params)); !slices.Equal(got, tt.want) {
				t.Errorf("CheckParams:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
			if tt.notInFile {
				return
			}
			// A file's params follow the same rule, with the line of params.
			var doc strings.Builder
			doc.WriteString("name: w\nparams:\n")
			for k, v := range tt.params {
				fmt.Fprintf(&doc, "  %s: %q\n", k, v)
			}
			doc.WriteString("tasks: [{name: a, type: noop}]\n")
			_, err := Parse([]byte(doc.String()))
			var want []string
			for _, w := range tt.want {
				want = append(want, "line 2: "+w)
			}
			if got := problems(t, err); !slices.Equal(got, want) {
				t.Errorf("Parse:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
		})
	}
}

func TestNamesAtMost128Bytes(t *testing.T) {
	t.Parallel()
	n128, n129 := strings.Repeat("n", 128), strings.Repeat("n", 129)
	if _, err := Parse([]byte("name: " + n128 + "\ntasks: [{name: " + n128 + ", type: noop, group: " + n128 + ", pool: " + n128 + "}]\n")); err != nil {
		t.Errorf("names of 128 bytes refused: %v", err)
	}
	_, err := Parse([]byte("name: " + n129 + "\ntasks: [{name: " + n129 + ", type: noop, group: " + n129 + ", pool: " + n129 + "}]\n"))
	want := []string{
		fmt.Sprintf(`line 1: workflow name "%s" is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`, n129),
		fmt.Sprintf(`line 2: task "%s": name is invalid: use 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit`, n129),
		fmt.Sprintf(`line 2: task "%s": group "%s" is invalid: use 1 to 128 letters, digits, '_', '.' or '-'`, n129, n129),
		fmt.Sprintf(`line 2: task "%s": pool "%s" is invalid: use 1 to 128 letters, digits, '_', '.' or '-'`, n129, n129),
	}
	if got := problems(t, err); !slices.Equal(got, want) {
		t.Errorf("Parse:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
