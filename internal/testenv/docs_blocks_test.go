package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docCommandBlock is a command block of the documentation, as DocBlock finds it, and what runs
// it: a test, named by its file and function, that reads the block with DocBlock, or .ci/run.
type docCommandBlock struct {
	file, heading, lang string
	n                   int
	runBy               string // "path/x_test.go TestName", or ".ci/run"
}

// docCommandBlocks is every command block (```sh, ```bash, ```console) of README.md and
// docs/*.md with what runs it as printed; of the lines that take minutes to hours (the soaks
// and the benchmarks), the tests named run what is short and check the rest's flags. A block
// someone adds needs a row here, and a test behind it; a block may have several rows.
var docCommandBlocks = []docCommandBlock{
	// bin/test.sh is what CI runs; bin/quickstart.sh runs on a fresh clone in a network
	// namespace of its own, beside the suite's services.
	{"README.md", "zksched", "sh", 1, ".ci/run"},
	{"README.md", "zksched", "sh", 1, "e2e/quickstart_test.go TestQuickstart"},
	{"docs/cli.md", "The command line", "sh", 1, "e2e/instance_e2e_test.go TestDocsCommandLine"},
	{"docs/cli.md", "Reading the cluster", "sh", 1, "e2e/docs_e2e_test.go TestDocsReadingTheCluster"},
	{"docs/cli.md", "Shell completion", "sh", 1, "e2e/completion_e2e_test.go TestShellCompletion"},
	{"docs/http-api.md", "The HTTP API", "sh", 1, "e2e/docs_e2e_test.go TestDocsHTTPAPI"},
	{"docs/clients.md", "Install", "sh", 1, "e2e/python_client_test.go TestPythonClientInstallsOffline"},
	{"docs/clients.md", "Install", "sh", 1, "e2e/python_client_test.go TestPythonClient"},
	{"docs/install.md", "From a release", "sh", 1, "internal/release/deb_test.go TestDebInstallRunPurge"},
	{"docs/kubernetes.md", "Trying the chart", "sh", 1, "deploy/helm/docs_test.go TestDocsHelmCommands"},
	{"docs/llm.md", "The offline model, and a real one", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/http-api.md", "The OpenAPI document", "sh", 1, "api/openapi_test.go TestDocsOpenAPICommand"},
	{"docs/multi-host.md", "Running on several hosts", "sh", 1, "e2e/topology_test.go TestDocsSeveralHosts"},
	{"docs/multi-host.md", "Under a mixed load and random faults", "sh", 1, "e2e/docs_e2e_test.go TestDocsLongRuns"},
	{"docs/operations.md", "Running nodes", "sh", 1, "e2e/docs_e2e_test.go TestDocsRunningNodes"},
	{"docs/performance.md", "Running the benchmarks", "sh", 1, "e2e/docs_e2e_test.go TestDocsLongRuns"},
	{"docs/performance.md", "Running the benchmarks", "sh", 1, "cmd/zksched-bench/docs_test.go TestDocsBenchCommands"},
	{"docs/schedules.md", "Schedules", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/schedules.md", "One run at a time per key", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/security.md", "Users and roles", "sh", 1, "e2e/user_test.go TestDocsUserCommands"},
	{"docs/testing.md", "The fault soak", "sh", 1, "e2e/docs_e2e_test.go TestDocsLongRuns"},
	{"docs/testing.md", "The fault soak", "sh", 1, "cmd/zksched-bench/docs_test.go TestDocsBenchCommands"},
	{"docs/workflows.md", "A first workflow", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/workflows.md", "Waiting for a condition: sensors", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/workflows.md", "Cross-workflow waits", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/workflows.md", "Assets: data-aware runs", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/workflows.md", "Webhook triggers", "sh", 1, "e2e/examples_e2e_test.go TestDocsExamples"},
	{"docs/workflows.md", "Editor support", "sh", 1, "cmd/zksched/schema_test.go TestDocsSchemaCommands"},
	{"docs/workflows.md", "Agents that wait for a person", "sh", 1, "e2e/agent_review_test.go TestDocsAgentReview"},
}

// commandLangs are the languages of the fenced blocks that hold commands.
var commandLangs = []string{"sh", "bash", "console"}

// TestDocCommandBlocksAreRun checks docCommandBlocks against the pages and the tests: every
// command block of the pages has a row, every row names a block that is there, and the test a
// row names exists and reads that block with DocBlock.
func TestDocCommandBlocksAreRun(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join(RepoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(RepoRoot(), "README.md"))
	covered := map[string]bool{} // "file:line" of each block a row names
	for _, row := range docCommandBlocks {
		line, err := blockLine(row)
		if err != nil {
			t.Errorf("%v: %v", row, err)
			continue
		}
		covered[fmt.Sprintf("%s:%d", row.file, line)] = true
		if err := runsBlock(row); err != nil {
			t.Errorf("%s, block %d of %q: %v", row.file, row.n, row.heading, err)
		}
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		file, _ := filepath.Rel(RepoRoot(), page)
		file = filepath.ToSlash(file)
		heading := ""
		for i, l := range markdownLines(string(data)) {
			if l.level != 0 {
				heading = l.title
			}
			lang, isFence := strings.CutPrefix(strings.TrimSpace(l.text), "```")
			if !isFence || !isCommandLang(lang) || covered[fmt.Sprintf("%s:%d", file, i+1)] {
				continue
			}
			if opening(string(data), i) {
				t.Errorf("%s:%d: the ```%s block under %q is run by no test: run it as printed in one and add it to docCommandBlocks", file, i+1, lang, heading)
			}
		}
	}
}

func isCommandLang(lang string) bool {
	for _, l := range commandLangs {
		if lang == l {
			return true
		}
	}
	return false
}

// opening says whether line i of text is a fence that opens a block.
func opening(text string, i int) bool {
	open := false
	for j, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "```") {
			continue
		}
		if j == i {
			return !open
		}
		open = !open
	}
	return false
}

