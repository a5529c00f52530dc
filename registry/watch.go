package registry

import (
	"context"

	"github.com/go-zookeeper/zk"
)

type watchKind int

const (
	watchChildren watchKind = iota
	watchExists
)

type watchKey struct {
	kind watchKind
	path string
}

// watch is one armed ZooKeeper watch, shared by everyone who asks for the same watch in the same
// epoch. ZooKeeper keeps one watch per path and session anyway; sharing keeps go-zookeeper from
// piling up a channel per call on paths that are read often and rarely change.
type watch struct {
	epoch uint64
	fired chan struct{}
}

// childrenW returns the children of p and a channel closed at the next change of them.
func (c *Client) childrenW(ctx context.Context, p string) ([]string, <-chan struct{}, error) {
	conn, epoch := c.current()
	key := watchKey{watchChildren, p}
	if w := c.armed(key, epoch); w != nil {
		children, err := call(ctx, func() ([]string, error) {
			ch, _, err := conn.Children(p)
			return ch, err
		})
		return children, w.fired, err
	}
	type result struct {
		children []string
		ev       <-chan zk.Event
	}
	r, err := call(ctx, func() (result, error) {
		ch, _, ev, err := conn.ChildrenW(p)
		return result{ch, ev}, err
	})
	if err != nil {
		return nil, nil, err
	}
	return r.children, c.arm(key, epoch, r.ev), nil
}

// existsW tells whether p exists and returns a channel closed when it is created, deleted or
// changed.
func (c *Client) existsW(ctx context.Context, p string) (bool, <-chan struct{}, error) {
	conn, epoch := c.current()
	key := watchKey{watchExists, p}
	if w := c.armed(key, epoch); w != nil {
		ok, err := call(ctx, func() (bool, error) {
			ok, _, err := conn.Exists(p)
			return ok, err
		})
		return ok, w.fired, err
	}
	type result struct {
		ok bool
		ev <-chan zk.Event
	}
	r, err := call(ctx, func() (result, error) {
		ok, _, ev, err := conn.ExistsW(p)
		return result{ok, ev}, err
	})
	if err != nil {
		return false, nil, err
	}
	return r.ok, c.arm(key, epoch, r.ev), nil
}

// armed returns the watch for key if one was armed in this epoch and has not fired: it will
// fire at the next change, so a plain read is enough.
func (c *Client) armed(key watchKey, epoch uint64) *watch {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watches[key]
	if w == nil || w.epoch != epoch {
		return nil
	}
	select {
	case <-w.fired:
		return nil
	default:
		return w
	}
}

// arm shares a freshly set go-zookeeper watch. The library fires its channel once: on the event,
// or when the session ends or the connection is closed.
func (c *Client) arm(key watchKey, epoch uint64, ev <-chan zk.Event) <-chan struct{} {
	w := &watch{epoch: epoch, fired: make(chan struct{})}
	c.mu.Lock()
	c.watches[key] = w
	c.mu.Unlock()
	go func() {
		select {
		case <-ev:
		case <-c.quit:
		}
		close(w.fired)
		c.mu.Lock()
		if c.watches[key] == w {
			delete(c.watches, key)
		}
		c.mu.Unlock()
	}()
	return w.fired
}
