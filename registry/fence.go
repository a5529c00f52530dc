package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/go-zookeeper/zk"
)

// Errors of the fencing primitives. Check them with errors.Is.
var (
	// ErrFenced: the identity has a fence marker and may never register again. The error is a
	// *FencedError carrying the marker.
	ErrFenced = errors.New("node is fenced")
	// ErrNotLeader: the caller's election znode is gone, so it may no longer be the leader.
	ErrNotLeader = errors.New("not the leader: election znode is gone")
	// ErrNodeRegistered: the node to fence is registered (again).
	ErrNodeRegistered = errors.New("node is registered")
	// ErrAlreadyFenced: the marker exists; a previous leader fenced the node.
	ErrAlreadyFenced = errors.New("node is already fenced")
	// ErrNoMarker: there is no marker to finish.
	ErrNoMarker = errors.New("no fence marker")
)

// FencedError says that an identity is fenced: its marker failover-finish-nodes/<role>/<id>
// exists. Record is the parsed marker; if the data does not parse, Raw holds it and ParseErr says
// why (the node is fenced all the same: the marker's existence is what counts).
type FencedError struct {
	Role     Role
	ID       string
	Record   FenceRecord
	Raw      []byte
	ParseErr error
}

// Error says who fenced the node and when, or why the marker could not be read.
func (e *FencedError) Error() string {
	if e.ParseErr != nil {
		return fmt.Sprintf("%s %s is fenced (marker: %v)", e.Role, e.ID, e.ParseErr)
	}
	return fmt.Sprintf("%s %s is fenced (by %s at %s, phase %s)", e.Role, e.ID, e.Record.Leader,
		e.Record.FencedAt.Format(time.RFC3339), e.Record.Phase)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// MarkerEntry is one fence marker as read from ZooKeeper. Err is set (a *DataError) when its data
// does not parse; such entries are returned, never dropped.
type MarkerEntry struct {
	Path   string
	Role   Role
	ID     string
	Record FenceRecord
	Raw    []byte
	Err    error
}

// Members lists the ids registered under nodes/<role>s and sets a children watch: ch is closed at
// the next change (once). Watches can be lost across reconnects: the caller also resyncs
// periodically.
func (c *Client) Members(ctx context.Context, role Role) (ids []string, ch <-chan struct{}, err error) {
	if !role.valid() {
		return nil, nil, fmt.Errorf("members: unknown role %q", role)
	}
	dir := c.layout.nodesDir(role)
	if err := c.sync(ctx, dir); err != nil {
		return nil, nil, fmt.Errorf("members of %s: %w", dir, err)
	}
	ids, ch, err = c.childrenW(ctx, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("members of %s: %w", dir, err)
	}
	sort.Strings(ids)
	return ids, ch, nil
}

// MemberInfo reads the NodeInfo of a registered node. It returns an error wrapping
// zk.ErrNoNode when the node is not registered, and a *DataError when its data does not parse.
func (c *Client) MemberInfo(ctx context.Context, role Role, id string) (NodeInfo, error) {
	if !role.valid() {
		return NodeInfo{}, fmt.Errorf("member info: unknown role %q", role)
	}
	if err := validID(id); err != nil {
		return NodeInfo{}, fmt.Errorf("member info: %w", err)
	}
	p := c.layout.nodePath(role, id)
	raw, err := c.get(ctx, p)
	if err != nil {
		return NodeInfo{}, fmt.Errorf("member info %s: %w", p, err)
	}
	info, err := parseNodeInfo(p, role, id, raw)
	if err != nil {
		return NodeInfo{}, err
	}
	return *info, nil
}

// Fence fences a lost node in one multi, run by the leader: its election znode must still exist
// (a deposed leader fences nothing), the node must be absent (create and delete of
// nodes/<role>s/<id>), and the marker is created with rec in phase fenced.
//
// rec's Phase is set to PhaseFenced and FinishedAt cleared. It returns ErrNotLeader,
// ErrNodeRegistered or ErrAlreadyFenced as the multi says. When the connection drops mid-way it
// reads the marker back: the marker with exactly rec's data means the multi committed; otherwise
// it tries again once connected, until ctx is done.
func (c *Client) Fence(ctx context.Context, electionZnode string, rec FenceRecord) error {
	rec.Phase, rec.FinishedAt = PhaseFenced, nil
	node := c.layout.nodePath(rec.Role, rec.ID)
	return c.writeMarker(ctx, "fence", electionZnode, rec, func(marker string, data []byte) []any {
		return []any{
			&zk.CreateRequest{Path: node, Acl: c.acl},
			&zk.DeleteRequest{Path: node, Version: -1},
			&zk.CreateRequest{Path: marker, Data: data, Acl: c.acl},
		}
	}, func(op int, err error) error {
		switch {
		case op == 1 && errors.Is(err, zk.ErrNodeExists):
			return ErrNodeRegistered
		case op == 3 && errors.Is(err, zk.ErrNodeExists):
			return ErrAlreadyFenced
		}
		return nil
	})
}

// FinishMarker rewrites the marker with rec in phase finished (FinishedAt set to now if nil), in a
// multi with the leader check. It returns ErrNotLeader or ErrNoMarker as the multi says.
func (c *Client) FinishMarker(ctx context.Context, electionZnode string, rec FenceRecord) error {
	rec.Phase = PhaseFinished
	if rec.FinishedAt == nil {
		now := time.Now()
		rec.FinishedAt = &now
	}
	return c.writeMarker(ctx, "finish marker", electionZnode, rec, func(marker string, data []byte) []any {
		return []any{&zk.SetDataRequest{Path: marker, Data: data, Version: -1}}
	}, func(op int, err error) error {
		if op == 1 && errors.Is(err, zk.ErrNoNode) {
			return ErrNoMarker
		}
		return nil
	})
}

// writeMarker writes rec as the marker of its node, as the leader whose election znode is
// electionZnode, for Fence and FinishMarker (what names the call in errors): one multi of the
// leader check (op 0) and the ops that build returns for the marker's path and rec's data.
// A failed multi returns ErrNotLeader when the election znode is gone, else what failed makes
// of the failing op's index and error, else the error itself. A connection that drops mid-way
// leaves the outcome unknown: the marker is read back, and holding exactly rec's data means the
// multi committed; otherwise it tries again once connected, until ctx is done.
func (c *Client) writeMarker(ctx context.Context, what, electionZnode string, rec FenceRecord,
	build func(marker string, data []byte) []any, failed func(op int, err error) error) error {
	if err := checkRecord(rec); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if electionZnode == "" {
		return fmt.Errorf("%s %s %s: %w", what, rec.Role, rec.ID, ErrNotLeader)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("%s %s %s: %w", what, rec.Role, rec.ID, err)
	}
	marker := c.layout.markerPath(rec.Role, rec.ID)
	ops := append([]any{&zk.CheckVersionRequest{Path: electionZnode, Version: -1}}, build(marker, data)...)
	return c.retryAmbiguous(ctx, func() error {
		_, op, err := c.multi(ctx, ops...)
		if err == nil {
			return nil
		}
		if op == 0 && errors.Is(err, zk.ErrNoNode) {
			return ErrNotLeader
		}
		if failure := failed(op, err); failure != nil {
			return failure
		}
		if connLoss(err) {
			return c.readBackMarker(ctx, marker, data, err)
		}
		return err
	}, "%s %s %s", what, rec.Role, rec.ID)
}

// DeleteMarker removes a marker, in a multi with the leader check. A marker already gone is not
// an error.
func (c *Client) DeleteMarker(ctx context.Context, electionZnode string, role Role, id string) error {
	if !role.valid() {
		return fmt.Errorf("delete marker: unknown role %q", role)
	}
	if err := validID(id); err != nil {
		return fmt.Errorf("delete marker: %w", err)
	}
	if electionZnode == "" {
		return fmt.Errorf("delete marker %s %s: %w", role, id, ErrNotLeader)
	}
	marker := c.layout.markerPath(role, id)
	ops := []any{
		&zk.CheckVersionRequest{Path: electionZnode, Version: -1},
		&zk.DeleteRequest{Path: marker, Version: -1},
	}
	return c.retryAmbiguous(ctx, func() error {
		_, op, err := c.multi(ctx, ops...)
		switch {
		case err == nil:
			return nil
		case op == 0 && errors.Is(err, zk.ErrNoNode):
			return ErrNotLeader
		case op == 1 && errors.Is(err, zk.ErrNoNode):
			return nil
		case connLoss(err):
			ok, _, rerr := c.exists(ctx, marker)
			if rerr != nil {
				return errRetry{rerr}
			}
			if !ok {
				return nil
			}
			return errRetry{err}
		}
		return err
	}, "delete marker %s %s", role, id)
}

// Marker reads the marker of one identity. found is false when there is none. A marker whose
// data does not parse is found, with a *DataError.
func (c *Client) Marker(ctx context.Context, role Role, id string) (rec FenceRecord, found bool, err error) {
	if !role.valid() {
		return FenceRecord{}, false, fmt.Errorf("marker: unknown role %q", role)
	}
	if err := validID(id); err != nil {
		return FenceRecord{}, false, fmt.Errorf("marker: %w", err)
	}
	marker := c.layout.markerPath(role, id)
	if err := c.sync(ctx, marker); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return FenceRecord{}, false, fmt.Errorf("marker %s: %w", marker, err)
	}
	raw, err := c.get(ctx, marker)
	if errors.Is(err, zk.ErrNoNode) {
		return FenceRecord{}, false, nil
	}
	if err != nil {
		return FenceRecord{}, false, fmt.Errorf("marker %s: %w", marker, err)
	}
	rec, err = parseFenceRecord(marker, role, id, raw)
	return rec, true, err
}

