package registry

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/zksched/zksched/internal/signal"
)

// Peers follows the other workers registered under nodes/workers that serve every group a
// worker serves, with their slots: the workers a burst of its groups' tasks is spread over (the
// worker's claims take no more than their share while the others have free slots). A worker
// of some of the groups only is no peer: it could not take every task left to it. It reads
// a worker's data once, when the worker appears (its groups and slots never change), and
// drops it when its znode goes: at once through a children watch, and at the latest at the
// next resync, since watches can be lost across reconnects.
//
// A worker listed here is one whose session ZooKeeper still holds: a worker that died is
// listed until its session expires. The claims allow for that (a share not claimed within
// worker.spread-wait is anyone's), so Peers needs no liveness of its own.
type Peers struct {
	c      *Client
	self   string
	groups []string
	// resync is how often the membership is read again whatever the watch says.
	resync time.Duration
	log    zerolog.Logger

	mu    sync.Mutex
	slots map[string]int // replaced whole, never changed: Slots hands it out

	// updated is a test signal: Run signals it after each look at the membership.
	updated signal.Test[struct{}]
}

// peersResync is how often Peers reads the membership again in case a watch was lost: a dead
// worker listed past its expiry only delays its share by worker.spread-wait, so this can be
// slow.
const peersResync = 10 * time.Second

// NewPeers returns the Peers of worker self serving groups; Run keeps it current.
func (c *Client) NewPeers(self string, groups []string) *Peers {
	return &Peers{c: c, self: self, groups: slices.Clone(groups), resync: peersResync,
		log: c.log.With().Str("part", "peers").Logger(), slots: map[string]int{}}
}

// Slots returns the slots of every other registered worker that serves all of the groups,
// by id. The map is never changed once returned; the caller must not change it either.
func (p *Peers) Slots() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slots
}

// Run keeps the list current until ctx ends, then returns nil. A failed look (no session, a
// server that does not answer) keeps the last list and tries again a second later.
func (p *Peers) Run(ctx context.Context) error {
	known := map[string]int{} // every worker read: its slots, 0 when it is no peer
	for {
		changed, err := p.look(ctx, known)
		p.updated.Signal(struct{}{})
		wait := p.resync
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.log.Debug().Err(err).Msg("reading the workers failed; keeping the last list")
			wait = time.Second
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// look reads the registered workers, and the data of those it does not know yet, publishes
// the list and returns the children watch.
func (p *Peers) look(ctx context.Context, known map[string]int) (<-chan struct{}, error) {
	ids, changed, err := p.c.Members(ctx, RoleWorker)
	if err != nil {
		return nil, err
	}
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
		if _, ok := known[id]; ok || id == p.self {
			continue
		}
		info, err := p.c.MemberInfo(ctx, RoleWorker, id)
		var bad *DataError
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // gone already
		case errors.As(err, &bad):
			p.log.Warn().Err(err).Msg("a worker's data does not parse; bursts are spread without it")
			known[id] = 0
		case err != nil:
			return nil, err
		case !slices.ContainsFunc(p.groups, func(g string) bool { return !slices.Contains(info.Groups, g) }):
			known[id] = max(info.Slots, 0)
		default:
			known[id] = 0
		}
	}
	slots := map[string]int{}
	for id, n := range known {
		switch {
		case !listed[id]:
			delete(known, id)
		case n > 0:
			slots[id] = n
		}
	}
	p.mu.Lock()
	before := p.slots
	p.slots = slots
	p.mu.Unlock()
	if !maps.Equal(before, slots) {
		total := 0
		for _, n := range slots {
			total += n
		}
		p.log.Info().Int("peers", len(slots)).Int("peer_slots", total).Msg("the other workers of this one's groups changed; bursts are spread over them")
	}
	return changed, nil
}
