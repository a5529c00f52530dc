package workflow

// TaskParams is what the master stores in a task instance's params column and the worker
// reads back: the task's spec as the definition had it, and the workflow instance's
// parameters (the definition's defaults overridden by those given at submit).
type TaskParams struct {
	Task   Task              `json:"task"`
	Params map[string]string `json:"params,omitempty"`
	// Upstream holds the results of the task's direct dependencies (depends-on), by task
	// name: shell tasks read them as environment variables (see UpstreamEnv), llm and agent
	// prompts as .upstream.<name>.output.
	Upstream map[string]Upstream `json:"upstream,omitempty"`
	// Item is the item of a for-each task's instance (Task.ForEach), nil for any other task:
	// shell tasks read it as $ZKSCHED_ITEM and $ZKSCHED_INDEX, llm and agent prompts as
	// .item and .index.
	Item *Item `json:"item,omitempty"`
	// Assets are the asset events that started the run, by asset (Spec.OnAssets), nil for a
	// run no asset started: templates read them as .assets.<name>.output.
	Assets map[string]AssetInput `json:"assets,omitempty"`
}

// Upstream is the result of one finished upstream task.
type Upstream struct {
	// Output is the task's output: a shell task's last line of standard output, an llm
	// task's completion, an agent task's last step's completion; "" for a noop task.
	Output string `json:"output"`
}
