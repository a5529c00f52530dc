package dao

import (
	"context"
	"strconv"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao/internal/wakeup"
)

// Wakeup is one notification: Payload names what changed (a workflow instance id for masters,
// a worker group for workers). Rescan is set after the listening connection was re-established:
// notifications may have been missed, so look at everything.
type Wakeup = wakeup.Wakeup

// Listener delivers wake-ups on C. When the consumer falls behind, wake-ups are dropped rather
// than queued without bound, and a Rescan is delivered in their place once there is room.
type Listener = wakeup.Listener

// WakeupNew is the masters' payload for a new instance of an uncapped workflow: claim, with no
// need to look at the waiting instances of capped workflows, as payload "" also asks.
const WakeupNew = "new"

// ListenMaster listens for changes masters act on: new instances of uncapped workflows
// (payload WakeupNew), new or released instances and freed capacity of capped workflows
// (payload "") and tasks that reached a terminal state (payload: the workflow instance ids).
func (db *DB) ListenMaster(log zerolog.Logger) *Listener {
	return wakeup.Listen(db.dsn, log, db.channels.master)[0]
}

// ListenWorker listens, on one connection, for newly queued tasks (tasks; payload: the worker
// group) and for kill requests of running tasks (kills; payload: the id of the worker that
// runs the task). PostgreSQL wakes every listening connection of the database at every
// NOTIFY, whatever its channel, so each connection fewer is a process fewer woken per queued
// task.
func (db *DB) ListenWorker(log zerolog.Logger) (tasks, kills *Listener) {
	ls := wakeup.Listen(db.dsn, log, db.channels.task, db.channels.kill)
	return ls[0], ls[1]
}

// wakeupSQL sends wake-ups: $1 their channels, $2 their payloads.
const wakeupSQL = `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS x(c, p)`

// sendNotes sends wake-ups on db, the notifier's own connection (see Open): the wakeup.Batcher's
// statement.
func sendNotes(db *sqlx.DB) wakeup.SendFunc {
	return func(ctx context.Context, channels, payloads []string) error {
		_, err := db.ExecContext(ctx, wakeupSQL, pq.Array(channels), pq.Array(payloads))
		return err
	}
}

// wake announces a change: at once (through the notifier) on the pool, after the commit in
// a transaction. Nothing is sent for a transaction that rolls back.
func (q *Queries) wake(channel, payload string) {
	if q.notes != nil {
		*q.notes = append(*q.notes, wakeup.Note{Channel: channel, Payload: payload})
		return
	}
	if q.nf != nil {
		q.nf.Send(wakeup.Note{Channel: channel, Payload: payload})
	}
}

// wakeGroups wakes the workers of each of groups, whose tasks went back to the queue, once.
func (q *Queries) wakeGroups(groups []string) {
	seen := make(map[string]bool, len(groups))
	for _, g := range groups {
		if !seen[g] {
			seen[g] = true
			q.wake(q.ch.task, g)
		}
	}
}

// wakeEnded wakes the masters of the workflow instances whose tasks ended, a few hundred ids
// to a wake-up (NOTIFY's payload is at most 8000 bytes).
func (q *Queries) wakeEnded(ids map[int64]struct{}) {
	var b []byte
	n := 0
	for id := range ids {
		if n > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
		if n++; n == wakeIDsPerPayload {
			q.wake(q.ch.master, string(b))
			b, n = b[:0], 0
		}
	}
	if n > 0 {
		q.wake(q.ch.master, string(b))
	}
}
