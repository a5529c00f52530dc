package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestTokenFileSharedByMastersStartingTogether: masters of one user starting at once all
// end with the one token the first wrote, in a file of mode 0600.
func TestTokenFileSharedByMastersStartingTogether(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "api-token")
	const masters = 16
	tokens := make([]string, masters)
	created := make([]bool, masters)
	var wg sync.WaitGroup
	for i := range masters {
		wg.Go(func() {
			var err error
			if tokens[i], created[i], err = ensureTokenFile(path); err != nil {
				t.Errorf("master %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	n := 0
	for i := range masters {
		if created[i] {
			n++
		}
		if tokens[i] != tokens[0] || len(tokens[i]) < 32 {
			t.Errorf("master %d has token %q, master 0 %q; want one token of at least 32 characters", i, tokens[i], tokens[0])
		}
	}
	if n != 1 {
		t.Errorf("%d masters created the file, want 1", n)
	}
	if st, err := os.Stat(path); err != nil || st.Mode() != 0o600 {
		t.Fatalf("the token file: %v, %v; want mode 0600", st.Mode(), err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the folder holds %d files, want the token file alone", len(entries))
	}
}

// TestTokenFileReadableByOthersIsRefused: a token file its group or others may read, or an
// empty one, is not used.
func TestTokenFileReadableByOthersIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		mode    os.FileMode
		content string
		want    string
	}{
		{"group-readable", 0o640, "0123456789abcdef0123\n", "has mode 0640: its group or others may read or change the admin token; chmod 600"},
		{"world-readable", 0o644, "0123456789abcdef0123\n", "has mode 0644"},
		{"empty", 0o600, "\n", "is empty"},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ensureTokenFile(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
