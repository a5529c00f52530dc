package groupcommit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/zksched/zksched/dao/internal/groupcommit"
)

// double commits each request as twice its value, and records the batches it saw.
type double struct {
	mu      sync.Mutex
	batches [][]int
}

func (d *double) commit(batch []int) []groupcommit.Result[int] {
	d.mu.Lock()
	d.batches = append(d.batches, append([]int(nil), batch...))
	d.mu.Unlock()
	out := make([]groupcommit.Result[int], len(batch))
	for i, v := range batch {
		if v < 0 {
			out[i].Err = errors.New("negative")
			continue
		}
		out[i].Value = 2 * v
	}
	return out
}

// TestEachRequestGetsItsOwnResult: requests made together are committed in batches of at
// most the batch size, and each caller gets the result of its own request.
func TestEachRequestGetsItsOwnResult(t *testing.T) {
	t.Parallel()
	d := &double{}
	c := groupcommit.New(2, 7, d.commit)
	defer c.Close()
	const n = 100
	got, errs := make([]int, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v := i
			if i == 13 {
				v = -1
			}
			got[i], errs[i] = c.Do(context.Background(), v)
		})
	}
	wg.Wait()
	for i := range n {
		switch {
		case i == 13:
			if errs[i] == nil {
				t.Errorf("request %d: no error, want its own", i)
			}
		case errs[i] != nil || got[i] != 2*i:
			t.Errorf("request %d = %d, %v; want %d", i, got[i], errs[i], 2*i)
		}
	}
	seen := 0
	for _, b := range d.batches {
		if len(b) == 0 || len(b) > 7 {
			t.Errorf("a batch of %d", len(b))
		}
		seen += len(b)
	}
	if seen != n {
		t.Errorf("%d requests committed, want %d", seen, n)
	}
}

// TestEndedRequestIsLeftOut: a request whose context has ended returns its error and is not
// committed; a request to a closed Committer fails with ErrClosed.
func TestEndedRequestIsLeftOut(t *testing.T) {
	t.Parallel()
	d := &double{}
	c := groupcommit.New(1, 10, d.commit)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("request with an ended context: %v, want context.Canceled", err)
	}
	c.Close()
	if _, err := c.Do(context.Background(), 2); !errors.Is(err, groupcommit.ErrClosed) {
		t.Errorf("request after Close: %v, want ErrClosed", err)
	}
	for _, b := range d.batches {
		if len(b) > 0 {
			t.Errorf("committed %v, want nothing", b)
		}
	}
}
