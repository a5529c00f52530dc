// Package zkpatch_test checks that the patched ZooKeeper client in internal/third_party/zk is
// upstream github.com/go-zookeeper/zk v1.0.4 with the patches in internal/third_party/zk/patches
// applied in order, and nothing else (see internal/third_party/zk/PATCHES.md). The test lives
// outside the copy so that the copy, which go.mod's replace points at, holds only the module.
package zkpatch_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	upstreamModule = "github.com/go-zookeeper/zk@v1.0.4"
	// upstreamSum is v1.0.4's hash in go.sum's form (sum.golang.org has it): the test compares
	// with upstream's own source, whichever way the go command fetched it.
	upstreamSum = "h1:DPzxraQx7OrPyXq2phlGlNSIyWEsAox0RJmjTseMV6I="
	copyDir     = "../zk"
	patchesDir  = "../zk/patches"
)

// leftOut are the upstream files the copy does not carry: its tests, examples, and CI and
// editor settings. A name ending in "/" is a folder; "*_test.go" is any test file.
var leftOut = []string{
	"*_test.go", "_examples/", ".github/", ".devcontainer/", ".codecov.yaml", ".gitattributes",
	".gitignore", "CONTRIBUTION.md", "Makefile",
}

// addedByCopy are the copy's files that are not upstream's: the account of the patches and
// the patches themselves.
var addedByCopy = []string{"PATCHES.md", "patches/"}

