package dao

import (
	"fmt"
	"time"

	"github.com/lib/pq"
	"github.com/rs/zerolog"
)

// Wakeup is one notification: Payload names what changed (a workflow instance id for masters,
// a worker group for workers). Rescan is set after the listening connection was re-established:
// notifications may have been missed, so look at everything.
type Wakeup struct {
	Payload string
	Rescan  bool
}

// Listener delivers wake-ups on C. When the consumer falls behind, wake-ups are dropped rather
// than queued without bound, and a Rescan is delivered in their place once there is room.
type Listener struct {
	C <-chan Wakeup
	l *pq.Listener
}

// ListenMaster listens for changes masters act on: new or released workflow instances
// (payload "") and tasks that reached a terminal state (payload: the workflow instance id).
func (db *DB) ListenMaster(log zerolog.Logger) *Listener { return db.listen(db.channels.master, log) }

// ListenTasks listens for newly queued tasks (payload: the worker group).
func (db *DB) ListenTasks(log zerolog.Logger) *Listener { return db.listen(db.channels.task, log) }

// ListenKills listens for kill requests of running tasks (payload: the id of the worker that
// runs the task).
func (db *DB) ListenKills(log zerolog.Logger) *Listener { return db.listen(db.channels.kill, log) }

func (db *DB) listen(channel string, log zerolog.Logger) *Listener {
	pl := pq.NewListener(db.dsn, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventConnectionAttemptFailed, pq.ListenerEventDisconnected:
			log.Warn().Err(err).Str("channel", channel).Msg("notification connection lost; polling meanwhile")
		case pq.ListenerEventReconnected:
			log.Info().Str("channel", channel).Msg("notification connection re-established")
		}
	})
	out := make(chan Wakeup, 1024)
	go func() {
		// Listen blocks until the server acknowledges, which may be long if PostgreSQL is
		// down; the consumer polls meanwhile.
		if err := pl.Listen(channel); err != nil && err != pq.ErrChannelAlreadyOpen {
			log.Error().Err(err).Str("channel", channel).Msg("listen failed; polling only")
		}
	}()
	go func() {
		defer close(out)
		// A wake-up dropped because the consumer fell behind is owed as a Rescan, delivered
		// as soon as there is room: the consumer then looks at everything.
		owed := false
		retry := time.NewTicker(100 * time.Millisecond)
		defer retry.Stop()
		for {
			var w Wakeup
			select {
			case n, ok := <-pl.Notify:
				if !ok {
					return
				}
				w = Wakeup{Rescan: true}
				if n != nil {
					w = Wakeup{Payload: n.Extra}
				}
			case <-retry.C:
				if !owed {
					continue
				}
				w = Wakeup{Rescan: true}
			}
			if owed {
				select {
				case out <- Wakeup{Rescan: true}:
					owed = false
				default:
				}
			}
			select {
			case out <- w:
			default:
				owed = true
			}
		}
	}()
	return &Listener{C: out, l: pl}
}

// Close stops listening; C is closed.
func (l *Listener) Close() error {
	if err := l.l.Close(); err != nil {
		return fmt.Errorf("close listener: %w", err)
	}
	return nil
}
