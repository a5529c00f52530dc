package workflow

// TaskParams is what the master stores in a task instance's params column and the worker
// reads back: the task's spec as the definition had it, and the workflow instance's
// parameters (the definition's defaults overridden by those given at submit).
type TaskParams struct {
	Task   Task              `json:"task"`
	Params map[string]string `json:"params,omitempty"`
}
