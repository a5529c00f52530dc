package dao

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// notifier sends the hot paths' wake-ups (new workflow instances, queued tasks, ended tasks)
// after the writes they announce have committed, from a goroutine of its own that sends
// whatever is pending in one statement.
//
// A NOTIFY inside a writing transaction holds a database-wide lock from its commit's start
// to its end, WAL flush included, so every notifying commit waits for the one before it and
// group commit stops: under a steady stream of submissions the writers would queue on that
// lock. Sent from here, after the commit, a wake-up holds up no writer.
//
// A wake-up is a hint: every listener also polls and rescans after a reconnect, so one lost
// here (the process dies between commit and send, or the send fails) costs latency, never a
// task.
type notifier struct {
	db *sqlx.DB

	mu      sync.Mutex
	pending map[note]struct{}
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type note struct{ channel, payload string }

func newNotifier(db *sqlx.DB) *notifier {
	n := &notifier{db: db, pending: map[note]struct{}{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

// send queues notes to be sent as soon as the notifier is free.
func (n *notifier) send(notes ...note) {
	if len(notes) == 0 {
		return
	}
	n.mu.Lock()
	for _, nt := range notes {
		n.pending[nt] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.wake:
		case <-n.stop:
			n.flush() // what was committed before Close is still announced
			return
		}
		n.flush()
	}
}

func (n *notifier) flush() {
	n.mu.Lock()
	if len(n.pending) == 0 {
		n.mu.Unlock()
		return
	}
	chans, payloads := make([]string, 0, len(n.pending)), make([]string, 0, len(n.pending))
	for nt := range n.pending {
		chans, payloads = append(chans, nt.channel), append(payloads, nt.payload)
	}
	clear(n.pending)
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Dropped on error: the listeners' polls and rescans cover it (see the type's comment).
	_, _ = n.db.ExecContext(ctx, `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS x(c, p)`,
		pq.Array(chans), pq.Array(payloads))
}

func (n *notifier) close() {
	n.once.Do(func() { close(n.stop) })
	<-n.done
	n.db.Close()
}

// notify announces a change: at once (through the notifier) on the pool, after the commit in
// a transaction. Nothing is sent for a transaction that rolls back.
func (q *Queries) notify(channel, payload string) {
	if q.notes != nil {
		*q.notes = append(*q.notes, note{channel, payload})
		return
	}
	if q.nf != nil {
		q.nf.send(note{channel, payload})
	}
}

// notifyEnded wakes the masters of the workflow instances whose tasks ended, a few hundred ids
// to a wake-up (NOTIFY's payload is at most 8000 bytes).
func (q *Queries) notifyEnded(ids map[int64]struct{}) {
	var b []byte
	n := 0
	for id := range ids {
		if n > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
		if n++; n == notifyIDsPerPayload {
			q.notify(q.ch.master, string(b))
			b, n = b[:0], 0
		}
	}
	if n > 0 {
		q.notify(q.ch.master, string(b))
	}
}
