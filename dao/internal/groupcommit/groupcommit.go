// Package groupcommit runs requests that arrive together in one call, and so in one statement
// and one commit: a Committer's writers each take the requests waiting, up to a batch, and
// hand them to its commit function, while callers wait for their own request's result.
//
// dao creates the workflow instances submitted on a pool this way (DB.WorkflowCreateGrouped):
// with its root tasks every submission inserts into task_instance and its indexes, and many
// backends inserting at once, beside the workers' claims and finishes of the same rows, would
// queue on the same few pages' locks (LWLock:BufferContent) and on WAL writes, each
// submission's statement taking many times as long. A few writers have next to nothing to
// queue on.
package groupcommit

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is the error of a request to a closed Committer, and of those still waiting when
// it closed.
var ErrClosed = errors.New("closed")

// Result is a request's outcome.
type Result[Res any] struct {
	Value Res
	Err   error
}

// Committer runs requests of type Req, many to a call of its commit function.
type Committer[Req, Res any] struct {
	commit func(batch []Req) []Result[Res]
	batch  int

	mu      sync.Mutex
	pending []*request[Req, Res]
	closed  bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type request[Req, Res any] struct {
	ctx context.Context
	req Req
	res Result[Res]
	// done is closed once res is set.
	done chan struct{}
}

// New starts a Committer with writers writers, each calling commit with up to batch requests
// at a time. commit returns the result of each request of the batch, at the same index; it
// runs detached from the callers' contexts, so it bounds its own time. Several writers let a
// request that arrives during a commit go into the next one at once.
func New[Req, Res any](writers, batch int, commit func(batch []Req) []Result[Res]) *Committer[Req, Res] {
	c := &Committer[Req, Res]{commit: commit, batch: batch, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run(writers)
	return c
}

// Do runs req in the next batch and returns its result. When ctx ends first it returns ctx's
// error, and req may still be committed: its batch may be on its way already. A request
// whose ctx has ended by the time its batch is taken is left out of it.
func (c *Committer[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	r := &request[Req, Res]{ctx: ctx, req: req, done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		var zero Res
		return zero, ErrClosed
	}
	c.pending = append(c.pending, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		return r.res.Value, r.res.Err
	case <-ctx.Done():
		var zero Res
		return zero, ctx.Err()
	}
}

func (c *Committer[Req, Res]) run(writers int) {
	defer close(c.done)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				select {
				case <-c.wake:
				case <-c.stop:
					return
				}
				for c.flush() {
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	left := c.pending
	c.pending, c.closed = nil, true
	c.mu.Unlock()
	for _, r := range left {
		r.res.Err = ErrClosed
		close(r.done)
	}
}

// flush commits up to a batch of the waiting requests and reports whether it took any.
func (c *Committer[Req, Res]) flush() bool {
	c.mu.Lock()
	n := min(len(c.pending), c.batch)
	batch := c.pending[:n:n]
	c.pending = c.pending[n:]
	c.mu.Unlock()
	if n == 0 {
		return false
	}
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.res.Err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return true
	}
	reqs := make([]Req, len(live))
	for i, r := range live {
		reqs[i] = r.req
	}
	results := c.commit(reqs)
	for i, r := range live {
		r.res = results[i]
		close(r.done)
	}
	return true
}

// Close stops the Committer once the batches under way are committed; the requests still
// waiting fail with ErrClosed.
func (c *Committer[Req, Res]) Close() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
