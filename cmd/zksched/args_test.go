package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestParseTakesFlagsAnywhere: flags before, between and after the arguments; a flag's value
// that looks like a flag or an argument; "--" ending the flags.
func TestParseTakesFlagsAnywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		output string
		fail   bool
		params string
		rest   []string
	}{
		{args: []string{"12", "--output", "x", "--fail"}, output: "x", fail: true, rest: []string{"12"}},
		{args: []string{"--output", "x", "12", "--fail"}, output: "x", fail: true, rest: []string{"12"}},
		{args: []string{"--fail", "--output=x", "12"}, output: "x", fail: true, rest: []string{"12"}},
		{args: []string{"a", "--param", "k=v", "b", "--param=l=w", "c"}, params: "k=v l=w", rest: []string{"a", "b", "c"}},
		// A value is the word after its flag, whatever it looks like.
		{args: []string{"--output", "--fail", "12"}, output: "--fail", rest: []string{"12"}},
		{args: []string{"--output", "12", "13"}, output: "12", rest: []string{"13"}},
		{args: []string{"--output", "-"}, output: "-"},
		// A bool flag takes no separate value.
		{args: []string{"--fail", "true"}, fail: true, rest: []string{"true"}},
		{args: []string{"--fail=false", "12"}, rest: []string{"12"}},
		// After "--", everything is an argument; "-" alone is one anywhere.
		{args: []string{"12", "--", "--fail", "-x"}, rest: []string{"12", "--fail", "-x"}},
		{args: []string{"-", "--fail"}, fail: true, rest: []string{"-"}},
		{args: []string{"--output", "--", "--fail", "12"}, output: "--", fail: true, rest: []string{"12"}},
	} {
		fs := newFlags("test", io.Discard)
		output := fs.String("output", "", "")
		fail := fs.Bool("fail", false, "")
		params := paramFlags{}
		fs.Var(params, "param", "")
		if err := parse(fs, tc.args); err != nil {
			t.Errorf("parse %q: %v", tc.args, err)
			continue
		}
		var got []string
		for k, v := range params {
			got = append(got, k+"="+v)
		}
		slices.Sort(got)
		if *output != tc.output || *fail != tc.fail || strings.Join(got, " ") != tc.params || !slices.Equal(fs.Args(), tc.rest) {
			t.Errorf("parse %q: output %q fail %v params %q args %q; want %q %v %q %q",
				tc.args, *output, *fail, got, fs.Args(), tc.output, tc.fail, tc.params, tc.rest)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"12", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"12", "--output"}, "flag needs an argument: -output"},
		{[]string{"12", "---output", "x"}, "bad flag syntax: ---output"},
		{[]string{"--param", "novalue", "12"}, `want k=v, got "novalue"`},
	} {
		fs := newFlags("test", io.Discard)
		fs.String("output", "", "")
		fs.Var(paramFlags{}, "param", "")
		err := parse(fs, tc.args)
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse %q: %v; want a usage error %q", tc.args, err, tc.want)
		}
	}
	fs := newFlags("test", io.Discard)
	if err := parse(fs, []string{"12", "--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("parse 12 --help: %v; want flag.ErrHelp", err)
	}
}

// TestUsageErrorPrintedOnce: a mistake on the command line is told once, with the command's
// usage line, on standard error, and not with the flag package's list of flags; --help
// prints that list on standard output.
func TestUsageErrorPrintedOnce(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := run([]string{"submit", "--bogus", "x.yaml"}, &out, &errOut); code != exitUsage {
		t.Fatalf("submit --bogus: exit %d, want %d", code, exitUsage)
	}
	want := "zksched submit: flag provided but not defined: -bogus\nusage: zksched submit "
	if out.Len() != 0 || !strings.HasPrefix(errOut.String(), want) || strings.Count(errOut.String(), "\n") != 2 {
		t.Errorf("submit --bogus printed\nstdout %q\nstderr %q\nwant only the mistake and the usage line on stderr", out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"submit", "--help"}, &out, &errOut); code != exitOK {
		t.Fatalf("submit --help: exit %d", code)
	}
	if !strings.Contains(out.String(), "-param value") || errOut.Len() != 0 {
		t.Errorf("submit --help printed\nstdout %q\nstderr %q\nwant the flags on stdout", out.String(), errOut.String())
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0 tasks", 1: "1 task", 2: "2 tasks"} {
		if got := count(n, "task", "tasks"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
