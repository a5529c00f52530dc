package e2e

// Fault tests of the node's own side of the protocol, where the node is busy with something
// else when the fault comes: a graceful stop, a log output that blocks, a database link that
// hangs. The watchdog must still stop the tasks at the deadline and a fenced node still exit
// 75 at once.

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/internal/history"
	"github.com/zksched/zksched/internal/testenv"
	"github.com/zksched/zksched/registry"
)

// waitFenced waits until the leader has fenced the node and returns its marker.
func (f *fault) waitFenced(t *testing.T, zc *zk.Conn, role registry.Role, id string, d time.Duration) registry.FenceRecord {
	t.Helper()
	var rec registry.FenceRecord
	waitUntil(t, d, id+" fenced", func() bool {
		var ok bool
		rec, ok = f.marker(t, zc, role, id)
		return ok
	})
	return rec
}

// expectStoppedBeforeFence checks that each run the lost worker had was stopped by its own
// watchdog before the leader fenced it, and ran again elsewhere.
func (f *fault) expectStoppedBeforeFence(t *testing.T, rep *history.Report, lost string, runs []history.Run, fencedAt time.Time) {
	t.Helper()
	moved := 0
	for _, fo := range rep.Failovers {
		if fo.From.Worker != lost {
			continue
		}
		moved++
		if !fo.From.Last.Before(fencedAt) {
			t.Errorf("task %d: the lost worker's run was alive until %s, not before the fence at %s: its watchdog did not stop it",
				fo.TaskID, fo.From.Last.Format("15:04:05.000"), fencedAt.Format("15:04:05.000"))
		}
	}
	if moved != len(runs) {
		t.Errorf("the history shows %d tasks moved from %s, want the %d it ran", moved, lost, len(runs))
	}
}

// A worker told to stop (SIGTERM, a long shutdown timeout) is cut off from ZooKeeper and from
// PostgreSQL during its graceful stop. Its watchdog must still stop its tasks at the deadline
// (the leader gives them to another worker once the session has expired), and the worker, still
// waiting to record their results, must learn when its ZooKeeper link heals that it was fenced,
// and exit 75.
func TestFaultSigtermDuringCut(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	zkLink := testenv.NewProxy(t, testenv.ZKServers()[0])
	pgLink := testenv.NewProxy(t, "127.0.0.1:5432")
	w1 := f.startWorker(t, "worker-1", 2, "ZKSCHED_REGISTRY_SERVERS="+zkLink.Addr(),
		"ZKSCHED_DB_DSN="+f.dsnThrough(t, pgLink), "ZKSCHED_WORKER_SHUTDOWN_TIMEOUT=60s")
	wf := f.submit(t, "sigterm-cut", parallel(2, "sleep 20")...)
	lostRuns := f.waitAliveOn(t, w1, 2)
	f.startWorker(t, "worker-2", 2)
	zc := testenv.DialZK(t)

	faultAt := time.Now()
	if err := w1.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	w1.WaitLog(t, 5*time.Second, "stopping gracefully")
	pgLink.Cut()
	zkLink.Cut()
	rec := f.waitFenced(t, zc, registry.RoleWorker, w1.id, 20*time.Second)
	healAt := time.Now()
	zkLink.Heal()
	if code := w1.Wait(t, 15*time.Second); code != exitFenced {
		t.Errorf("worker-1 exit code %d after the link healed, want %d (fenced)", code, exitFenced)
	}
	pgLink.Heal()
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})
	f.expectStoppedBeforeFence(t, rep, w1.id, lostRuns, rec.FencedAt)
	figure(t, "cut during the graceful stop → tasks stopped by the watchdog (slowest)", maxStopped(rep), sessionTimeout+killGrace)
	figure(t, "heal → exit 75", w1.ExitedAt().Sub(healAt), time.Second)
}

// dsnThrough is the test's DSN with PostgreSQL reached through link.
func (f *fault) dsnThrough(t *testing.T, link *testenv.Proxy) string {
	t.Helper()
	dsn := envValue(f.Env, "ZKSCHED_DB_DSN")
	if !strings.Contains(dsn, "127.0.0.1:5432") {
		t.Fatalf("the test's DSN %q does not name 127.0.0.1:5432", dsn)
	}
	return strings.Replace(dsn, "127.0.0.1:5432", link.Addr(), 1)
}

// unread returns how many bytes wait in a pipe.
func unread(t *testing.T, r *os.File) int {
	t.Helper()
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, r.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("FIONREAD: %v", errno)
	}
	return int(n)
}

