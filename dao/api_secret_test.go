package dao_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/zksched/zksched/dao/daotest"
)

// TestAPISecretIsStoredOnce: masters asking for a secret at once all get the value the first
// of them stored, and later askers too.
func TestAPISecretIsStoredOnce(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	got := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			v, err := db.APISecretGetOrCreate(ctx, "csrf", bytes.Repeat([]byte(fmt.Sprint(i)), 32))
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for i, v := range got {
		if len(v) != 32 || !bytes.Equal(v, got[0]) {
			t.Fatalf("asker %d got %q, asker 0 %q", i, v, got[0])
		}
	}
	if v, err := db.APISecretGetOrCreate(ctx, "csrf", bytes.Repeat([]byte("x"), 32)); err != nil || !bytes.Equal(v, got[0]) {
		t.Errorf("a later asker got %q, %v; want %q", v, err, got[0])
	}
	if _, err := db.APISecretGetOrCreate(ctx, "short", []byte("too short")); err == nil {
		t.Errorf("a secret under 32 bytes was stored")
	}
}
