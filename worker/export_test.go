package worker

import "github.com/zksched/zksched/internal/signal"

// Polled Inits w's test signal polled (see Worker.polled) and returns it: the claim loop
// signals it once it has handled a poll. Call it before Run.
func Polled(w *Worker) *signal.Test[struct{}] {
	w.polled.Init()
	return &w.polled
}
