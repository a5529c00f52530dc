// Package dao is zksched's only door to PostgreSQL: every SQL statement the program runs lives
// here, one file per table, each statement named after what it does. A statement that must be
// fenced says so in its name: TaskFinishIfRunning matches only the attempt that holds the
// fencing token (worker_id, attempt) of a task still running, and WorkflowLockIfOwned only the
// master that owns the instance. Zero rows matched is reported as ErrTokenRefused or
// ErrNotOwner: the work was taken away, and the caller must stop it, never overwrite.
//
// The statements that change an instance's state are named for their transition and its
// condition (TaskFinishManyIfRunning, WorkflowAdmitIfUnderCap, WorkflowStopIfActive, …) and
// are called only by package lifecycle, which decides; lifecycle/doc.go lists them with who
// makes each transition.
//
// dao knows nothing of ZooKeeper. Wake-ups travel by LISTEN/NOTIFY (see Listen); a lost
// notification costs latency only, because every consumer also polls.
package dao
