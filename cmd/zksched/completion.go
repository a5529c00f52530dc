package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/zksched/zksched/conf"
)

// completionUsage is the usage of `zksched completion`.
const completionUsage = "bash|zsh|fish"

// completeCommand is the hidden command the completion scripts run: `zksched __complete
// WORD… CURRENT` prints what may take the place of CURRENT, the word being completed, after
// the words before it (those after "zksched"). Its first line is a directive, completeFiles
// (let the shell complete a file name) or completeWords; each line after it is a candidate,
// a tab and a description after it where there is one.
const completeCommand = "__complete"

// The directives of completeCommand's first line.
const (
	completeFiles = ":files"
	completeWords = ":words"
)

// completeTimeout bounds what completion asks a master: a shell waits for it.
const completeTimeout = 2 * time.Second

// runCompletion is `zksched completion bash|zsh|fish`: the shell's completion script, which
// completes commands, flags, files, schedule and asset names and instance ids by running
// `zksched __complete`.
func runCompletion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("completion", stdout)
	shell, rest, err := parseSub(fs, args, completionUsage, "bash", "zsh", "fish")
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", rest)}
	}
	_, err = io.WriteString(stdout, completionScripts[shell])
	return err
}

// completionScripts are the scripts of runCompletion by shell. Each passes the words of the
// command line up to the cursor to completeCommand and offers what it prints.
var completionScripts = map[string]string{
	"bash": `# bash completion for zksched: source <(zksched completion bash)
_zksched() {
    local cur=${COMP_WORDS[COMP_CWORD]} line directive
    local -a out
    mapfile -t out < <(zksched __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
    directive=${out[0]}
    COMPREPLY=()
    if [[ $directive == :files ]]; then
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        compopt -o filenames 2>/dev/null
        return 0
    fi
    for line in "${out[@]:1}"; do
        COMPREPLY+=("${line%%$'\t'*}")
    done
}
complete -F _zksched zksched
`,
	"zsh": `#compdef zksched
# zsh completion for zksched: zksched completion zsh > "${fpath[1]}/_zksched"
_zksched() {
    local -a out cands
    local line
    out=("${(@f)$(zksched __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    if [[ ${out[1]} == :files ]]; then
        _files
        return
    fi
    for line in "${(@)out[2,-1]}"; do
        [[ -n $line ]] || continue
        cands+=("${${line%%$'\t'*}//:/\\:}:${line#*$'\t'}")
    done
    _describe 'zksched' cands
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _zksched "$@"
else
    compdef _zksched zksched
fi
`,
	"fish": `# fish completion for zksched: zksched completion fish > ~/.config/fish/completions/zksched.fish
function __zksched_complete
    set -l words (commandline -opc) (commandline -ct)
    set -l out (zksched __complete $words[2..-1] 2>/dev/null)
    if test "$out[1]" = ":files"
        __fish_complete_path (commandline -ct)
    else
        printf '%s\n' $out[2..-1]
    end
end
complete -c zksched -f -a '(__zksched_complete)'
`,
}

// runComplete is completeCommand: see there. It never fails, so that a shell shows nothing
// rather than an error; the names and ids come from the API when a server is configured
// (--server among the words, or ZKSCHED_SERVER), and there are none when not.
func runComplete(ctx context.Context, args []string, stdout, _ io.Writer) error {
	files, cands := complete(ctx, args, os.Getenv("ZKSCHED_SERVER"))
	directive := completeWords
	if files {
		directive = completeFiles
	}
	fmt.Fprintln(stdout, directive)
	for _, c := range cands {
		fmt.Fprintln(stdout, c)
	}
	return nil
}

