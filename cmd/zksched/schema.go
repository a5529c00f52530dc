package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/zksched/zksched/workflow"
)

const schemaUsage = "workflow"

// runSchema is `zksched schema workflow`: the JSON Schema of the workflow file, for editors
// (docs/workflow.schema.json is its output).
func runSchema(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("want workflow")}
	}
	what, args := args[0], args[1:]
	switch what {
	case "-h", "--help":
		fmt.Fprintln(stdout, "usage: zksched schema "+schemaUsage)
		return nil
	case "workflow":
	default:
		return usageError{fmt.Errorf("unknown schema %q: want workflow", what)}
	}
	fs := newFlags("schema "+what, stdout)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", fs.Args())}
	}
	_, err := stdout.Write(workflow.Schema())
	return err
}
