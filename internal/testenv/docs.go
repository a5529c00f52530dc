package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// RepoRoot is the top of the checkout this package was built from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// DocSection returns the text under a heading of a Markdown file of the repository (file is
// relative to the repository's root, such as "docs/cli.md"; heading is the heading's text
// without its #s), up to the next heading of the same or a higher level. A test that runs
// what the documentation shows finds it here, so a page can be regrouped without touching the
// tests as long as the heading stays. The test fails at once when the file or the heading is
// missing, or the heading is there twice.
func DocSection(t testing.TB, file, heading string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(), filepath.FromSlash(file)))
	if err != nil {
		t.Fatalf("the documentation page: %v", err)
	}
	section, err := docSection(string(data), heading)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return section
}

// DocBlocks returns the fenced blocks (```lang) of the given language in DocSection's
// section, in order, each without its fences.
func DocBlocks(t testing.TB, file, heading, lang string) []string {
	t.Helper()
	return fencedBlocks(DocSection(t, file, heading), lang)
}

// DocBlock returns the n-th (counting from 1) fenced block of the given language in
// DocSection's section, without its fences; the test fails at once when there is none.
func DocBlock(t testing.TB, file, heading, lang string, n int) string {
	t.Helper()
	blocks := DocBlocks(t, file, heading, lang)
	if n < 1 || n > len(blocks) {
		t.Fatalf("%s: the section %q has %d ```%s blocks; want block %d", file, heading, len(blocks), lang, n)
	}
	return blocks[n-1]
}

// markdownLine is a line of a Markdown file, with its heading level (0: not a heading, or
// inside a fenced block, where a shell or YAML comment starts with '#' too).
type markdownLine struct {
	text  string
	code  bool   // a fence or a line inside a fenced block
	level int    // 1 for "# …", 2 for "## …", …
	title string // the heading's text
}

// markdownLines splits a Markdown text into lines and finds its headings.
func markdownLines(text string) []markdownLine {
	var out []markdownLine
	fenced := false
	for _, line := range strings.SplitAfter(text, "\n") {
		l := markdownLine{text: line}
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(trimmed, "```"):
			fenced = !fenced
			l.code = true
		case fenced:
			l.code = true
		default:
			level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
			if level >= 1 && level <= 6 && strings.HasPrefix(trimmed[level:], " ") {
				l.level, l.title = level, strings.TrimSpace(trimmed[level:])
			}
		}
		out = append(out, l)
	}
	return out
}

// docSection is DocSection on a text.
func docSection(text, heading string) (string, error) {
	lines := markdownLines(text)
	start, level := -1, 0
	for i, l := range lines {
		if l.level == 0 || l.title != heading {
			continue
		}
		if start >= 0 {
			return "", fmt.Errorf("the heading %q is there twice", heading)
		}
		start, level = i+1, l.level
	}
	if start < 0 {
		return "", fmt.Errorf("no heading %q", heading)
	}
	var b strings.Builder
	for _, l := range lines[start:] {
		if l.level != 0 && l.level <= level {
			break
		}
		b.WriteString(l.text)
	}
	return b.String(), nil
}

// fencedBlocks returns the text of each block fenced by "```lang" and "```".
func fencedBlocks(section, lang string) []string {
	var out []string
	var block strings.Builder
	fenced, ours := false, false
	for _, line := range strings.SplitAfter(section, "\n") {
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case !fenced && strings.HasPrefix(trimmed, "```"):
			fenced, ours = true, trimmed == "```"+lang
			block.Reset()
		case fenced && trimmed == "```":
			if ours {
				out = append(out, block.String())
			}
			fenced = false
		case fenced:
			block.WriteString(line)
		}
	}
	return out
}