// Markers reads every marker of every role. Markers whose data does not parse come back with Err
// set; they are never dropped and never make the call fail.
func (c *Client) Markers(ctx context.Context) ([]MarkerEntry, error) {
	if err := c.sync(ctx, c.layout.root); err != nil {
		return nil, fmt.Errorf("markers: %w", err)
	}
	var out []MarkerEntry
	for _, role := range Roles {
		dir := c.layout.markersDir(role)
		ids, err := c.children(ctx, dir)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("markers in %s: %w", dir, err)
		}
		sort.Strings(ids)
		for _, id := range ids {
			p := dir + "/" + id
			raw, err := c.get(ctx, p)
			if errors.Is(err, zk.ErrNoNode) {
				continue // deleted since the listing
			}
			if err != nil {
				return nil, fmt.Errorf("marker %s: %w", p, err)
			}
			rec, err := parseFenceRecord(p, role, id, raw)
			out = append(out, MarkerEntry{Path: p, Role: role, ID: id, Record: rec, Raw: raw, Err: err})
		}
	}
	return out, nil
}

// fencedError reads the marker of an identity that a multi found fenced.
func (c *Client) fencedError(ctx context.Context, role Role, id string) error {
	marker := c.layout.markerPath(role, id)
	fe := &FencedError{Role: role, ID: id}
	raw, err := c.get(ctx, marker)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		// Deleted since the multi saw it (marker retention): no longer fenced; try again.
		return errRetry{fmt.Errorf("marker %s vanished", marker)}
	case err != nil:
		fe.ParseErr = fmt.Errorf("read marker %s: %w", marker, err)
	default:
		fe.Raw = raw
		fe.Record, fe.ParseErr = parseFenceRecord(marker, role, id, raw)
	}
	return fe
}

