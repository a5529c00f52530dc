// Package dao is zksched's only door to PostgreSQL: every SQL statement the program runs lives
// here, one file per table, each statement named after what it does. A statement that must be
// fenced says so in its name: TaskFinishIfRunning matches only the attempt that holds the
// fencing token (worker_id, attempt) of a task still running, and WorkflowLockIfOwned only the
// master that owns the instance. Zero rows matched is reported as ErrTokenRefused or
// ErrNotOwner: the work was taken away, and the caller must stop it, never overwrite.
//
// dao knows nothing of ZooKeeper. Wake-ups travel by LISTEN/NOTIFY (see Listen); a lost
// notification costs latency only, because every consumer also polls.
package dao