// nodeAt waits until a node listening on port is registered and returns its identity; its log
// cannot be read.
func (f *fault) nodeAt(t *testing.T, zc *zk.Conn, role registry.Role, port int) string {
	t.Helper()
	var id string
	waitUntil(t, 30*time.Second, fmt.Sprintf("a %s on port %d registered", role, port), func() bool {
		kids, _, err := zc.Children(f.root + "/nodes/" + string(role) + "s")
		if err != nil {
			return false
		}
		for _, k := range kids {
			if strings.HasPrefix(k, fmt.Sprintf("127.0.0.1:%d_", port)) {
				id = k
				return true
			}
		}
		return false
	})
	return id
}

// A worker whose log output nobody reads (a stalled pipe, a hung journald) must go on working:
// run its tasks, stop them at the deadline when cut off, and exit 75 when fenced.
func TestFaultLogOutputBlocked(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	link := testenv.NewProxy(t, testenv.ZKServers()[0])
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	// The smallest pipe the kernel makes (a page): a few tasks' log lines fill it.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), syscall.F_SETPIPE_SZ, 4096); errno != 0 {
		t.Fatalf("F_SETPIPE_SZ: %v", errno)
	}
	zc := testenv.DialZK(t)
	w1 := f.WorkerOutput("worker-1", w, "ZKSCHED_WORKER_SLOTS=4", "ZKSCHED_REGISTRY_SERVERS="+link.Addr())
	id := f.nodeAt(t, zc, registry.RoleWorker, w1.Port)

	// Enough short tasks to fill the pipe with their log lines, and they all finish.
	var many []task
	for i := range 30 {
		many = append(many, task{name: fmt.Sprintf("short-%d", i), body: "true"})
	}
	short := f.submit(t, "fill-the-pipe", many...)
	waitUntil(t, 60*time.Second, "the short tasks finished on the worker whose log is blocked", func() bool {
		wf, err := f.db.WorkflowGet(t.Context(), short)
		return err == nil && wf.State.Terminal()
	})
	// Thirty tasks log several times a page: a pipe with less than a line's room left (writes of
	// a line are atomic) has held the node's log writer since.
	if n := unread(t, r); n < 4096-256 {
		t.Fatalf("only %d bytes wait in the log pipe; the test needs it full", n)
	}

	p := &proc{Proc: w1, id: id}
	wf := f.submit(t, "blocked-log-cut", parallel(2, "sleep 20")...)
	lostRuns := f.waitAliveOn(t, p, 2)
	f.startWorker(t, "worker-2", 2)
	faultAt := time.Now()
	link.Cut()
	rec := f.waitFenced(t, zc, registry.RoleWorker, id, 20*time.Second)
	link.Heal()
	if code := w1.Wait(t, 15*time.Second); code != exitFenced {
		t.Errorf("worker-1 exit code %d after the link healed, want %d (fenced)", code, exitFenced)
	}
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})
	f.expectStoppedBeforeFence(t, rep, id, lostRuns, rec.FencedAt)
}

// A fenced worker exits 75 at once, even while a query of its hangs on a database link that was
// cut: closing the database would wait for that query.
func TestFaultFencedExitsWithTheDatabaseCut(t *testing.T) {
	f := setupFault(t)
	f.startMaster(t, "master")
	zkLink := testenv.NewProxy(t, testenv.ZKServers()[0])
	pgLink := testenv.NewProxy(t, "127.0.0.1:5432")
	w1 := f.startWorker(t, "worker-1", 2, "ZKSCHED_REGISTRY_SERVERS="+zkLink.Addr(), "ZKSCHED_DB_DSN="+f.dsnThrough(t, pgLink))
	wf := f.submit(t, "fenced-db-cut", parallel(2, "sleep 20")...)
	lostRuns := f.waitAliveOn(t, w1, 2)
	f.startWorker(t, "worker-2", 2)
	zc := testenv.DialZK(t)

	faultAt := time.Now()
	pgLink.Cut()
	zkLink.Cut()
	f.waitFenced(t, zc, registry.RoleWorker, w1.id, 20*time.Second)
	healAt := time.Now()
	zkLink.Heal()
	if code := w1.Wait(t, 10*time.Second); code != exitFenced {
		t.Errorf("worker-1 exit code %d after its zookeeper link healed, want %d (fenced)", code, exitFenced)
	}
	figure(t, "heal → exit 75 with the database link cut", w1.ExitedAt().Sub(healAt), time.Second)
	rep := history.Check(t, f.db, f.rec, history.Options{Workflows: []int64{wf}, FaultAt: faultAt})
	if len(rep.Failovers) != len(lostRuns) {
		t.Errorf("the history shows %d tasks moved, want the %d that ran on the fenced worker", len(rep.Failovers), len(lostRuns))
	}
}
