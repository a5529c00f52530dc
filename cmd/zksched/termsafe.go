package main

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// termWriter writes a task's log to a terminal with its control characters made visible, so
// that a log cannot move the cursor, clear the screen, retitle the window, write to the
// clipboard or hide the lines before it: ESC (and with it every CSI and OSC sequence), the
// other C0 controls but newline and tab, DEL and bytes that are not UTF-8 are written as
// \xHH, the C1 controls as \u00HH. A UTF-8 sequence cut between two writes is held until
// the next.
type termWriter struct {
	w io.Writer
	// pending is an incomplete UTF-8 sequence that ended the last write.
	pending []byte
}

// WriteString writes s escaped.
func (t *termWriter) WriteString(s string) (int, error) {
	p := append(t.pending, s...)
	var out []byte
	out, t.pending = appendTermSafe(nil, p, false)
	_, err := t.w.Write(out)
	return len(s), err
}

// Flush writes what a cut UTF-8 sequence left pending, escaped byte by byte.
func (t *termWriter) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	out, _ := appendTermSafe(nil, t.pending, true)
	t.pending = nil
	_, err := t.w.Write(out)
	return err
}

// appendTermSafe appends p to dst with its control characters escaped. Unless final, an
// incomplete UTF-8 sequence that ends p is not written but returned.
func appendTermSafe(dst, p []byte, final bool) ([]byte, []byte) {
	for len(p) > 0 {
		r, n := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && n <= 1:
			if !final && !utf8.FullRune(p) {
				return dst, append([]byte(nil), p...)
			}
			dst = fmt.Appendf(dst, `\x%02x`, p[0])
		case r == '\n' || r == '\t':
			dst = append(dst, byte(r))
		case r < 0x20 || r == 0x7f:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, p[:n]...)
		}
		p = p[n:]
	}
	return dst, nil
}
