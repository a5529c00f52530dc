package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zksched/zksched/dao"
)

const hooksUsage = "list [--deliveries N] [--json] [--config FILE]"

// hookView is a hook as `zksched hooks list` shows it: its URL and latest deliveries.
type hookView struct {
	dao.Hook
	URL        string             `json:"url"`
	Deliveries []dao.HookDelivery `json:"deliveries"`
}

// runHooks is `zksched hooks list`: the webhook triggers of the stored workflows.
func runHooks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("hooks", stdout)
	config := configFlag(fs)
	n := fs.Int("deliveries", 5, "how many of each hook's latest deliveries to show")
	asJSON := fs.Bool("json", false, "print JSON")
	_, args, err := parseSub(fs, args, hooksUsage, "list")
	if err != nil {
		return err
	}
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	}
	if *n < 0 || *n > 100 {
		return usageError{fmt.Errorf("--deliveries %d is not from 0 to 100", *n)}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, cfg, newLogger(cfg.Log, stderr))
	if err != nil {
		return err
	}
	defer db.Close()
	views, err := loadHookViews(ctx, db, cfg.API.PublicURL, *n)
	if err != nil {
		return err
	}
	return writeHooks(stdout, views, *asJSON)
}

// loadHookViews reads every hook with its n latest deliveries; their URLs are under
// publicURL (api.public-url), or paths when it is empty.
func loadHookViews(ctx context.Context, db *dao.DB, publicURL string, n int) ([]hookView, error) {
	hooks, err := db.HookList(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = h.Name
	}
	deliveries := map[string][]dao.HookDelivery{}
	if n > 0 {
		if deliveries, err = db.HookDeliveries(ctx, names, n); err != nil {
			return nil, err
		}
	}
	views := make([]hookView, len(hooks))
	for i, h := range hooks {
		views[i] = hookView{Hook: h, URL: strings.TrimSuffix(publicURL, "/") + "/api/v1/hooks/" + h.Name, Deliveries: deliveries[h.Name]}
		if views[i].Deliveries == nil {
			views[i].Deliveries = []dao.HookDelivery{}
		}
	}
	return views, nil
}

// writeHooks prints the hooks as a table, a line per hook and one under it per delivery, or
// as JSON.
func writeHooks(w io.Writer, views []hookView, asJSON bool) error {
	if asJSON {
		return writeJSON(w, views)
	}
	if len(views) == 0 {
		fmt.Fprintln(w, "no hooks: declare one in a workflow's triggers: and store it with zksched define")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOOK\tWORKFLOW\tSIGNATURE\tURL")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%s v%d\t%s\t%s\n", v.Name, v.WorkflowName, v.WorkflowVersion, v.Signature, v.URL)
		for _, d := range v.Deliveries {
			id, run := "-", ""
			if d.DeliveryID != nil {
				id = safeText(*d.DeliveryID)
			}
			if d.WorkflowInstanceID != nil {
				run = fmt.Sprintf(" → workflow instance %d", *d.WorkflowInstanceID)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", d.ReceivedAt.Local().Format(time.RFC3339), id, d.Client, safeText(d.Outcome), run)
		}
	}
	return tw.Flush()
}

// safeText is s for a table cell on a terminal: its control characters escaped (see
// termWriter), tabs and newlines as spaces. A delivery's id and a refusal's reason come from
// the sender.
func safeText(s string) string {
	out, _ := appendTermSafe(nil, []byte(s), true)
	return strings.NewReplacer("\t", " ", "\n", " ").Replace(string(out))
}
