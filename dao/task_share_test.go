package dao_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
)

// burst queues n tasks at once in group "default" (in pool when it is not ""), the first
// high of them with priority 5, the others 0.
func (b *testBundle) burst(t *testing.T, prefix string, n, high int, pool string) {
	t.Helper()
	b.queuePooled(t, prefix, n, pool, false)
	if high > 0 {
		if _, err := b.db.SQL().Exec(`UPDATE task_instance SET priority = 5 WHERE id IN (
			SELECT id FROM task_instance WHERE name LIKE $1 || '%' ORDER BY id LIMIT $2)`, prefix, high); err != nil {
			t.Fatal(err)
		}
	}
}

// ageQueued makes every queued task claimable since an hour ago: no longer part of a burst.
func (b *testBundle) ageQueued(t *testing.T) {
	t.Helper()
	if _, err := b.db.SQL().Exec(`UPDATE task_instance SET queued_at = now() - interval '1 hour' WHERE state = 'queued'`); err != nil {
		t.Fatal(err)
	}
}

// shareOf is the Share of worker among workers, all of slots slots, of tasks fresh for a minute.
func shareOf(worker string, workers []string, slots int) dao.Share {
	s := dao.Share{Slots: slots, Peers: map[string]int{}, Fresh: time.Minute}
	for _, w := range workers {
		if w != worker {
			s.Peers[w] = slots
		}
	}
	return s
}

// TestClaimShareSpreadsABurst: idle workers that claim one after the other from a burst each
// take their share, so that the burst ends spread evenly over them; a burst larger than
// their free slots fills every slot.
func TestClaimShareSpreadsABurst(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		workers, slots, tasks int
		want                  []int // claimed by each worker, in claim order
	}{
		{2, 4, 4, []int{2, 2}},
		{2, 4, 5, []int{3, 2}},
		{3, 4, 6, []int{2, 2, 2}},
		{3, 4, 9, []int{3, 3, 3}},
		{3, 4, 2, []int{1, 1, 0}},
		{2, 4, 12, []int{4, 4}},
		{3, 2, 7, []int{2, 2, 2}},
		{2, 64, 1, []int{1, 0}},
	} {
		t.Run(fmt.Sprintf("%d workers of %d slots, %d tasks", c.workers, c.slots, c.tasks), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.burst(t, "t", c.tasks, 0, "")
			var workers []string
			for i := range c.workers {
				workers = append(workers, fmt.Sprint("w", i+1))
			}
			for i, w := range workers {
				got, err := b.db.TaskClaimQueuedUnpooledShare(b.ctx, w, []string{"default"}, c.slots, shareOf(w, workers, c.slots))
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != c.want[i] {
					t.Errorf("%s claimed %d, want %d (all: %v)", w, len(got), c.want[i], c.want)
				}
			}
		})
	}
}

// TestClaimShareOfConcurrentClaims: a worker whose claim runs while another's has not committed
// still takes its own share, beside the tasks the other holds.
func TestClaimShareOfConcurrentClaims(t *testing.T) {
	t.Parallel()
	for _, pooled := range []bool{false, true} {
		t.Run(fmt.Sprint("pooled ", pooled), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.burst(t, "t", 4, 0, "")
			claim := func(q *dao.Queries, w string) int {
				share := shareOf(w, []string{"w1", "w2"}, 4)
				claim := q.TaskClaimQueuedUnpooledShare
				if pooled {
					claim = q.TaskClaimQueuedShare
				}
				got, err := claim(b.ctx, w, []string{"default"}, 4, share)
				if err != nil {
					t.Fatal(err)
				}
				return len(got)
			}
			var first, second int
			if err := b.db.Tx(b.ctx, func(q *dao.Queries) error {
				first = claim(q, "w1")
				second = claim(b.db.Queries, "w2") // on another connection, while w1's claim is open
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if first != 2 || second != 2 {
				t.Errorf("claimed %d and %d, want 2 and 2", first, second)
			}
		})
	}
}

// TestClaimShareCountsWhatRunsOnEach: a share evens out what runs on each worker, not only
// the burst, and takes the best tasks first.
func TestClaimShareCountsWhatRunsOnEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// w2 runs 1 task of its 4 slots: of a burst of 4, w1 takes 3 and leaves 1 (3 and 2 run).
	b.burst(t, "old", 1, 0, "")
	if got, err := b.db.TaskClaimQueuedUnpooled(b.ctx, "w2", []string{"default"}, 1); err != nil || len(got) != 1 {
		t.Fatalf("w2 claimed %d, %v", len(got), err)
	}
	b.burst(t, "new", 4, 2, "")
	got, err := b.db.TaskClaimQueuedUnpooledShare(b.ctx, "w1", []string{"default"}, 4, shareOf("w1", []string{"w1", "w2"}, 4))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("w1 claimed %d, want 3", len(got))
	}
	for _, ti := range got[:2] {
		if ti.Priority != 5 {
			t.Errorf("w1 claimed %s of priority %d first, want the two of priority 5", ti.Name, ti.Priority)
		}
	}
	// A peer whose every slot is taken leaves the whole burst to the others.
	if got, err := b.db.TaskClaimQueuedUnpooled(b.ctx, "w2", []string{"default"}, 1); err != nil || len(got) != 1 {
		t.Fatalf("w2 claimed %d, %v", len(got), err)
	}
	b.burst(t, "more", 2, 0, "")
	if got, err := b.db.TaskClaimQueuedUnpooledShare(b.ctx, "w3", []string{"default"}, 4,
		dao.Share{Slots: 4, Peers: map[string]int{"w2": 2}, Fresh: time.Minute}); err != nil || len(got) != 2 {
		t.Errorf("w3 beside a full w2 claimed %d, %v; want the burst's 2", len(got), err)
	}
}

