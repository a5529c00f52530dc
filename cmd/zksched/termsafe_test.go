package main

import (
	"strings"
	"testing"
)

func TestTermWriterEscapesControls(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain line\n\tindented\n":          "plain line\n\tindented\n",
		"\x1b[2J\x1b[H":                     `\x1b[2J\x1b[H`,
		"\x1b]0;pwned\x07":                  `\x1b]0;pwned\x07`,
		"\x1b]52;c;cGF5bG9hZA==\x1b\\":      `\x1b]52;c;cGF5bG9hZA==\x1b\`,
		"secret\rcover":                     `secret\x0dcover`,
		"a\x00b\x08c\x7f":                   `a\x00b\x08c\x7f`,
		"\u009b31m C1 CSI, \u009d OSC":      `\u009b31m C1 CSI, \u009d OSC`,
		"raw 8-bit CSI \x9b31m, bad \xff":   `raw 8-bit CSI \x9b31m, bad \xff`,
		"née ☃ \U0001F600 stay as they are": "née ☃ \U0001F600 stay as they are",
	} {
		var b strings.Builder
		tw := &termWriter{w: &b}
		if _, err := tw.WriteString(in); err != nil {
			t.Fatal(err)
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != want {
			t.Errorf("%q: wrote %q, want %q", in, got, want)
		}
	}
}

// TestTermWriterHoldsACutRune: a character cut between two parts of a log is written whole,
// and a log that ends inside one has the bytes escaped.
func TestTermWriterHoldsACutRune(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tw := &termWriter{w: &b}
	snow := "☃"
	for _, part := range []string{"a" + snow[:1], snow[1:2], snow[2:] + "b", "\xe2\x98"} {
		if _, err := tw.WriteString(part); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), `a☃b\xe2\x98`; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
}
