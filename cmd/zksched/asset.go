package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/lifecycle"
)

const assetUsage = "emit NAME [--output TEXT] " + instanceUsage

// assetEmitJSON is an asset event emitted, as the API answers and `zksched asset emit --json`
// prints it.
type assetEmitJSON struct {
	Asset string `json:"asset"`
	Event int64  `json:"event"`
}

// runAsset is `zksched asset emit`: an event of an asset from outside any task, which starts
// the workflows whose on-assets it completes.
func runAsset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("asset", stdout)
	f := addInstanceFlags(fs)
	output := fs.String("output", "", "the event's output, which the consumers' templates read as .assets.NAME.output (at most 65536 bytes)")
	_, args, err := parseSub(fs, args, assetUsage, "emit")
	if err != nil {
		return err
	}
	name, args := first(args)
	switch {
	case len(args) > 0:
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	case name == "":
		return usageError{errors.New("asset emit: want an asset name")}
	}
	var out *string
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "output" {
			out = output
		}
	})
	inst, done, err := f.open(ctx, stderr)
	if err != nil {
		return err
	}
	defer done()
	res, err := inst.EmitAsset(ctx, name, out)
	if err != nil {
		return instanceError("not emitted", err)
	}
	if *f.asJSON {
		return writeJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "asset %s: event %d emitted\n", res.Asset, res.Event)
	return nil
}

func (d *dbInstances) EmitAsset(ctx context.Context, name string, output *string) (assetEmitJSON, error) {
	size := 0
	if output != nil {
		size = len(*output)
	}
	ev := cliAudit(dao.AuditAssetEmit, "asset/"+name, map[string]any{"output_bytes": size})
	id, err := lifecycle.EmitAsset(ctx, d.db, name, output, ev.Actor, ev)
	if errors.Is(err, lifecycle.ErrAssetName) || errors.Is(err, lifecycle.ErrAssetOutputTooLarge) {
		return assetEmitJSON{}, usageError{err}
	}
	return assetEmitJSON{Asset: name, Event: id}, err
}

func (c *apiClient) EmitAsset(ctx context.Context, name string, output *string) (assetEmitJSON, error) {
	var r assetEmitJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/assets/"+url.PathEscape(name)+"/events", map[string]any{"output": output}, &r)
	var ae *apiError
	if errors.As(err, &ae) && (ae.status == http.StatusBadRequest || ae.status == http.StatusRequestEntityTooLarge) {
		return r, usageError{errors.New(ae.msg)}
	}
	return r, err
}