// readBackMarker decides an ambiguous write of a marker: committed if the marker holds exactly
// the data written.
func (c *Client) readBackMarker(ctx context.Context, marker string, data []byte, cause error) error {
	raw, err := c.get(ctx, marker)
	if err == nil && bytes.Equal(raw, data) {
		return nil
	}
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return errRetry{err}
	}
	return errRetry{cause}
}

// errRetry marks an attempt that did not decide anything: try again once connected.
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// retryAmbiguous runs attempt until it decides, waiting for the connection between tries.
func (c *Client) retryAmbiguous(ctx context.Context, attempt func() error, format string, args ...any) error {
	for {
		err := attempt()
		if err == nil {
			return nil
		}
		var retry errRetry
		if !errors.As(err, &retry) && !connLoss(err) {
			return fmt.Errorf(format+": %w", append(args, err)...)
		}
		// A short pause: the status may not yet say that the connection is gone.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		if werr := c.waitConnected(ctx); werr != nil {
			return fmt.Errorf(format+": %w (last attempt: %v)", append(args, werr, err)...)
		}
	}
}

// waitConnected waits until the client has a session and a server answering.
func (c *Client) waitConnected(ctx context.Context) error {
	for {
		ch := c.Changed()
		switch c.Status().State {
		case Connected:
			return nil
		case Closed:
			return errors.New("client closed")
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func checkRecord(rec FenceRecord) error {
	if !rec.Role.valid() {
		return fmt.Errorf("unknown role %q", rec.Role)
	}
	return validID(rec.ID)
}

// multi runs ops in one transaction. On failure it returns the index of the op that failed (the
// ops after it report a rollback), or -1 when the server did not answer.
func (c *Client) multi(ctx context.Context, ops ...any) ([]zk.MultiResponse, int, error) {
	conn, _ := c.current()
	res, err := call(ctx, func() ([]zk.MultiResponse, error) { return conn.Multi(ops...) })
	if err == nil {
		return res, -1, nil
	}
	for i, r := range res {
		if r.Error != nil {
			return res, i, r.Error
		}
	}
	return res, -1, err
}

func (c *Client) get(ctx context.Context, p string) ([]byte, error) {
	conn, _ := c.current()
	return call(ctx, func() ([]byte, error) {
		data, _, err := conn.Get(p)
		return data, err
	})
}

// getOwned reads a znode's data and whether it is ephemeral.
func (c *Client) getOwned(ctx context.Context, p string) ([]byte, bool, error) {
	conn, _ := c.current()
	type result struct {
		data      []byte
		ephemeral bool
	}
	r, err := call(ctx, func() (result, error) {
		data, st, err := conn.Get(p)
		return result{data, err == nil && st.EphemeralOwner != 0}, err
	})
	return r.data, r.ephemeral, err
}

func (c *Client) exists(ctx context.Context, p string) (bool, *zk.Stat, error) {
	conn, _ := c.current()
	type result struct {
		ok   bool
		stat *zk.Stat
	}
	r, err := call(ctx, func() (result, error) {
		ok, st, err := conn.Exists(p)
		return result{ok, st}, err
	})
	return r.ok, r.stat, err
}

func (c *Client) children(ctx context.Context, p string) ([]string, error) {
	conn, _ := c.current()
	return call(ctx, func() ([]string, error) {
		ch, _, err := conn.Children(p)
		return ch, err
	})
}

// sync makes the server the client talks to catch up with the leader, so that the reads after it
// are not older than what other clients already wrote (after a reconnect to a lagging follower).
func (c *Client) sync(ctx context.Context, p string) error {
	conn, _ := c.current()
	_, err := call(ctx, func() (string, error) { return conn.Sync(p) })
	return err
}
