package worker

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/zksched/zksched/dao"
)

const (
	testDSN      = "postgres://zksched:pw-0123456789@db:5432/zksched"
	testPassword = "pw-0123456789"
	testKey      = "sk-abcdefghijklmnop"
)

func TestMaskerString(t *testing.T) {
	t.Parallel()
	m := newMasker([]string{testPassword, testDSN, testKey, "short", "", testKey})
	for _, tc := range []struct{ in, want string }{
		{"nothing secret", "nothing secret"},
		{"dsn " + testDSN + " end", "dsn *** end"},                                               // the DSN whole, not its password inside
		{"pw=" + testPassword + "," + testKey + testKey, "pw=***,******"},                        // side by side
		{"a short secret stays: short", "a short secret stays: short"},                           // under minSecretLen
		{"almost " + testKey[:len(testKey)-1] + ".", "almost " + testKey[:len(testKey)-1] + "."}, // a prefix is no secret
		{"pp" + testPassword, "pp***"},
		{"", ""},
	} {
		if got := m.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	r := dao.AttemptResult{Error: "connect to " + testDSN + ": refused", Output: new(string)}
	*r.Output = "key " + testKey
	m.result(&r)
	if r.Error != "connect to ***: refused" || *r.Output != "key ***" {
		t.Errorf("result masked to error %q, output %q", r.Error, *r.Output)
	}
	if got := newMasker(nil).String(testDSN); got != testDSN {
		t.Errorf("a masker of no secrets changed %q to %q", testDSN, got)
	}
}

// TestMaskWriterAcrossWrites writes a text full of secrets in pieces cut at every place, and
// in random pieces: what comes out is the text masked as a whole, and nothing is held back
// longer than it may be the start of a secret.
func TestMaskWriterAcrossWrites(t *testing.T) {
	t.Parallel()
	m := newMasker([]string{testDSN, testPassword, testKey})
	text := "start " + testDSN + " mid p" + testPassword + "\n" + testKey + "pw-01 " + testKey[:5] + " end " + testKey
	want := m.String(text)
	if strings.Contains(want, testPassword) || strings.Contains(want, testKey) {
		t.Fatalf("String left a secret: %q", want)
	}
	for cut := range len(text) + 1 {
		var out bytes.Buffer
		w := m.writer(&out)
		w.Write([]byte(text[:cut]))
		w.Write([]byte(text[cut:]))
		w.Close()
		if out.String() != want {
			t.Fatalf("cut at %d: wrote %q, want %q", cut, out.String(), want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var out bytes.Buffer
		w := m.writer(&out)
		for rest := text; rest != ""; {
			n := min(len(rest), 1+rng.IntN(8))
			w.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		w.Close()
		if out.String() != want {
			t.Fatalf("random pieces: wrote %q, want %q", out.String(), want)
		}
	}
	// Output that cannot begin a secret goes through at once; a possible beginning waits.
	var out bytes.Buffer
	w := m.writer(&out)
	w.Write([]byte("progress 10%"))
	if out.String() != "progress 10%" {
		t.Errorf("held back %q of output no secret starts with", strings.TrimPrefix("progress 10%", out.String()))
	}
	w.Write([]byte(" sk-abc"))
	if out.String() != "progress 10% " {
		t.Errorf("wrote %q before knowing whether sk-abc begins a secret", out.String())
	}
	w.Close()
	if out.String() != "progress 10% sk-abc" {
		t.Errorf("after Close: %q", out.String())
	}
}

// TestMaskWriterStreams: two streams written at once through Stream each mask their own
// secrets, though their writes interleave in the log.
func TestMaskWriterStreams(t *testing.T) {
	t.Parallel()
	m := newMasker([]string{testKey})
	var out syncBuf
	w := m.writer(&out)
	var wg sync.WaitGroup
	for range 2 {
		s := w.Stream()
		wg.Go(func() {
			for range 100 {
				s.Write([]byte(testKey[:7]))
				s.Write([]byte(testKey[7:] + "\n"))
			}
			s.Close()
		})
	}
	wg.Wait()
	w.Close()
	if got := out.String(); strings.Contains(got, testKey[:7]) || strings.Count(got, "***\n") != 200 {
		t.Errorf("interleaved streams wrote %q", got)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchmarkMaskWriter measures masking a task's log: 4 KiB writes of ordinary text with a
// secret now and then, against four secrets.
func BenchmarkMaskWriter(b *testing.B) {
	m := newMasker([]string{testDSN, testPassword, testKey, "another-secret-value"})
	line := []byte(strings.Repeat("2026-11-24T19:15:03Z INFO processed record 12345 of table public.orders ok\n", 54) + "leaked " + testKey + "\n")
	chunk := line[:4096]
	w := m.writer(io.Discard)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		w.Write(chunk)
	}
}
