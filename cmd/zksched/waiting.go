package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/registry"
)

// liveGroups watches which worker groups have a live worker, from the registry in ZooKeeper,
// for `--wait` to tell a task that waits for a worker from one that waits for a slot. The
// returned function gives the latest view, nil while it is not known (ZooKeeper unreachable:
// then nothing is said about groups). The watch ends with ctx.
func liveGroups(ctx context.Context, cfg *conf.Config) func() map[string]bool {
	var mu sync.Mutex
	var groups map[string]bool
	go func() {
		zkTLS, err := cfg.Registry.TLSConfig()
		if err != nil {
			return // validated at load; nothing is said about groups then
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := registry.Dial(dctx, registry.Config{Servers: cfg.Registry.Servers, Root: cfg.Registry.Root,
			SessionTimeout: cfg.Registry.SessionTimeout, TLS: zkTLS, ReadOnly: true, Logger: zerolog.Nop()})
		cancel()
		if err != nil {
			return
		}
		defer c.Close()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if cl, err := c.Cluster(ctx); err == nil {
				live := map[string]bool{}
				for _, w := range cl.Workers {
					if w.Info != nil {
						for _, g := range w.Info.Groups {
							live[g] = true
						}
					}
				}
				mu.Lock()
				groups = live
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		return groups
	}
}

// noWorker reports whether group is known to have no live worker.
func noWorker(groups func() map[string]bool, group string) bool {
	if groups == nil {
		return false
	}
	live := groups()
	return live != nil && !live[group]
}

// queuedAgain says why a task that has run is queued again, for `--wait`: after a failed
// attempt, its error and when the next attempt is due ("attempt 1 failed: exit status 1;
// attempt 2 at 11:02:03"), and countdown how long from now (" (in 30s)"), which changes as
// time passes while line does not; after a hand-back, an interruption or a failover, what the
// attempt's error says.
func queuedAgain(t *dao.TaskInstance, now time.Time) (line, countdown string) {
	due := t.NextAttemptAt()
	if due == nil {
		line = fmt.Sprintf("queued again after attempt %d", t.Attempt)
		if t.Error != nil {
			line += ": " + oneLine(*t.Error)
		}
		return line, ""
	}
	line = fmt.Sprintf("attempt %d failed", t.Attempt)
	if t.Error != nil {
		line += ": " + oneLine(*t.Error)
	}
	line += fmt.Sprintf("; attempt %d at %s", t.Attempt+1, due.Local().Format("15:04:05"))
	if in := due.Sub(now).Round(time.Second); in > 0 {
		countdown = fmt.Sprintf(" (in %s)", in)
	}
	return line, countdown
}
