package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/internal/testenv"
)

// TestShellCompletion runs the completion scripts in bash, zsh and fish against a master
// process: docs/cli.md's block as printed (in bash, through the function complete -F names),
// then each shell's script on the same lines. Ids come from the master named by
// ZKSCHED_SERVER; without one, or with one that does not answer, there are none and no error.
func TestShellCompletion(t *testing.T) {
	t.Parallel()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if _, err := exec.LookPath(shell); err != nil {
			t.Fatalf("%s is not installed (bin/test.sh installs it): %v", shell, err)
		}
	}
	e := setupE2E(t, nil, "")
	master := e.Master("master")
	e.Worker("worker")
	waitReady(t, master.Port)
	url := fmt.Sprintf("http://127.0.0.1:%d", master.Port)
	f := e.file(t, "held.yaml", "name: held\ntasks:\n  - {name: review, type: wait}\n")
	out, code := e.Run("submit", f)
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	wf := firstID(t, out)
	waitUntil(t, 60*time.Second, "review to wait", func() bool { return e.tasks(t, wf)["review"].State == dao.TaskWaiting })
	review := strconv.FormatInt(e.tasks(t, wf)["review"].ID, 10)
	home := quickstartHome(t, e)

	// sh runs script in shell with the binary under test as zksched; its output, trimmed.
	sh := func(shell, script string, env ...string) string {
		t.Helper()
		cmd := exec.Command(shell, "-c", script)
		cmd.Env = append(append(append(os.Environ(), e.cliPath(t), "HOME="+home), e.Env...), env...)
		cmd.Dir = repoRoot()
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", shell, err, script, b)
		}
		return strings.TrimSpace(string(b))
	}
	docs := strings.ReplaceAll(testenv.DocBlock(t, "docs/cli.md", "Shell completion", "sh", 1), "http://127.0.0.1:5678", url)
	bash := func(env []string, words ...string) string {
		return sh("bash", fmt.Sprintf(`%s
COMP_WORDS=(%s); COMP_CWORD=%d; _zksched; printf '%%s\n' "${COMPREPLY[@]}"`, docs, shellWords(words), len(words)-1), env...)
	}
	zsh := func(env []string, words ...string) string {
		// Outside a completion widget: _describe and _files print what they would offer.
		return sh("zsh", fmt.Sprintf(`zksched completion zsh > $HOME/_zksched
compdef() { :; }; _files() { print -- '<files>'; }; _describe() { print -l -- "${(@)${(@P)2}%%%%:*}"; }
source $HOME/_zksched
words=(%s); CURRENT=%d; _zksched`, shellWords(words), len(words)), env...)
	}
	fish := func(env []string, words ...string) string {
		return sh("fish", fmt.Sprintf(`zksched completion fish | source; complete -C%s | string replace -r '\t.*' ''; true`,
			fishQuote(strings.Join(words, " "))), env...)
	}

	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"zksched", "st"}, "status\nstop"},
		{[]string{"zksched", "logs", "--fo"}, "--follow"},
		{[]string{"zksched", "schedule", "en"}, "enable"},
		{[]string{"zksched", "status", ""}, strconv.FormatInt(wf, 10)},
		{[]string{"zksched", "signal", ""}, review},
	} {
		if got := bash(nil, tc.words...); got != tc.want {
			t.Errorf("bash: %q completes to %q; want %q", tc.words, got, tc.want)
		}
		if got := zsh([]string{"ZKSCHED_SERVER=" + url}, tc.words...); got != tc.want {
			t.Errorf("zsh: %q completes to %q; want %q", tc.words, got, tc.want)
		}
		if got := fish([]string{"ZKSCHED_SERVER=" + url}, tc.words...); got != tc.want {
			t.Errorf("fish: %q completes to %q; want %q", tc.words, got, tc.want)
		}
	}
	// A file where a file is wanted.
	if got := bash(nil, "zksched", "submit", "examples/dem"); got != "examples/demo.yaml" {
		t.Errorf("bash: submit examples/dem completes to %q; want examples/demo.yaml", got)
	}
	if got := zsh(nil, "zksched", "define", ""); got != "<files>" {
		t.Errorf("zsh: define completes to %q; want its files", got)
	}
	// No master answering: no ids, no error, quickly.
	start := time.Now()
	if got := fish([]string{"ZKSCHED_SERVER=http://127.0.0.1:1"}, "zksched", "status", ""); got != "" {
		t.Errorf("fish with no master answering: %q; want nothing", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("completion with no master answering took %v", d)
	}
	if got := zsh(nil, "zksched", "status", ""); got != "" {
		t.Errorf("zsh with no master configured: %q; want nothing", got)
	}
	if _, err := os.Stat(filepath.Join(home, "_zksched")); err != nil {
		t.Error(err)
	}
}

// shellWords quotes words for a bash or zsh array.
func shellWords(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
	}
	return strings.Join(q, " ")
}

// fishQuote quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
