package worker

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

// completer records the attempts' results in batches: one goroutine takes every result
// waiting and writes them in one statement (dao.TaskFinishManyIfRunning), each still fenced by its own
// token. There is no timer: a result that arrives while the worker is idle is written at once,
// and the results that arrive while a write is under way make up the next one, so the batches
// grow with the load and a commit per task stops being the ceiling.
//
// A failed write fails every result of its batch: each reporter retries on its own, as it did
// when it wrote alone, so a result is never dropped while the worker lives.
type completer struct {
	db  *dao.DB
	in  chan *pending
	max int
	// waiting counts the results handed in and not yet answered: slots about to be freed.
	waiting atomic.Int64
}

type pending struct {
	fin  dao.Finish
	done chan written
}

// written is the answer to one result: err, or the state its instance ended in ("" if it
// did not end it).
type written struct {
	workflow dao.WorkflowState
	err      error
}

// maxFinishBatch bounds one write: a few hundred rows keep a statement in milliseconds and
// its master wake-ups to a handful.
const maxFinishBatch = 500

func newCompleter(db *dao.DB, queue int) *completer {
	return &completer{db: db, in: make(chan *pending, queue), max: maxFinishBatch}
}

// finish records one result and waits for its batch to be written. It returns
// dao.ErrTokenRefused when the task no longer runs under tok, and the state the task's end
// ended its workflow instance in, if it did (dao.TaskFinishManyIfRunning).
func (c *completer) finish(ctx context.Context, tok dao.Token, r dao.AttemptResult) (dao.WorkflowState, error) {
	p := &pending{fin: dao.Finish{Token: tok, Result: r}, done: make(chan written, 1)}
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	select {
	case c.in <- p:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case w := <-p.done:
		return w.workflow, w.err
	case <-ctx.Done():
		// The batch may still be written; if it is, the task has ended and a retry is refused
		// by its token, which the reporter takes as "not ours" — the result is recorded once.
		return "", ctx.Err()
	}
}

// Run writes batches of results until ctx ends, then returns nil. The worker ends it only
// once every attempt it ran has been reported.
func (c *completer) Run(ctx context.Context) error {
	batch := make([]*pending, 0, c.max)
	for {
		select {
		case p := <-c.in:
			batch = append(batch[:0], p)
		case <-ctx.Done():
			return nil
		}
	more:
		for len(batch) < c.max {
			select {
			case p := <-c.in:
				batch = append(batch, p)
			default:
				break more
			}
		}
		c.write(batch)
	}
}

func (c *completer) write(batch []*pending) {
	fins := make([]dao.Finish, len(batch))
	for i, p := range batch {
		fins[i] = p.fin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done, err := lifecycle.Finish(ctx, c.db, fins)
	cancel()
	for i, p := range batch {
		switch {
		case err != nil:
			p.done <- written{err: err}
		case !done[i].Recorded:
			p.done <- written{err: p.fin.Refused()}
		default:
			p.done <- written{workflow: done[i].Workflow}
		}
	}
}
