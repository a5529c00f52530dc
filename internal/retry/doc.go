// Package retry is zksched's one backoff: the wait after each failure of something tried
// again (a statement while PostgreSQL is down, a ZooKeeper request, a model call, a
// notification), doubled from an initial wait up to a cap, with jitter where several nodes
// would otherwise retry together.
//
// A [Policy] says how the wait grows. Three shapes of caller use it:
//
//   - [Do] tries a function until it succeeds, returns a [Permanent] error, or its context
//     ends, waiting on an injected clock between tries and telling the caller of each
//     failure (to log it): opening the database, the master's start-up writes, dialling
//     ZooKeeper.
//   - A [Backoff] hands out the successive waits of a loop that waits itself (an event loop
//     that selects on more than a timer, or one that waits with [Sleep] on a stop channel
//     as well as a context), and is Reset when the loop gets through.
//   - [Policy.Delay] is the wait after the n-th failure, for a caller that keeps the count
//     itself (a notification's attempts are a column of its row).
//
// The waits are timed on a [clockwork.Clock], the clock the project injects everywhere time
// is, so a test drives them with a fake clock. That decides against the two retry libraries
// already in the module graph: github.com/cenkalti/backoff/v5 waits on a private real timer
// (its option to set one is unexported) and github.com/sethvargo/go-retry calls
// time.NewTimer itself, so neither can be driven by a fake clock; and neither has the
// full-jitter-with-a-floor the model calls use nor a wait by failure count.
package retry