func TestCopyIsUpstreamWithPatches(t *testing.T) {
	t.Parallel()
	want := readTree(t, upstreamDir(t), leftOut)

	patches, err := filepath.Glob(filepath.Join(patchesDir, "[0-9][0-9][0-9][0-9]-*.patch"))
	if err != nil || len(patches) == 0 {
		t.Fatalf("no patches in %s (%v)", patchesDir, err)
	}
	sort.Strings(patches)
	account, err := os.ReadFile(filepath.Join(copyDir, "PATCHES.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range patches {
		name := filepath.Base(p)
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		header, files, err := parsePatch(string(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.TrimSpace(header) == "" || strings.Contains(header, "WRITE ME") {
			t.Errorf("%s: its header does not say what the patch does and why", name)
		}
		if !bytes.Contains(account, []byte(name)) {
			t.Errorf("%s: PATCHES.md does not describe it", name)
		}
		for _, f := range files {
			if matches(f.path, leftOut) {
				t.Errorf("%s: changes %s, which the copy leaves out", name, f.path)
				continue
			}
			got, err := f.apply(want[f.path])
			if err != nil {
				t.Fatalf("%s does not apply to upstream with the patches before it: %s: %v", name, f.path, err)
			}
			if got == nil {
				delete(want, f.path)
			} else {
				want[f.path] = got
			}
		}
	}

	got := readTree(t, copyDir, addedByCopy)
	var differ []string
	for _, p := range union(want, got) {
		w, inWant := want[p]
		g, inGot := got[p]
		switch {
		case !inGot:
			differ = append(differ, p+": missing from the copy")
		case !inWant:
			differ = append(differ, p+": only in the copy")
		case !bytes.Equal(w, g):
			differ = append(differ, fmt.Sprintf("%s: differs, from line %d", p, firstDifferentLine(w, g)))
		}
	}
	if len(differ) > 0 {
		t.Errorf("internal/third_party/zk is not upstream %s with its %d patches applied:\n\t%s\n"+
			"write the change into the patches: internal/third_party/zk/patches/regen.sh, see PATCHES.md",
			upstreamModule, len(patches), strings.Join(differ, "\n\t"))
	}
}

// upstreamDir returns the upstream module's folder in the module cache, downloading it if it is
// not there yet. Without it the test cannot run: that fails under CI and skips elsewhere (a
// machine without network).
func upstreamDir(t *testing.T) string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf("cannot fetch upstream %s to compare the copy with: %s", upstreamModule, fmt.Sprintf(format, args...))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (under CI=true this fails)")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		unavailable("%v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", upstreamModule)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &mod); err != nil || jerr != nil || mod.Error != "" || mod.Dir == "" {
		reason := cmp.Or(mod.Error, strings.TrimSpace(stderr.String()), fmt.Sprint(cmp.Or(err, jerr)))
		unavailable("go mod download: %s", reason)
	}
	if mod.Sum != upstreamSum {
		t.Fatalf("go mod download %s: hash %s, want %s", upstreamModule, mod.Sum, upstreamSum)
	}
	return mod.Dir
}

// readTree returns the files under dir by their slash-separated path, leaving out those that
// skip matches. Each entry of skip must match something: the lists stay exact.
func readTree(t *testing.T, dir string, skip []string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	used := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		for _, s := range skip {
			if match(rel, s) {
				used[s] = true
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skip {
		if !used[s] {
			t.Errorf("%s has no %s, which the test leaves out of the comparison", dir, s)
		}
	}
	return files
}

func matches(p string, skip []string) bool {
	for _, s := range skip {
		if match(p, s) || strings.HasSuffix(s, "/") && strings.HasPrefix(p, s) {
			return true
		}
	}
	return false
}

// match reports whether the path p (a folder's ends in "/") is the entry s of leftOut or
// addedByCopy.
func match(p, s string) bool {
	if strings.HasPrefix(s, "*") {
		ok, _ := path.Match(s, path.Base(p))
		return ok && !strings.HasSuffix(p, "/")
	}
	return p == s
}

func union(a, b map[string][]byte) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func firstDifferentLine(a, b []byte) int {
	la, lb := lines(a), lines(b)
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// lines splits text into lines that keep their "\n" (a last line without one has none).
func lines(text []byte) []string {
	l := strings.SplitAfter(string(text), "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// filePatch is one file's part of a unified diff.
type filePatch struct {
	path   string // as the "+++" line names it, without its first element ("b/")
	delete bool   // the "+++" line names /dev/null
	hunks  []hunk
}

// hunk is one "@@" section: the lines it takes out at oldStart and those it puts in their
// place, which start at newStart in the result (for an empty range, the line before it).
type hunk struct {
	oldStart, newStart int
	old, new           []string
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// parsePatch splits a patch into the text before its first file's diff and the files' diffs,
// as patch -p1 reads them.
func parsePatch(text string) (header string, files []filePatch, err error) {
	ls := lines([]byte(text))
	var cur *filePatch
	for i := 0; i < len(ls); i++ {
		l := ls[i]
		switch {
		case strings.HasPrefix(l, "--- ") && i+1 < len(ls) && strings.HasPrefix(ls[i+1], "+++ "):
			if files == nil {
				header = strings.Join(ls[:i], "")
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(ls[i+1], "+++ "), "\n"), "\t")
			f := filePatch{path: name, delete: name == "/dev/null"}
			if f.delete {
				name, _, _ = strings.Cut(strings.TrimSuffix(strings.TrimPrefix(l, "--- "), "\n"), "\t")
			}
			_, f.path, _ = strings.Cut(name, "/")
			if f.path == "" {
				return "", nil, fmt.Errorf("line %d: no a/ or b/ before the file name %q", i+1, name)
			}
			files = append(files, f)
			cur = &files[len(files)-1]
			i++
		case strings.HasPrefix(l, "@@ ") && cur != nil:
			m := hunkHeader.FindStringSubmatch(l)
			if m == nil {
				return "", nil, fmt.Errorf("line %d: not a hunk header: %q", i+1, l)
			}
			h := hunk{oldStart: atoi(m[1]), newStart: atoi(m[3])}
			oldLen, newLen := 1, 1
			if m[2] != "" {
				oldLen = atoi(m[2])
			}
			if m[4] != "" {
				newLen = atoi(m[4])
			}
			// lastOld and lastNew say whether the line read last went to old or new, for a
			// "\ No newline at end of file" after it.
			var lastOld, lastNew bool
			for len(h.old) < oldLen || len(h.new) < newLen || i+1 < len(ls) && strings.HasPrefix(ls[i+1], `\`) {
				i++
				if i == len(ls) {
					return "", nil, fmt.Errorf("%s: hunk %q ends early", cur.path, strings.TrimSpace(l))
				}
				body := ls[i]
				switch body[0] {
				case ' ', '\n':
					body = strings.TrimPrefix(body, " ")
					h.old, h.new, lastOld, lastNew = append(h.old, body), append(h.new, body), true, true
				case '-':
					h.old, lastOld, lastNew = append(h.old, body[1:]), true, false
				case '+':
					h.new, lastOld, lastNew = append(h.new, body[1:]), false, true
				case '\\':
					if lastOld {
						h.old[len(h.old)-1] = strings.TrimSuffix(h.old[len(h.old)-1], "\n")
					}
					if lastNew {
						h.new[len(h.new)-1] = strings.TrimSuffix(h.new[len(h.new)-1], "\n")
					}
				default:
					return "", nil, fmt.Errorf("%s: line %d in hunk %q: %q", cur.path, i+1, strings.TrimSpace(l), body)
				}
			}
			if len(h.old) != oldLen || len(h.new) != newLen {
				return "", nil, fmt.Errorf("%s: hunk %q does not hold the lines it counts", cur.path, strings.TrimSpace(l))
			}
			cur.hunks = append(cur.hunks, h)
		default:
			// Text between files ("diff", "index" lines) and after the last one.
			cur = nil
		}
	}
	if len(files) == 0 {
		return "", nil, fmt.Errorf("no diff in it")
	}
	return header, files, nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// apply returns the file old (nil if there is none) with the hunks applied, or nil for a file
// the patch deletes. A hunk must match exactly where it says: the check allows no fuzz and no
// offset.
func (f filePatch) apply(old []byte) ([]byte, error) {
	ls := lines(old)
	var out []string
	pos := 0
	for _, h := range f.hunks {
		start := h.oldStart - 1
		if len(h.old) == 0 {
			start = h.oldStart
		}
		if start < pos || start+len(h.old) > len(ls) || strings.Join(ls[start:start+len(h.old)], "") != strings.Join(h.old, "") {
			return nil, fmt.Errorf("hunk at line %d does not match", h.oldStart)
		}
		out = append(out, ls[pos:start]...)
		newStart := len(out) + 1
		if len(h.new) == 0 {
			newStart--
		}
		if h.newStart != newStart {
			return nil, fmt.Errorf("hunk at line %d puts its lines at %d, not %d", h.oldStart, newStart, h.newStart)
		}
		out = append(out, h.new...)
		pos = start + len(h.old)
	}
	out = append(out, ls[pos:]...)
	if f.delete {
		if len(out) > 0 {
			return nil, fmt.Errorf("deletes the file but leaves %d lines", len(out))
		}
		return nil, nil
	}
	return []byte(strings.Join(out, "")), nil
}
