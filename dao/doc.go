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
// # Statements
//
// Each statement is one Go raw string, written whole and never built at run time, so it reads
// as PostgreSQL runs it and pastes into psql as it is. A long one, or one the tests name,
// is a constant named for the method that runs it (claimSQL is TaskClaimQueued's), its
// parameters listed in its doc comment; a short one used once is a literal in its method. A
// part several statements have in common (a column list, the pool locks taken before task
// rows) is written out in each; where the copies must stay alike, a test says so
// (statements_test.go). A filter that a caller may leave out is a parameter whose empty value
// disables it:
//
//	AND ($1 = '' OR t.state = $1)
//
// Those statements run unprepared, planned for their parameters' values, and PostgreSQL drops
// a disabled filter before it plans.
//
// # Machinery
//
// How the statements reach PostgreSQL lives beside the package, in dao/internal, and holds no
// SQL of its own:
//
//   - connpool opens the pools: the one the statements run on, which waits for the database to
//     answer, the task claims' (with the run-time settings of claimSettings) and the
//     notifier's single connection.
//   - stmtcache keeps the hot statements prepared on each pool (selectHot, queryHot, getHot).
//   - wakeup sends wake-ups after their transaction commits, many to a statement (the
//     notifier), and delivers them to listeners (DB.ListenMaster, DB.ListenWorker).
//   - groupcommit runs the submissions made on a pool together, many to a statement
//     (DB.WorkflowCreateGrouped).
//
// dao knows nothing of ZooKeeper. Wake-ups travel by LISTEN/NOTIFY; a lost notification
// costs latency only, because every consumer also polls.
package dao
