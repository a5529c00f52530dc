package worker

// OnPoll sets f as w's test signal polled (see Worker.polled): the claim loop calls it once it
// has handled a poll. Call it before Run.
func OnPoll(w *Worker, f func()) { w.polled = f }
