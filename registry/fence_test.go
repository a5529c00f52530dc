package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zksched/zksched/internal/testenv"
)

// leaderBundle is a test with an elected master on its own client.
type leaderBundle struct {
	*testBundle
	c *Client
	m *Registration
	e *Election
}

func setupLeader(t *testing.T) *leaderBundle {
	t.Helper()
	b := setup(t)
	c := b.dial(t, b.config())
	m := register(t, c, RoleMaster, "1")
	e := elect(t, m)
	waitLeader(t, e, 5*time.Second, true)
	return &leaderBundle{testBundle: b, c: c, m: m, e: e}
}

func TestFence(t *testing.T) {
	lb := setupLeader(t)
	c, ctx := lb.c, context.Background()
	wc := lb.dial(t, lb.config())
	w := register(t, wc, RoleWorker, "2")
	rec := fenceRecord(RoleWorker, w.ID(), lb.m.ID())

	if err := c.Fence(ctx, lb.e.ZnodePath(), rec); !errors.Is(err, ErrNodeRegistered) {
		t.Fatalf("Fence of a registered node: %v, want ErrNodeRegistered", err)
	}
	if err := c.Fence(ctx, lb.zk.Root+"/election/_c_gone-n_0000000099", rec); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Fence with a missing election znode: %v, want ErrNotLeader", err)
	}
	if _, found, err := c.Marker(ctx, RoleWorker, w.ID()); found || err != nil {
		t.Fatalf("Marker after refused fences: found %v, %v; want none", found, err)
	}

	wc.Close() // the worker's session ends and its znode goes
	if err := c.Fence(ctx, lb.e.ZnodePath(), rec); err != nil {
		t.Fatalf("Fence of a lost node: %v", err)
	}
	if err := c.Fence(ctx, lb.e.ZnodePath(), rec); !errors.Is(err, ErrAlreadyFenced) {
		t.Fatalf("second Fence: %v, want ErrAlreadyFenced", err)
	}
	got, found, err := c.Marker(ctx, RoleWorker, w.ID())
	if err != nil || !found || got.Phase != PhaseFenced || got.Leader != lb.m.ID() || !got.FencedAt.Equal(rec.FencedAt) {
		t.Fatalf("Marker = %+v, %v, %v; want %+v", got, found, err, rec)
	}

	rec.TasksRequeued = 3
	if err := c.FinishMarker(ctx, lb.zk.Root+"/election/_c_gone-n_0000000099", rec); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("FinishMarker with a missing election znode: %v, want ErrNotLeader", err)
	}
	if err := c.FinishMarker(ctx, lb.e.ZnodePath(), rec); err != nil {
		t.Fatalf("FinishMarker: %v", err)
	}
	got, _, err = c.Marker(ctx, RoleWorker, w.ID())
	if err != nil || got.Phase != PhaseFinished || got.FinishedAt == nil || got.TasksRequeued != 3 {
		t.Fatalf("finished marker = %+v, %v; want phase finished with 3 tasks requeued", got, err)
	}
	markers, err := c.Markers(ctx)
	if err != nil || len(markers) != 1 || markers[0].ID != w.ID() || markers[0].Err != nil || markers[0].Record.Phase != PhaseFinished {
		t.Fatalf("Markers = %+v, %v; want the one finished marker", markers, err)
	}

	// A fenced identity cannot come back.
	wc2 := lb.dial(t, lb.config())
	if _, err := wc2.Register(ctx, nodeInfo(RoleWorker, "2")); !errors.Is(err, ErrFenced) {
		t.Fatalf("Register of the fenced identity: %v, want ErrFenced", err)
	}

	if err := c.DeleteMarker(ctx, lb.zk.Root+"/election/_c_gone-n_0000000099", RoleWorker, w.ID()); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("DeleteMarker with a missing election znode: %v, want ErrNotLeader", err)
	}
	if err := c.DeleteMarker(ctx, lb.e.ZnodePath(), RoleWorker, w.ID()); err != nil {
		t.Fatalf("DeleteMarker: %v", err)
	}
	if err := c.DeleteMarker(ctx, lb.e.ZnodePath(), RoleWorker, w.ID()); err != nil {
		t.Fatalf("DeleteMarker of a deleted marker: %v, want nil", err)
	}
	if err := c.FinishMarker(ctx, lb.e.ZnodePath(), rec); !errors.Is(err, ErrNoMarker) {
		t.Fatalf("FinishMarker without a marker: %v, want ErrNoMarker", err)
	}
	// With the marker gone the identity may register again.
	r, err := wc2.Register(ctx, nodeInfo(RoleWorker, "2"))
	if err != nil {
		t.Fatalf("Register after DeleteMarker: %v", err)
	}
	r.Close(ctx)
}

func TestMarkersReportGarbage(t *testing.T) {
	lb := setupLeader(t)
	zc := testenv.DialZK(t)
	good := fenceRecord(RoleMaster, "10.0.0.7:5680_1", lb.m.ID())
	createMarker(t, zc, lb.zk.Root, good)
	for _, p := range []string{"/failover-finish-nodes/worker/10.0.0.8:1234_1", "/failover-finish-nodes/worker/10.0.0.9:1234_1"} {
		if _, err := zc.Create(lb.zk.Root+p, []byte("{broken"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	markers, err := lb.c.Markers(context.Background())
	if err != nil {
		t.Fatalf("Markers: %v", err)
	}
	if len(markers) != 3 {
		t.Fatalf("Markers returned %d entries, want 3: %+v", len(markers), markers)
	}
	var de *DataError
	for _, m := range markers {
		switch m.ID {
		case good.ID:
			if m.Err != nil || m.Record.Leader != good.Leader {
				t.Errorf("good marker = %+v", m)
			}
		default:
			if !errors.As(m.Err, &de) || string(m.Raw) != "{broken" {
				t.Errorf("garbage marker %s: Err %v Raw %q, want a *DataError and the raw data", m.ID, m.Err, m.Raw)
			}
		}
	}
	if _, found, err := lb.c.Marker(context.Background(), RoleWorker, "10.0.0.8:1234_1"); !found || !errors.As(err, &de) {
		t.Fatalf("Marker of garbage: found %v, %v; want found with a *DataError", found, err)
	}
}

func TestMembersWatch(t *testing.T) {
	b := setup(t)
	c := b.dial(t, b.config())
	ctx := context.Background()
	ids, ch, err := c.Members(ctx, RoleWorker)
	if err != nil || len(ids) != 0 {
		t.Fatalf("Members = %v, %v; want none", ids, err)
	}
	// A second caller shares the armed watch.
	_, ch2, err := c.Members(ctx, RoleWorker)
	if err != nil {
		t.Fatal(err)
	}
	wc := b.dial(t, b.config())
	w := register(t, wc, RoleWorker, "1")
	waitClosed(t, ch, 5*time.Second, "the members watch")
	waitClosed(t, ch2, 5*time.Second, "the second members watch")
	ids, ch, err = c.Members(ctx, RoleWorker)
	if err != nil || len(ids) != 1 || ids[0] != w.ID() {
		t.Fatalf("Members = %v, %v; want [%s]", ids, err, w.ID())
	}
	wc.Close()
	waitClosed(t, ch, 5*time.Second, "the members watch after the worker left")
	if ids, _, err := c.Members(ctx, RoleWorker); err != nil || len(ids) != 0 {
		t.Fatalf("Members = %v, %v; want none", ids, err)
	}
	if _, _, err := c.Members(ctx, "boss"); err == nil {
		t.Fatal("Members of an unknown role succeeded")
	}
}
