package wakeup

import (
	"context"
	"sync"
	"time"
)

// Note is one wake-up to send: a channel and its payload.
type Note struct{ Channel, Payload string }

// SendFunc sends notes, the channel and payload of each at the same index, in one statement.
type SendFunc func(ctx context.Context, channels, payloads []string) error

// Batcher sends wake-ups from a goroutine of its own, whatever is pending in one call of its
// SendFunc, each distinct note once.
//
// It is there for the hot paths' wake-ups (new workflow instances, queued tasks, ended tasks),
// sent after the writes they announce have committed: a NOTIFY inside a writing transaction
// holds a database-wide lock from its commit's start to its end, WAL flush included, so every
// notifying commit waits for the one before it and group commit stops; under a steady stream
// of submissions the writers would queue on that lock. Sent from here, after the commit, a
// wake-up holds up no writer.
//
// A wake-up the send drops (an error, or the process dies between commit and send) is lost:
// the listeners' polls cover it.
type Batcher struct {
	send SendFunc

	mu      sync.Mutex
	pending map[Note]struct{}
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// sendTimeout bounds one send, so a connection that hangs holds back only the wake-ups of
// that moment.
const sendTimeout = 5 * time.Second

// NewBatcher starts a Batcher that sends with send.
func NewBatcher(send SendFunc) *Batcher {
	b := &Batcher{send: send, pending: map[Note]struct{}{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// Send queues notes to be sent as soon as the Batcher is free.
func (b *Batcher) Send(notes ...Note) {
	if len(notes) == 0 {
		return
	}
	b.mu.Lock()
	for _, n := range notes {
		b.pending[n] = struct{}{}
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *Batcher) run() {
	defer close(b.done)
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			b.flush() // what was committed before Close is still announced
			return
		}
		b.flush()
	}
}

func (b *Batcher) flush() {
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	chans, payloads := make([]string, 0, len(b.pending)), make([]string, 0, len(b.pending))
	for n := range b.pending {
		chans, payloads = append(chans, n.Channel), append(payloads, n.Payload)
	}
	clear(b.pending)
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	_ = b.send(ctx, chans, payloads) // dropped on error: see the type's comment
}

// Close sends what is pending and stops the Batcher. Notes sent after Close are not sent.
func (b *Batcher) Close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}