// complete returns what may replace the last of words (the word being completed, "" for a new
// one) after the others: whether it is a file name, else the candidates that start with it.
// server is the master to ask for names and ids unless the words give --server.
func complete(ctx context.Context, words []string, server string) (files bool, cands []string) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	if len(before) == 0 {
		var names []string
		for _, c := range commands() {
			names = append(names, c.name+"\t"+c.summary)
		}
		return false, withPrefix(names, cur)
	}
	c, ok := findCommand(before[0])
	if !ok {
		return false, nil
	}
	flags := flagsOf(c)
	args, values := positionals(before[1:], flags)
	if name, ok := pendingValue(before[1:], flags); ok {
		return completeValue(name, cur)
	}
	if strings.HasPrefix(cur, "-") && !slices.Contains(before, "--") {
		var names []string
		for name, f := range flags {
			names = append(names, "--"+name+"\t"+f.usage)
		}
		slices.Sort(names)
		return false, withPrefix(names, cur)
	}
	if s := values["server"]; s != "" {
		server = s
	}
	return completeArg(ctx, c.name, args, values, cur, server)
}

// findCommand returns the command called name.
func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// cliFlag is a flag of a command as its --help shows it.
type cliFlag struct {
	takesValue bool   // a value follows it (every flag but a boolean one)
	usage      string // the first line of its help
}

// flagLine is a flag's line in the flag package's help: "  -name" for a boolean flag,
// "  -name type" for one that takes a value.
var flagLine = regexp.MustCompile(`^  -([^\s=]+)( \S+)?$`)

// flagsOf returns the flags of c by name, read from what it prints for --help (the flag
// package's PrintDefaults).
func flagsOf(c command) map[string]cliFlag {
	var help bytes.Buffer
	_ = c.run(context.Background(), []string{"--help"}, &help, io.Discard)
	out := map[string]cliFlag{}
	lines := strings.Split(help.String(), "\n")
	for i, line := range lines {
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := cliFlag{takesValue: m[2] != ""}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "    \t") {
			f.usage = strings.TrimSpace(lines[i+1])
		}
		out[m[1]] = f
	}
	return out
}

// flagName returns the flag word names ("--json" → json; "--server=URL" → server, with its
// value), or ok false for a word that is no flag.
func flagName(word string) (name, value string, hasValue, ok bool) {
	if len(word) < 2 || word[0] != '-' || word == "--" {
		return "", "", false, false
	}
	name = strings.TrimPrefix(strings.TrimPrefix(word, "-"), "-")
	name, value, hasValue = strings.Cut(name, "=")
	return name, value, hasValue, true
}

// positionals splits words, the command's words before the one being completed, into its
// arguments and the values of its flags by name.
func positionals(words []string, flags map[string]cliFlag) (args []string, values map[string]string) {
	values = map[string]string{}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			return append(args, words[i+1:]...), values
		}
		name, value, hasValue, ok := flagName(w)
		if !ok {
			args = append(args, w)
			continue
		}
		switch {
		case hasValue:
			values[name] = value
		case flags[name].takesValue && i+1 < len(words):
			values[name] = words[i+1]
			i++
		default:
			values[name] = "true"
		}
	}
	return args, values
}

// pendingValue returns the flag whose value is being completed: the last of words (none
// after a "--") is a flag that takes one, with none given yet.
func pendingValue(words []string, flags map[string]cliFlag) (string, bool) {
	if len(words) == 0 {
		return "", false
	}
	for _, w := range words[:len(words)-1] {
		if w == "--" {
			return "", false
		}
	}
	name, _, hasValue, ok := flagName(words[len(words)-1])
	if !ok || hasValue {
		return "", false
	}
	return name, flags[name].takesValue
}

// fileFlags are the flags whose value is a file's name.
var fileFlags = []string{"config", "token-file", "users-file", "auth-file"}

// completeValue completes cur, the value of the flag name.
func completeValue(name, cur string) (bool, []string) {
	switch {
	case slices.Contains(fileFlags, name):
		return true, nil
	case name == "role":
		return false, withPrefix(conf.UserRoles, cur)
	}
	return false, nil
}

// subcommands are the first arguments of the commands that take one.
var subcommands = map[string][]string{
	"schedule":   {"list", "enable", "disable", "trigger"},
	"hooks":      {"list"},
	"asset":      {"emit"},
	"zk":         {"tree", "nodes"},
	"user":       {"add", "list", "remove"},
	"schema":     {"workflow"},
	"completion": {"bash", "zsh", "fish"},
}

