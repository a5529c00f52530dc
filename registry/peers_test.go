package registry

import (
	"context"
	"maps"
	"testing"
	"time"
)

// runPeers runs p until the test ends, and returns its looks: the channel changed returns
// delivers once p has looked at the membership since it last delivered. The resync is left
// out: the watch alone must do.
func runPeers(t *testing.T, p *Peers) (changed func() <-chan struct{}) {
	t.Helper()
	p.resync = time.Hour
	p.updated.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p.updated.C
}

// TestPeersFollowTheWorkersOfTheGroups: a worker's peers are the other registered workers that
// serve every one of its groups, with their slots; one that deregisters leaves the list, one
// that registers joins it, without waiting for the resync.
func TestPeersFollowTheWorkersOfTheGroups(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	worker := func(name string, slots int, groups ...string) NodeInfo {
		info := nodeInfo(RoleWorker, name)
		info.Slots, info.Groups = slots, groups
		return info
	}
	register := func(info NodeInfo) *Registration {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := c.Register(ctx, info)
		if err != nil {
			t.Fatalf("Register %s: %v", info.ID, err)
		}
		t.Cleanup(func() { r.Close(context.Background()) })
		return r
	}
	self := register(worker("1", 8, "default"))
	two := register(worker("2", 4, "default"))
	register(worker("3", 8, "other"))
	four := worker("4", 3, "gpu", "default")
	register(four)
	register(nodeInfo(RoleMaster, "5"))

	p := c.NewPeers(self.ID(), []string{"default"})
	looked := runPeers(t, p)
	want := func(p *Peers, looked func() <-chan struct{}, what string, slots map[string]int) {
		t.Helper()
		waitUntil(t, 10*time.Second, what, looked, func() bool { return maps.Equal(p.Slots(), slots) })
	}
	want(p, looked, "the workers of group default", map[string]int{two.ID(): 4, four.ID: 3})

	if err := two.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want(p, looked, "worker 2 gone", map[string]int{four.ID: 3})
	six := register(worker("6", 16, "default"))
	want(p, looked, "worker 6 come", map[string]int{four.ID: 3, six.ID(): 16})

	// A worker of default and gpu has one peer: 6 serves default only, and could not take
	// a task of gpu left to it.
	gpu := c.NewPeers(register(worker("7", 2, "default", "gpu")).ID(), []string{"default", "gpu"})
	want(gpu, runPeers(t, gpu), "the workers of default and gpu", map[string]int{four.ID: 3})
}
