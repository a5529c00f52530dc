// Package examples holds the workflow files the documentation shows, with the scripts they
// run; e2e's TestDocsExamples submits each and checks what it comes to.
package examples

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/workflow"
)

// files returns the workflow files under examples/, by path relative to the repository.
func files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := testenv.RepoRoot()
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExamplesParse: every file under examples/ is a valid workflow, and every script it
// names in a command of a task, or of an agent's tool, run in the file's folder (workdir: .)
// is there, executable.
func TestExamplesParse(t *testing.T) {
	t.Parallel()
	script := regexp.MustCompile(`(?:^|[|;&]\s*)\./([\w.-]+)`)
	for path := range files(t) {
		spec, err := workflow.ParseFile(filepath.Join(testenv.RepoRoot(), path))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, task := range spec.Tasks {
			if task.Workdir != "." {
				continue
			}
			commands := []string{task.Command}
			for _, tool := range task.Tools {
				commands = append(commands, tool.Command)
			}
			for _, command := range commands {
				for _, m := range script.FindAllStringSubmatch(command, -1) {
					fi, err := os.Stat(filepath.Join(testenv.RepoRoot(), filepath.Dir(path), m[1]))
					if err != nil || fi.Mode()&0o111 == 0 {
						t.Errorf("%s: task %s runs ./%s, which is not an executable beside the file (%v)", path, task.Name, m[1], err)
					}
				}
			}
		}
	}
}

// TestDocsYAMLIsAnExample: every ```yaml block of the README and docs/ is a workflow file
// under examples/ or a part of one (its lines in a row, indented alike), so that what the
// docs show is what the examples' test runs; or else a config block, which must load.
func TestDocsYAMLIsAnExample(t *testing.T) {
	t.Parallel()
	examples := files(t)
	pages, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "*.md"))
	pages = append(pages, filepath.Join(testenv.RepoRoot(), "README.md"))
	blocks := 0
	for _, page := range pages {
		rel, _ := filepath.Rel(testenv.RepoRoot(), page)
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
			blocks++
			if in := containing(examples, block[1]); in != "" {
				continue
			}
			cfg := filepath.Join(t.TempDir(), "zksched.yaml")
			if err := os.WriteFile(cfg, []byte(block[1]), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := conf.Load(cfg, nil); err != nil {
				t.Errorf("%s: a yaml block that is part of no file under examples/ and no config that loads (%v):\n%s", rel, err, block[1])
			}
		}
	}
	if blocks < 20 {
		t.Errorf("found %d yaml blocks in the docs; the pattern has lost them", blocks)
	}
}

// containing returns the example whose lines include the block's lines in a row, each
// indented by the same amount more; "" if none does.
func containing(examples map[string]string, block string) string {
	want := strings.Split(strings.TrimRight(block, " \n"), "\n")
	// A block in a list item is indented with it.
	indent := len(want[0])
	for _, w := range want {
		if strings.TrimSpace(w) != "" {
			indent = min(indent, len(w)-len(strings.TrimLeft(w, " ")))
		}
	}
	for i, w := range want {
		want[i] = w[min(indent, len(w)):]
	}
	for path, text := range examples {
		lines := strings.Split(text, "\n")
		for i := range lines {
			if matchAt(lines[i:], want) {
				return path
			}
		}
	}
	return ""
}

func matchAt(lines, want []string) bool {
	if len(lines) < len(want) {
		return false
	}
	shift := len(lines[0]) - len(want[0])
	if shift < 0 || strings.TrimSpace(lines[0][:shift]) != "" {
		return false
	}
	for j, w := range want {
		l := lines[j]
		if len(l) < shift || strings.TrimSpace(l[:shift]) != "" || l[shift:] != w {
			return false
		}
	}
	return true
}