// blockLine returns the line (counting from 1) of the opening fence of the block a row names.
func blockLine(row docCommandBlock) (int, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), filepath.FromSlash(row.file)))
	if err != nil {
		return 0, err
	}
	lines := markdownLines(string(data))
	start, level := -1, 0
	for i, l := range lines {
		if l.level != 0 && l.title == row.heading {
			start, level = i, l.level
			break
		}
	}
	if start < 0 {
		return 0, fmt.Errorf("no heading %q: the block is gone", row.heading)
	}
	n := 0
	for i := start + 1; i < len(lines); i++ {
		if lines[i].level != 0 && lines[i].level <= level {
			break
		}
		if lines[i].code && strings.TrimSpace(lines[i].text) == "```"+row.lang && opening(string(data), i) {
			if n++; n == row.n {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("the section has %d ```%s blocks: the block is gone", n, row.lang)
}

// runsBlock checks that what a row names runs its block: .ci/run runs bin/test.sh, or the
// named test function exists in its file and calls DocBlock for the row's block.
func runsBlock(row docCommandBlock) error {
	if row.runBy == ".ci/run" {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), ".ci", "run"))
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), "bin/test.sh") {
			return fmt.Errorf(".ci/run does not run bin/test.sh")
		}
		return nil
	}
	file, name, ok := strings.Cut(row.runBy, " ")
	if !ok || !strings.HasSuffix(file, "_test.go") || !strings.HasPrefix(name, "Test") {
		return fmt.Errorf("runBy %q: want \"path/x_test.go TestName\" or \".ci/run\"", row.runBy)
	}
	data, err := os.ReadFile(filepath.Join(RepoRoot(), filepath.FromSlash(file)))
	if err != nil {
		return err
	}
	src := string(data)
	start := strings.Index(src, "\nfunc "+name+"(t *testing.T) {\n")
	if start < 0 {
		return fmt.Errorf("%s has no func %s", file, name)
	}
	body, _, _ := strings.Cut(src[start+1:], "\n}\n")
	call := regexp.MustCompile(`testenv\.DocBlock\(t,\s*` + regexp.QuoteMeta(strconv.Quote(row.file)) + `,\s*` +
		regexp.QuoteMeta(strconv.Quote(row.heading)) + `,\s*` + regexp.QuoteMeta(strconv.Quote(row.lang)) + `,\s*` +
		strconv.Itoa(row.n) + `\)`)
	if !call.MatchString(body) {
		return fmt.Errorf("%s: %s does not call testenv.DocBlock(t, %q, %q, %q, %d)", file, name, row.file, row.heading, row.lang, row.n)
	}
	return nil
}
