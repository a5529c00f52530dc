package registry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// NodeInfo is the data of a node's ephemeral znode, plain JSON so zkCli.sh and ZooInspector show
// it readably. It is for inspection and the UI, and a worker's Groups and Slots for its peers
// (Peers): liveness is the session, never this data.
type NodeInfo struct {
	ID        string    `json:"id"`
	Role      Role      `json:"role"`
	Host      string    `json:"host"`
	Port      int       `json:"port"`
	PID       int       `json:"pid"`
	StartTime time.Time `json:"startTime"`
	Version   string    `json:"version"`
	HTTPAddr  string    `json:"httpAddr,omitempty"`
	// Groups are the worker groups a worker serves.
	Groups []string `json:"groups,omitempty"`
	// Slots is how many tasks a worker runs at once; the other workers of its groups spread
	// bursts of tasks by it (Peers).
	Slots int `json:"slots,omitempty"`
	// Running is how many tasks (worker) or workflows (master) the node runs now.
	Running int `json:"running"`
	// KillGraceMs is a worker's worker.kill-grace in milliseconds: how long its tasks may take
	// to die once it stops them. The leader waits at least this plus 1 s after the worker's
	// session expired before it re-queues the worker's tasks, whatever its own config says:
	// the worker's config may differ from the leader's. Zero: not published.
	KillGraceMs int64 `json:"killGraceMs,omitempty"`
	// HeartbeatAt is when the data was last written; the Registration sets it on every refresh.
	HeartbeatAt time.Time `json:"heartbeatAt"`
	Load        float64   `json:"load"`
}

// FencePhase is how far the failover of a fenced node has come.
type FencePhase string

// The phases of a fence marker.
const (
	// PhaseFenced: the leader created the marker; the node's work is not yet handed back.
	PhaseFenced FencePhase = "fenced"
	// PhaseFinished: the node's work has been re-queued or released.
	PhaseFinished FencePhase = "finished"
)

// FenceRecord is the data of a fence marker, failover-finish-nodes/<role>/<id>. While the marker
// exists the identity can never register again.
type FenceRecord struct {
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// LostAt is when the leader saw the node's znode disappear.
	LostAt time.Time `json:"lostAt"`
	// FencedAt is when the leader created the marker.
	FencedAt time.Time `json:"fencedAt"`
	// FinishedAt is when the failover finished; nil while Phase is PhaseFenced.
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	Phase      FencePhase `json:"phase"`
	// Leader is the identity of the master that fenced the node.
	Leader            string `json:"leader"`
	TasksRequeued     int    `json:"tasksRequeued"`
	WorkflowsReleased int    `json:"workflowsReleased"`
}

// DataError reports a znode whose data does not parse as what the layout says it holds. It is
// reported beside the znode, never fatal: one bad znode must not hide the others.
type DataError struct {
	Path string
	Raw  []byte
	Err  error
}

// Error names the znode, the reason, and a quoted prefix of the data.
func (e *DataError) Error() string {
	return fmt.Sprintf("unparseable data in %s: %v (data %s)", e.Path, e.Err, quotePrefix(e.Raw, 60))
}

// Unwrap returns the parse error.
func (e *DataError) Unwrap() error { return e.Err }

// parseNodeInfo parses the data of nodes/<role>s/<id>; the record must name the znode it is in.
func parseNodeInfo(path string, role Role, id string, raw []byte) (*NodeInfo, error) {
	var info NodeInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, &DataError{Path: path, Raw: raw, Err: err}
	}
	if info.ID != id || info.Role != role {
		return nil, &DataError{Path: path, Raw: raw,
			Err: fmt.Errorf("record says %s %q, znode is %s %q", info.Role, info.ID, role, id)}
	}
	return &info, nil
}

// parseFenceRecord parses the data of failover-finish-nodes/<role>/<id>.
func parseFenceRecord(path string, role Role, id string, raw []byte) (FenceRecord, error) {
	var rec FenceRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return FenceRecord{}, &DataError{Path: path, Raw: raw, Err: err}
	}
	if rec.ID != id || rec.Role != role {
		return rec, &DataError{Path: path, Raw: raw,
			Err: fmt.Errorf("record says %s %q, znode is %s %q", rec.Role, rec.ID, role, id)}
	}
	if rec.Phase != PhaseFenced && rec.Phase != PhaseFinished {
		return rec, &DataError{Path: path, Raw: raw, Err: fmt.Errorf("unknown phase %q", rec.Phase)}
	}
	return rec, nil
}

// Printable returns s unchanged when every rune of it is printable, and Go-quoted otherwise
// (strconv.Quote: control characters, invalid UTF-8 and invisible format characters escaped).
// Names and data read from znodes go through it before they are printed or logged, so a znode
// named with a newline or a terminal escape cannot forge a line of output or recolour a
// terminal.
func Printable(s string) string {
	for i, r := range s {
		if !strconv.IsPrint(r) || (r == utf8.RuneError && !validRuneAt(s, i)) {
			return strconv.Quote(s)
		}
	}
	return s
}

func validRuneAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size > 1
}

// quotePrefix shows at most n bytes of b as a Go-quoted string, marking a cut with "…".
func quotePrefix(b []byte, n int) string {
	if len(b) <= n {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q…", b[:n])
}

// layout knows where everything lives under the root.
type layout struct{ root string }

func (l layout) nodesDir(role Role) string            { return l.root + "/nodes/" + string(role) + "s" }
func (l layout) nodePath(role Role, id string) string { return l.nodesDir(role) + "/" + id }
func (l layout) electionDir() string                  { return l.root + "/election" }
func (l layout) markersDir(role Role) string {
	return l.root + "/failover-finish-nodes/" + string(role)
}
func (l layout) markerPath(role Role, id string) string {
	return l.markersDir(role) + "/" + id
}

// fixed lists the persistent znodes of the layout from the root down: those zksched owns even
// when the root's ancestors belong to someone else.
func (l layout) fixed() []string {
	return []string{l.root,
		l.root + "/nodes", l.nodesDir(RoleMaster), l.nodesDir(RoleWorker),
		l.electionDir(),
		l.root + "/failover-finish-nodes", l.markersDir(RoleMaster), l.markersDir(RoleWorker)}
}

// persistent lists the persistent znodes of the layout, parents first, starting with every
// ancestor of a nested root.
func (l layout) persistent() []string {
	var ps []string
	for i := 1; i < len(l.root); i++ {
		if l.root[i] == '/' {
			ps = append(ps, l.root[:i])
		}
	}
	return append(ps, l.fixed()...)
}
