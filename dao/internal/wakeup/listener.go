package wakeup

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"
	"github.com/rs/zerolog"
)

// Wakeup is one notification: Payload names what changed (a workflow instance id for masters,
// a worker group for workers). Rescan is set once the listening connection listens, at first
// and after it was re-established: notifications may have been missed, so look at everything.
type Wakeup struct {
	Payload string
	Rescan  bool
}

// Listener delivers wake-ups on C. When the consumer falls behind, wake-ups are dropped rather
// than queued without bound, and a Rescan is delivered in their place once there is room.
type Listener struct {
	C <-chan Wakeup
	l *sharedListener
}

// Listen listens on channels over one connection to dsn, with a Listener for each, in their
// order. It returns at once: the connection is made, and made again whenever it is lost, in
// the background, and the consumer polls meanwhile. Each Listener delivers a Rescan once the
// server listens on every channel, and after every reconnection: what was announced while
// nobody listened is owed to a look at everything.
func Listen(dsn string, log zerolog.Logger, channels ...string) []*Listener {
	name := strings.Join(channels, ",")
	pl := pq.NewListener(dsn, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
		switch ev {
		case pq.ListenerEventConnectionAttemptFailed, pq.ListenerEventDisconnected:
			log.Warn().Err(err).Str("channel", name).Msg("notification connection lost; polling meanwhile")
		case pq.ListenerEventReconnected:
			log.Info().Str("channel", name).Msg("notification connection re-established")
		}
	})
	shared := &sharedListener{l: pl}
	outs := make([]chan Wakeup, len(channels))
	ls := make([]*Listener, len(channels))
	index := make(map[string]int, len(channels))
	for i, ch := range channels {
		outs[i] = make(chan Wakeup, 1024)
		ls[i] = &Listener{C: outs[i], l: shared}
		index[ch] = i
	}
	// listening is closed once the server has acknowledged every channel.
	listening := make(chan struct{})
	go func() {
		// Listen blocks until the server acknowledges, which may be long if PostgreSQL is
		// down; the consumer polls meanwhile.
		for _, ch := range channels {
			if err := pl.Listen(ch); err != nil && err != pq.ErrChannelAlreadyOpen {
				log.Error().Err(err).Str("channel", ch).Msg("listen failed; polling only")
			}
		}
		close(listening)
	}()
	go func() {
		defer func() {
			for _, out := range outs {
				close(out)
			}
		}()
		// A wake-up dropped because the consumer fell behind is owed as a Rescan, delivered
		// as soon as there is room: the consumer then looks at everything.
		owed := make([]bool, len(outs))
		deliver := func(i int, w Wakeup) {
			if owed[i] {
				select {
				case outs[i] <- Wakeup{Rescan: true}:
					owed[i] = false
				default:
				}
			}
			select {
			case outs[i] <- w:
			default:
				owed[i] = true
			}
		}
		retry := time.NewTicker(100 * time.Millisecond)
		defer retry.Stop()
		for {
			select {
			case <-listening:
				// What was announced before the server listened for us was missed: the
				// consumer, which started before, looks at everything once more.
				listening = nil
				for i := range outs {
					deliver(i, Wakeup{Rescan: true})
				}
			case n, ok := <-pl.Notify:
				if !ok {
					return
				}
				if n == nil { // reconnected: anything may have been missed, on every channel
					for i := range outs {
						deliver(i, Wakeup{Rescan: true})
					}
					continue
				}
				if i, ok := index[n.Channel]; ok {
					deliver(i, Wakeup{Payload: n.Extra})
				}
			case <-retry.C:
				for i := range outs {
					if owed[i] {
						deliver(i, Wakeup{Rescan: true})
					}
				}
			}
		}
	}()
	return ls
}

// sharedListener closes a connection that several Listeners share once, at the first Close.
type sharedListener struct {
	l    *pq.Listener
	once sync.Once
	err  error
}

func (s *sharedListener) Close() error {
	s.once.Do(func() { s.err = s.l.Close() })
	return s.err
}

// Close stops listening; C is closed. Closing one of the Listeners of a connection closes
// them all.
func (l *Listener) Close() error {
	if err := l.l.Close(); err != nil {
		return fmt.Errorf("close listener: %w", err)
	}
	return nil
}