// completeArg completes the argument after args of the command name.
func completeArg(ctx context.Context, name string, args []string, values map[string]string, cur, server string) (bool, []string) {
	remote := func(path, state string) []string {
		return withPrefix(remoteIDs(ctx, server, values["token-file"], path, state), cur)
	}
	if subs, ok := subcommands[name]; ok && len(args) == 0 {
		return false, withPrefix(subs, cur)
	}
	if len(args) > 1 || (len(args) == 1 && subcommands[name] == nil) {
		return false, nil
	}
	switch name {
	case "submit", "define":
		return true, nil
	case "schedule":
		if args[0] == "list" {
			return false, nil
		}
		return false, withPrefix(remoteNames(ctx, server, values["token-file"], "/api/v1/schedules", "schedules", "workflow"), cur)
	case "backfill":
		return false, withPrefix(remoteNames(ctx, server, values["token-file"], "/api/v1/schedules", "schedules", "workflow"), cur)
	case "asset":
		return false, withPrefix(remoteNames(ctx, server, values["token-file"], "/api/v1/assets", "assets", "asset"), cur)
	case "status":
		return false, remote("/api/v1/workflow-instances", "")
	case "stop":
		return false, remote("/api/v1/workflow-instances", "running")
	case "rerun":
		if values["workflow"] == "true" {
			return false, remote("/api/v1/workflow-instances", "")
		}
		return false, append(remote("/api/v1/task-instances", "failed"), remote("/api/v1/task-instances", "killed")...)
	case "signal":
		return false, remote("/api/v1/task-instances", "waiting")
	case "logs", "kill":
		return false, remote("/api/v1/task-instances", "")
	}
	return false, nil
}

// remoteIDs returns the ids of the newest instances a master lists at path (filtered by
// state unless ""), each with what it is; none when server is "" or the master does not
// answer in time.
func remoteIDs(ctx context.Context, server, tokenFile, path, state string) []string {
	var page struct {
		Items []struct {
			ID           int64  `json:"id"`
			Name         string `json:"name"`
			WorkflowName string `json:"workflow_name"`
			WorkflowID   int64  `json:"workflow_instance_id"`
			State        string `json:"state"`
		} `json:"items"`
	}
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if !ask(ctx, server, tokenFile, path+"?"+q.Encode(), &page) {
		return nil
	}
	var out []string
	for _, it := range page.Items {
		what := it.WorkflowName
		if it.Name != "" {
			what = fmt.Sprintf("%s of workflow instance %d", it.Name, it.WorkflowID)
		}
		out = append(out, fmt.Sprintf("%d\t%s (%s)", it.ID, what, it.State))
	}
	return out
}

// remoteNames returns the field of each entry of the list key of what a master answers at
// path, sorted; none when server is "" or the master does not answer in time.
func remoteNames(ctx context.Context, server, tokenFile, path, key, field string) []string {
	var answer map[string][]map[string]any
	if !ask(ctx, server, tokenFile, path, &answer) {
		return nil
	}
	var out []string
	for _, e := range answer[key] {
		if s, ok := e[field].(string); ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// ask decodes what the master at server answers a GET of path into out, within
// completeTimeout; false when there is no server or no good answer.
func ask(ctx context.Context, server, tokenFile, path string, out any) bool {
	if server == "" {
		return false
	}
	c, err := newAPIClient(server, tokenFile)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	return c.do(ctx, http.MethodGet, path, nil, out) == nil
}

// withPrefix returns the candidates (a value, maybe a tab and a description) whose value
// starts with prefix.
func withPrefix(cands []string, prefix string) []string {
	var out []string
	for _, c := range cands {
		if v, _, _ := strings.Cut(c, "\t"); strings.HasPrefix(v, prefix) {
			out = append(out, c)
		}
	}
	return out
}