// TestClaimShareLeavesOutFullPeers: a peer whose every slot is taken counts for nothing: the
// workers with free slots share the burst evenly.
func TestClaimShareLeavesOutFullPeers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.burst(t, "busy", 4, 0, "")
	if got, err := b.db.TaskClaimQueuedUnpooled(b.ctx, "x2", []string{"default"}, 4); err != nil || len(got) != 4 {
		t.Fatalf("x2 claimed %d, %v", len(got), err)
	}
	b.burst(t, "even", 4, 0, "")
	for _, w := range []string{"x1", "x3"} {
		got, err := b.db.TaskClaimQueuedUnpooledShare(b.ctx, w, []string{"default"}, 4, shareOf(w, []string{"x1", "x2", "x3"}, 4))
		if err != nil || len(got) != 2 {
			t.Errorf("%s beside a full x2 claimed %d, %v; want 2", w, len(got), err)
		}
	}
}

// TestClaimShareLeavesNothingStranded: what a share leaves for a worker that never comes for
// it (listed, but gone) is claimed once it has waited Fresh; without peers, in a backlog and
// in a burst of more than 1,000 tasks a claim takes all its free slots can hold.
func TestClaimShareLeavesNothingStranded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.burst(t, "t", 4, 0, "")
	share := shareOf("w1", []string{"w1", "gone"}, 4)
	got, err := b.db.TaskClaimQueuedShare(b.ctx, "w1", []string{"default"}, 4, share)
	if err != nil || len(got) != 2 {
		t.Fatalf("w1 claimed %d, %v; want its share, 2", len(got), err)
	}
	if again, err := b.db.TaskClaimQueuedShare(b.ctx, "w1", []string{"default"}, 2, share); err != nil || len(again) != 0 {
		t.Fatalf("w1 claimed %d, %v at its next look; want none: the 2 left are the other's share", len(again), err)
	}
	b.ageQueued(t)
	if rest, err := b.db.TaskClaimQueuedShare(b.ctx, "w1", []string{"default"}, 2, share); err != nil || len(rest) != 2 {
		t.Fatalf("w1 claimed %d, %v once the share had waited; want the 2 left", len(rest), err)
	}

	b.burst(t, "alone", 4, 0, "")
	if got, err := b.db.TaskClaimQueuedShare(b.ctx, "w5", []string{"default"}, 4, dao.Share{}); err != nil || len(got) != 4 {
		t.Errorf("a worker without peers claimed %d, %v; want 4", len(got), err)
	}
	// A backlog (its first task waited) is claimed as if alone, even beside idle peers.
	b.burst(t, "backlog", 4, 0, "")
	b.ageQueued(t)
	b.burst(t, "fresh", 4, 0, "")
	if got, err := b.db.TaskClaimQueuedShare(b.ctx, "w6", []string{"default"}, 6, shareOf("w6", []string{"w6", "w7"}, 6)); err != nil || len(got) != 6 {
		t.Errorf("a worker claimed %d of a backlog, %v; want 6", len(got), err)
	}
	// So is a burst of more than 1,000, whatever the others' free slots (its count stops there).
	b.burst(t, "large", 1100, 0, "")
	many := dao.Share{Slots: 100, Peers: map[string]int{}, Fresh: time.Minute}
	for i := range 20 {
		many.Peers[fmt.Sprint("p", i)] = 100
	}
	if got, err := b.db.TaskClaimQueuedShare(b.ctx, "w8", []string{"default"}, 100, many); err != nil || len(got) != 100 {
		t.Errorf("a worker beside 20 idle ones claimed %d of a burst of 1,100, %v; want 100", len(got), err)
	}
}

// TestClaimShareKeepsPoolLimits: a burst in a pool spreads too, and never past the pool's room.
func TestClaimShareKeepsPoolLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.db.PoolSetLimits(b.ctx, map[string]int{"wide": 10, "narrow": 1}); err != nil {
		t.Fatal(err)
	}
	b.burst(t, "w", 4, 0, "wide")
	workers := []string{"w1", "w2"}
	for _, w := range workers {
		if got, err := b.db.TaskClaimQueuedShare(b.ctx, w, []string{"default"}, 4, shareOf(w, workers, 4)); err != nil || len(got) != 2 {
			t.Errorf("%s claimed %d of the wide pool's burst, %v; want 2", w, len(got), err)
		}
	}
	b.burst(t, "n", 4, 0, "narrow")
	for i, w := range []string{"w3", "w4"} {
		got, err := b.db.TaskClaimQueuedShare(b.ctx, w, []string{"default"}, 4, shareOf(w, []string{"w3", "w4"}, 4))
		if err != nil || len(got) != 1-i {
			t.Errorf("%s claimed %d of the narrow pool's burst, %v; want %d", w, len(got), err, 1-i)
		}
	}
	if p := b.pools(t)["narrow"]; p.Running != 1 {
		t.Errorf("narrow runs %d, want 1", p.Running)
	}
}
