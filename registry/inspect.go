package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZnodeKind says what a znode is in the layout.
type ZnodeKind int

// The kinds of znodes Tree recognizes.
const (
	KindOther     ZnodeKind = iota // the root, the folders, anything unexpected
	KindNode                       // nodes/<role>s/<id>: NodeInfo JSON
	KindCandidate                  // election/<seq>: a master's id
	KindMarker                     // failover-finish-nodes/<role>/<id>: FenceRecord JSON
)

// Znode is one znode as Tree read it.
type Znode struct {
	Path  string
	Depth int // 0 for the root
	Kind  ZnodeKind
	Role  Role // of a KindNode or KindMarker
	Data  []byte
	Ctime time.Time
	Mtime time.Time
	// EphemeralOwner is the session that owns an ephemeral znode, 0 for a persistent one.
	EphemeralOwner int64
	NumChildren    int
	Version        int32
}

// Name returns the last element of the path.
func (z Znode) Name() string { return z.Path[strings.LastIndexByte(z.Path, '/')+1:] }

// Tree reads every znode under the root, the root first, depth-first, children in name order.
// Znodes deleted while it reads are left out.
func (c *Client) Tree(ctx context.Context) ([]Znode, error) {
	if err := c.sync(ctx, c.layout.root); err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	conn, _ := c.current()
	var out []Znode
	var visit func(p string, depth int) error
	visit = func(p string, depth int) error {
		type result struct {
			data []byte
			stat *zk.Stat
		}
		r, err := call(ctx, func() (result, error) {
			data, stat, err := conn.Get(p)
			return result{data, stat}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tree: read %s: %w", p, err)
		}
		z := Znode{
			Path: p, Depth: depth, Data: r.data,
			Ctime: time.UnixMilli(r.stat.Ctime), Mtime: time.UnixMilli(r.stat.Mtime),
			EphemeralOwner: r.stat.EphemeralOwner, NumChildren: int(r.stat.NumChildren), Version: r.stat.Version,
		}
		z.Kind, z.Role = c.layout.kind(p)
		out = append(out, z)
		names, err := call(ctx, func() ([]string, error) {
			names, _, err := conn.Children(p)
			return names, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tree: list %s: %w", p, err)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := visit(p+"/"+n, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(c.layout.root, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// kind classifies a path of the layout.
func (l layout) kind(p string) (ZnodeKind, Role) {
	rel, ok := strings.CutPrefix(p, l.root+"/")
	if !ok {
		return KindOther, ""
	}
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) == 3 && parts[0] == "nodes" && (parts[1] == "masters" || parts[1] == "workers"):
		return KindNode, Role(strings.TrimSuffix(parts[1], "s"))
	case len(parts) == 2 && parts[0] == "election":
		return KindCandidate, ""
	case len(parts) == 3 && parts[0] == "failover-finish-nodes" && Role(parts[1]).valid():
		return KindMarker, Role(parts[1])
	}
	return KindOther, ""
}

// Cluster is the registry as it is: who leads, who is registered, who is fenced.
type Cluster struct {
	// Leader is the id of the lowest election candidate, "" if there is none.
	Leader  string
	Masters []NodeEntry
	Workers []NodeEntry
	Fenced  []MarkerEntry
	// ZooKeeper are the configured servers with their modes (see Ensemble).
	ZooKeeper []Member
	// Postgres are the database's servers with their roles, when the caller read them
	// (Cluster does not: the registry knows nothing of PostgreSQL).
	Postgres []Member
}

// NodeEntry is one registered node. Info is nil and Err (a *DataError) set when its data does not
// parse; Raw always holds the data.
type NodeEntry struct {
	Path string
	ID   string
	Info *NodeInfo
	Raw  []byte
	Err  error
}

// Cluster reads the leader, the registered nodes and the fence markers.
func (c *Client) Cluster(ctx context.Context) (Cluster, error) {
	if err := c.sync(ctx, c.layout.root); err != nil {
		return Cluster{}, fmt.Errorf("cluster: %w", err)
	}
	var cl Cluster
	leader, err := c.leader(ctx)
	if err != nil {
		return Cluster{}, fmt.Errorf("cluster: %w", err)
	}
	cl.Leader = leader
	for _, role := range Roles {
		entries, err := c.nodes(ctx, role)
		if err != nil {
			return Cluster{}, fmt.Errorf("cluster: %w", err)
		}
		if role == RoleMaster {
			cl.Masters = entries
		} else {
			cl.Workers = entries
		}
	}
	if cl.Fenced, err = c.Markers(ctx); err != nil {
		return Cluster{}, fmt.Errorf("cluster: %w", err)
	}
	cl.ZooKeeper = c.Ensemble(ctx)
	return cl, nil
}

// leader returns the id in the lowest election candidate.
func (c *Client) leader(ctx context.Context) (string, error) {
	dir := c.layout.electionDir()
	for {
		names, err := c.children(ctx, dir)
		if errors.Is(err, zk.ErrNoNode) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("list %s: %w", dir, err)
		}
		var cands []string
		for _, n := range names {
			if isCandidateName(n) {
				cands = append(cands, n)
			}
		}
		sortCandidates(cands)
		lowest := ""
		for _, n := range cands {
			_, ephemeral, err := c.getOwned(ctx, dir+"/"+n)
			if err == nil && !ephemeral {
				continue // not a candidacy, as Election.look decides
			}
			lowest = n
			break
		}
		if lowest == "" {
			return "", nil
		}
		id, err := c.get(ctx, dir+"/"+lowest)
		if errors.Is(err, zk.ErrNoNode) {
			continue // resigned since the listing
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", lowest, err)
		}
		return string(id), nil
	}
}

func (c *Client) nodes(ctx context.Context, role Role) ([]NodeEntry, error) {
	dir := c.layout.nodesDir(role)
	ids, err := c.children(ctx, dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Strings(ids)
	var out []NodeEntry
	for _, id := range ids {
		p := dir + "/" + id
		raw, err := c.get(ctx, p)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		info, err := parseNodeInfo(p, role, id, raw)
		out = append(out, NodeEntry{Path: p, ID: id, Info: info, Raw: raw, Err: err})
	}
	return out, nil
}

// WriteTree prints znodes as Tree returns them: indented by depth, with their kind (EPHEMERAL and
// its owner, or PERSISTENT), their age at now, and a summary of their parsed data. Data that does
// not parse is shown as "unparseable data: <quoted prefix>".
func WriteTree(w io.Writer, nodes []Znode, now time.Time) error {
	ew := &errWriter{w: w}
	for _, z := range nodes {
		name := z.Name()
		if z.Depth == 0 {
			name = z.Path
		}
		mode := "PERSISTENT"
		if z.EphemeralOwner != 0 {
			mode = "EPHEMERAL owner " + sessionHex(z.EphemeralOwner)
		}
		line := fmt.Sprintf("%s%s  %s  age %s", strings.Repeat("  ", z.Depth), Printable(name), mode, age(now, z.Ctime))
		if s := summary(z, now); s != "" {
			line += "  " + Printable(s)
		}
		ew.printf("%s\n", line)
	}
	return ew.err
}

// summary describes a znode's data in a few words.
func summary(z Znode, now time.Time) string {
	switch z.Kind {
	case KindNode:
		id := z.Name()
		info, err := parseNodeInfo(z.Path, z.Role, id, z.Data)
		if err != nil {
			return unparseable(z.Data, err)
		}
		return nodeSummary(info, now)
	case KindMarker:
		rec, err := parseFenceRecord(z.Path, z.Role, z.Name(), z.Data)
		if err != nil {
			return unparseable(z.Data, err)
		}
		return markerSummary(rec, now)
	case KindCandidate:
		return fmt.Sprintf("candidate %q", z.Data)
	}
	if len(z.Data) == 0 {
		return ""
	}
	if json.Valid(z.Data) {
		return "data " + prefix(string(z.Data), 80)
	}
	return "data " + quotePrefix(z.Data, 60)
}

func unparseable(raw []byte, err error) string {
	var de *DataError
	if errors.As(err, &de) {
		err = de.Err
	}
	return fmt.Sprintf("unparseable data: %s (%v)", quotePrefix(raw, 60), err)
}

func nodeSummary(info *NodeInfo, now time.Time) string {
	parts := []string{string(info.Role), "pid " + strconv.Itoa(info.PID)}
	if info.Version != "" {
		parts = append(parts, "version "+info.Version)
	}
	if info.HTTPAddr != "" {
		parts = append(parts, "http "+info.HTTPAddr)
	}
	if len(info.Groups) > 0 {
		parts = append(parts, "groups "+strings.Join(info.Groups, ","))
	}
	if info.Role == RoleWorker {
		parts = append(parts, fmt.Sprintf("running %d/%d", info.Running, info.Slots))
	} else {
		parts = append(parts, fmt.Sprintf("running %d", info.Running))
	}
	parts = append(parts, fmt.Sprintf("load %.2f", info.Load), "up "+age(now, info.StartTime),
		"heartbeat "+age(now, info.HeartbeatAt)+" ago")
	return strings.Join(parts, "  ")
}

func markerSummary(rec FenceRecord, now time.Time) string {
	parts := []string{string(rec.Phase), "lost " + age(now, rec.LostAt) + " ago",
		"fenced " + age(now, rec.FencedAt) + " ago", "by " + rec.Leader}
	if rec.FinishedAt != nil {
		parts = append(parts, "finished "+age(now, *rec.FinishedAt)+" ago")
	}
	parts = append(parts, fmt.Sprintf("requeued %d", rec.TasksRequeued), fmt.Sprintf("released %d", rec.WorkflowsReleased))
	return strings.Join(parts, "  ")
}

// WriteCluster prints a Cluster. As text: the leader, the masters (the leader marked with *), the
// workers with slots, running tasks, load and heartbeat age, and the fence markers. As JSON:
// {"leader":…,"masters":[…],"workers":[…],"fenced":[…]}. Entries whose data does not parse are
// printed with their error.
func WriteCluster(w io.Writer, cl Cluster, now time.Time, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(clusterJSON(cl))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	ew := &errWriter{w: tw}
	leader := cl.Leader
	if leader == "" {
		leader = "none"
	}
	ew.printf("leader: %s\n", Printable(leader))
	for _, group := range []struct {
		title   string
		entries []NodeEntry
	}{{"masters", cl.Masters}, {"workers", cl.Workers}} {
		ew.printf("%s (%d):\n", group.title, len(group.entries))
		for _, n := range group.entries {
			mark := " "
			if cl.Leader != "" && n.ID == cl.Leader && group.title == "masters" {
				mark = "*"
			}
			if n.Err != nil {
				ew.printf("  %s %s\t%s\n", mark, Printable(n.ID), Printable(unparseable(n.Raw, n.Err)))
				continue
			}
			ew.printf("  %s %s\t%s\n", mark, Printable(n.ID), Printable(nodeSummary(n.Info, now)))
		}
	}
	ew.printf("fenced (%d):\n", len(cl.Fenced))
	for _, m := range cl.Fenced {
		if m.Err != nil {
			ew.printf("    %s %s\t%s\n", m.Role, Printable(m.ID), Printable(unparseable(m.Raw, m.Err)))
			continue
		}
		ew.printf("    %s %s\t%s\n", m.Role, Printable(m.ID), Printable(markerSummary(m.Record, now)))
	}
	ew.printf("zookeeper (%d):\n", len(cl.ZooKeeper))
	for _, m := range cl.ZooKeeper {
		ew.printf("    %s\t%s\n", Printable(m.Address), Printable(memberSummary(m.Mode, m.Error)))
	}
	if cl.Postgres != nil {
		ew.printf("postgres (%d):\n", len(cl.Postgres))
		for _, m := range cl.Postgres {
			ew.printf("    %s\t%s\n", Printable(m.Address), Printable(memberSummary(m.Role, strings.Join(slices.DeleteFunc([]string{m.Note, m.Error}, func(s string) bool { return s == "" }), "; "))))
		}
	}
	if ew.err != nil {
		return ew.err
	}
	return tw.Flush()
}

type nodeJSON struct {
	ID     string    `json:"id"`
	Path   string    `json:"path"`
	Leader bool      `json:"leader,omitempty"`
	Info   *NodeInfo `json:"info,omitempty"`
	Error  string    `json:"error,omitempty"`
	Raw    string    `json:"raw,omitempty"`
}

type markerJSON struct {
	ID     string       `json:"id"`
	Role   Role         `json:"role"`
	Path   string       `json:"path"`
	Record *FenceRecord `json:"record,omitempty"`
	Error  string       `json:"error,omitempty"`
	Raw    string       `json:"raw,omitempty"`
}

type clusterView struct {
	Leader    *string      `json:"leader"`
	Masters   []nodeJSON   `json:"masters"`
	Workers   []nodeJSON   `json:"workers"`
	Fenced    []markerJSON `json:"fenced"`
	ZooKeeper []Member     `json:"zookeeper"`
	Postgres  []Member     `json:"postgres,omitempty"`
}

func clusterJSON(cl Cluster) clusterView {
	v := clusterView{Masters: []nodeJSON{}, Workers: []nodeJSON{}, Fenced: []markerJSON{},
		ZooKeeper: append([]Member{}, cl.ZooKeeper...), Postgres: cl.Postgres}
	if cl.Leader != "" {
		v.Leader = &cl.Leader
	}
	node := func(n NodeEntry, leader bool) nodeJSON {
		j := nodeJSON{ID: n.ID, Path: n.Path, Leader: leader, Info: n.Info}
		if n.Err != nil {
			j.Error, j.Raw = n.Err.Error(), string(n.Raw)
		}
		return j
	}
	for _, n := range cl.Masters {
		v.Masters = append(v.Masters, node(n, cl.Leader != "" && n.ID == cl.Leader))
	}
	for _, n := range cl.Workers {
		v.Workers = append(v.Workers, node(n, false))
	}
	for _, m := range cl.Fenced {
		j := markerJSON{ID: m.ID, Role: m.Role, Path: m.Path}
		if m.Err != nil {
			j.Error, j.Raw = m.Err.Error(), string(m.Raw)
		} else {
			rec := m.Record
			j.Record = &rec
		}
		v.Fenced = append(v.Fenced, j)
	}
	return v
}

// memberSummary is a Member's mode or role, with the error that made it so.
func memberSummary(state, err string) string {
	if err != "" {
		return state + " (" + err + ")"
	}
	return state
}

// age formats how long before now t was: "42s", "5m3s", "3h5m", "12d4h" ("-" for an unset time).
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	switch {
	case d < time.Hour:
		return sign + d.Truncate(time.Second).String()
	case d < 48*time.Hour:
		return fmt.Sprintf("%s%dh%dm", sign, int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%s%dd%dh", sign, int(d.Hours())/24, int(d.Hours())%24)
}

func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// errWriter keeps the first write error so the printing code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
