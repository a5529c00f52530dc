package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

func TestDocSection(t *testing.T) {
	t.Parallel()
	const page = "# Page\n\nintro\n\n## One\n\n```sh\nfirst\n```\n\n" +
		"```yaml\n# a comment, no heading\nkey: 1\n```\n\n### Inner\n\n```sh\nsecond\n```\n\n" +
		"## Two\n\n```sh\nthird\n```\n"
	for _, tt := range []struct {
		heading string
		sh      []string
	}{
		{"Page", []string{"first\n", "second\n", "third\n"}},
		{"One", []string{"first\n", "second\n"}},
		{"Inner", []string{"second\n"}},
		{"Two", []string{"third\n"}},
	} {
		section, err := docSection(page, tt.heading)
		if err != nil {
			t.Fatalf("docSection(%q): %v", tt.heading, err)
		}
		if got := fencedBlocks(section, "sh"); !slices.Equal(got, tt.sh) {
			t.Errorf("the sh blocks under %q = %q, want %q", tt.heading, got, tt.sh)
		}
	}
	section, _ := docSection(page, "One")
	if got, want := fencedBlocks(section, "yaml"), []string{"# a comment, no heading\nkey: 1\n"}; !slices.Equal(got, want) {
		t.Errorf("the yaml blocks under One = %q, want %q", got, want)
	}
	for _, heading := range []string{"a comment, no heading", "Three", "One "} {
		if _, err := docSection(page, heading); err == nil {
			t.Errorf("docSection(%q) found a section, want an error", heading)
		}
	}
	if _, err := docSection(page+"\n## One\n", "One"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a heading there twice: %v, want an error saying so", err)
	}
}

// TestDocLinks checks that every relative link of the README and the pages under docs/ leads
// to a file of the repository, and that a link's #anchor names a heading of its page.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	root := RepoRoot()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	anchors := map[string][]string{} // a page's anchors, by its path
	anchorsOf := func(path string) []string {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(data))
		anchors[path] = a
		return a
	}
	links := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, page)
		for _, link := range markdownLinks(string(data)) {
			if regexp.MustCompile(`^[a-z]+:`).MatchString(link) {
				continue // a URL
			}
			links++
			path, anchor, _ := strings.Cut(link, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: the link %q leads to no file: %v", name, link, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: the link %q has an anchor into a file that is not Markdown", name, link)
				continue
			}
			if !slices.Contains(anchorsOf(target), anchor) {
				t.Errorf("%s: the link %q names no heading of %s; its anchors are %q", name, link,
					filepath.Base(target), anchorsOf(target))
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative link found: the pattern misses them")
	}
}

// markdownLinks returns the targets of the links and images of a Markdown text, outside
// fenced blocks and code spans.
func markdownLinks(text string) []string {
	codeSpan := regexp.MustCompile("`[^`]*`")
	link := regexp.MustCompile(`\]\(([^()\s]+)\)`)
	var out []string
	for _, l := range markdownLines(text) {
		if l.code {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(l.text, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a Markdown text's headings: the heading's
// text as shown, lower-cased, without punctuation (all but letters, digits, '_', '-' and
// spaces), spaces turned to '-'; a repeated anchor gets "-1", "-2", … in order.
func headingAnchors(text string) []string {
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	var out []string
	seen := map[string]int{}
	for _, l := range markdownLines(text) {
		if l.level == 0 {
			continue
		}
		shown := linkText.ReplaceAllString(l.title, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(shown) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				b.WriteRune(r)
			}
		}
		anchor := b.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor]++
			anchor += "-" + strconv.Itoa(n)
		} else {
			seen[anchor] = 1
		}
		out = append(out, anchor)
	}
	return out
}
