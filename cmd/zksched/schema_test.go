package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zksched/zksched/internal/testenv"
)

// TestSchemaWorkflowDoc checks that docs/workflow.schema.json is what `zksched schema
// workflow` prints.
func TestSchemaWorkflowDoc(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run([]string{"schema", "workflow"}, &out, &errOut); code != exitOK {
		t.Fatalf("zksched schema workflow: exit %d\n%s", code, errOut.String())
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "workflow.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, out.Bytes()) {
		t.Errorf("docs/workflow.schema.json is not what `zksched schema workflow` prints: regenerate it with\n" +
			"  go run ./cmd/zksched schema workflow > docs/workflow.schema.json")
	}
}

// TestSchemaUsage checks the command's answers to wrong command lines.
func TestSchemaUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"schema"}, exitUsage, "zksched schema: want workflow\nusage: zksched schema workflow\n"},
		{[]string{"schema", "openapi.json"}, exitUsage, "zksched schema: unknown schema \"openapi.json\": want workflow\n"},
		{[]string{"schema", "workflow", "extra"}, exitUsage, "zksched schema: unexpected arguments [extra]\n"},
		{[]string{"schema", "workflow", "--pretty"}, exitUsage, "flag provided but not defined: -pretty"},
		{[]string{"schema", "--help"}, exitOK, ""},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := run(tt.args, &out, &errOut)
		if code != tt.code || !strings.Contains(errOut.String(), tt.want) {
			t.Errorf("zksched %s: exit %d, stderr %q; want exit %d, stderr with %q",
				strings.Join(tt.args, " "), code, errOut.String(), tt.code, tt.want)
		}
	}
}

// TestDocsSchemaCommands runs the editor-support commands of docs/workflows.md and checks they print
// the published schema, which the docs point editors at.
func TestDocsSchemaCommands(t *testing.T) {
	t.Parallel()
	block := testenv.DocBlock(t, "docs/workflows.md", "Editor support", "sh", 1)
	doc, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "workflow.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		command, file, redirected := strings.Cut(line, " > ")
		args := strings.Fields(command)
		if len(args) < 2 || args[0] != "zksched" || !redirected || strings.TrimSpace(file) == "" {
			t.Fatalf("docs line %q is not a zksched command writing a file", line)
		}
		var out, errOut bytes.Buffer
		if code := run(args[1:], &out, &errOut); code != exitOK {
			t.Fatalf("%s: exit %d\n%s", line, code, errOut.String())
		}
		if !bytes.Equal(out.Bytes(), doc) {
			t.Errorf("%s writes something else than docs/workflow.schema.json", line)
		}
	}
}
