package workflow_test

import (
	"fmt"

	"github.com/zksched/zksched/workflow"
)

func ExampleParse() {
	spec, err := workflow.Parse([]byte(`
name: nightly-report
tasks:
  - name: load
    type: shell
    command: ./load.sh
    depends-on: [clean, enrich]
  - name: extract
    type: shell
    command: ./extract.sh
    retry-interval: 30s
  - {name: clean, type: shell, command: ./clean.sh, depends-on: [extract]}
  - {name: enrich, type: shell, command: ./enrich.sh, depends-on: [extract]}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	extract, _ := spec.Task("extract")
	fmt.Println("roots:", spec.Roots())
	fmt.Println("after extract:", spec.Downstream("extract"))
	fmt.Println("order:", spec.Order())
	fmt.Println("extract retries after", extract.RetryInterval, "in group", extract.Group)
	// Output:
	// roots: [extract]
	// after extract: [clean enrich]
	// order: [extract clean enrich load]
	// extract retries after 30s in group default
}

func ExampleParse_errors() {
	_, err := workflow.Parse([]byte(`
name: nightly-report
tasks:
  - name: extract
    type: shell
    command: ./extract.sh
  - name: load
    type: shell
    command: ./load.sh
    depends-on: [extrct]
`))
	fmt.Println(err)
	// Output:
	// line 10: task "load" depends on "extrct", which is not a task of this workflow
}
