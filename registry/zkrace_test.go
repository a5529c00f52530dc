//go:build race

package registry

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zksched/zksched/internal/testenv"
)

// TestLibraryReconnectIsRaceFree guards the one patch zksched carries on go-zookeeper
// (internal/third_party/zk/PATCHES.md): on a reconnect the library re-arms its watches with the
// last zxid it saw while the new connection's receive loop is already storing fresh ones. Stock
// v1.0.4 makes the race detector fail this test in most runs; it needs many watches (so the
// re-arm takes long) and replies in flight while it runs. The test is only meaningful with -race,
// which is how the suite runs.
func TestLibraryReconnectIsRaceFree(t *testing.T) {
	t.Parallel()
	root := testenv.ZooKeeper(t).Root
	p := testenv.NewProxy(t, testenv.ZKServers()[0])
	conn, events, err := zk.Connect([]string{p.Addr()}, 4*time.Second, zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sessions := make(chan struct{}, 100)
	go func() {
		for ev := range events {
			if ev.State == zk.StateHasSession {
				select {
				case sessions <- struct{}{}:
				default:
				}
			}
		}
	}()
	waitSession := func() {
		t.Helper()
		select {
		case <-sessions:
		case <-time.After(10 * time.Second):
			t.Fatal("no zookeeper session within 10s")
		}
	}
	waitSession()

	const watches = 20000
	var armed sync.WaitGroup
	for g := range 8 {
		armed.Add(1)
		go func() {
			defer armed.Done()
			for i := g; i < watches; i += 8 {
				if _, _, _, err := conn.ExistsW(fmt.Sprintf("%s/absent-%d", root, i)); err != nil {
					t.Errorf("ExistsW: %v", err)
					return
				}
			}
		}()
	}
	armed.Wait()
	if t.Failed() {
		return
	}

	stop := make(chan struct{})
	var busy sync.WaitGroup
	for range 4 {
		busy.Add(1)
		go func() {
			defer busy.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				conn.Exists(root) // errors while the link is down are expected
			}
		}()
	}
	for range 5 {
		p.Reset()
		waitSession()
		// Time itself: the new connection carries replies a while, so that its re-arm of the
		// watches runs among them; that overlap is the race, and nothing marks its end.
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	busy.Wait()
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
