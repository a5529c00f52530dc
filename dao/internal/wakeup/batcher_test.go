package wakeup_test

import (
	"context"
	"sync"
	"testing"

	"github.com/zksched/zksched/dao/internal/wakeup"
)

// TestBatcherSendsEachNoteOnce: notes queued while a send is under way go out together in the
// next one, each distinct note once, and Close sends what is still pending.
func TestBatcherSendsEachNoteOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var sent []map[wakeup.Note]int
	started, release := make(chan struct{}), make(chan struct{})
	b := wakeup.NewBatcher(func(ctx context.Context, channels, payloads []string) error {
		mu.Lock()
		first := len(sent) == 0
		call := map[wakeup.Note]int{}
		for i := range channels {
			call[wakeup.Note{Channel: channels[i], Payload: payloads[i]}]++
		}
		sent = append(sent, call)
		mu.Unlock()
		if first {
			close(started)
			<-release
		}
		return nil
	})
	b.Send(wakeup.Note{Channel: "c", Payload: "first"})
	<-started
	for range 3 {
		b.Send(wakeup.Note{Channel: "c", Payload: "a"}, wakeup.Note{Channel: "d", Payload: "a"})
	}
	close(release)
	b.Close()
	mu.Lock()
	defer mu.Unlock()
	total := map[wakeup.Note]int{}
	for _, call := range sent {
		for n, k := range call {
			if k != 1 {
				t.Errorf("%v sent %d times in one call", n, k)
			}
			total[n] += k
		}
	}
	want := map[wakeup.Note]int{{Channel: "c", Payload: "first"}: 1, {Channel: "c", Payload: "a"}: 1, {Channel: "d", Payload: "a"}: 1}
	if len(total) != len(want) {
		t.Fatalf("sent %v, want %v", total, want)
	}
	for n, k := range want {
		if total[n] != k {
			t.Errorf("sent %v, want %v", total, want)
		}
	}
}
