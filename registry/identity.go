package registry

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Role is what a node is in the cluster. It names the node's folders in ZooKeeper:
// nodes/<role>s and failover-finish-nodes/<role>.
type Role string

// The two roles.
const (
	RoleMaster Role = "master"
	RoleWorker Role = "worker"
)

// Roles lists every role, in the order inspection shows them.
var Roles = []Role{RoleMaster, RoleWorker}

func (r Role) valid() bool { return r == RoleMaster || r == RoleWorker }

// Identity returns the identity of a process started at start that serves on host:port:
// "host:port_startMillis", e.g. "10.0.0.5:5680_1763802000123". The start time makes a restarted
// process a different node, so its old incarnation can be failed over while the new one works.
func Identity(host string, port int, start time.Time) string {
	return host + ":" + strconv.Itoa(port) + "_" + strconv.FormatInt(start.UnixMilli(), 10)
}

// ParseIdentity splits an identity made by Identity. The start time has millisecond precision.
// An IPv6 host works too, since the port never contains a colon: "::1:5680_1763802000123".
func ParseIdentity(id string) (host string, port int, start time.Time, err error) {
	hostPort, millis, ok := cutLast(id, "_")
	if !ok {
		return "", 0, time.Time{}, fmt.Errorf("parse identity %q: no _startMillis suffix", id)
	}
	ms, err := strconv.ParseInt(millis, 10, 64)
	if err != nil || ms < 0 {
		return "", 0, time.Time{}, fmt.Errorf("parse identity %q: start %q is not milliseconds since the epoch", id, millis)
	}
	host, portText, ok := cutLast(hostPort, ":")
	if !ok || host == "" {
		return "", 0, time.Time{}, fmt.Errorf("parse identity %q: no host:port", id)
	}
	port, err = strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, time.Time{}, fmt.Errorf("parse identity %q: bad port %q", id, portText)
	}
	return host, port, time.UnixMilli(ms), nil
}

// validID reports whether id can name a znode: ZooKeeper refuses "/" in a name, and "." and ".."
// are reserved.
func validID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty node id")
	case id == "." || id == "..":
		return fmt.Errorf("node id %q is reserved by zookeeper", id)
	case strings.ContainsAny(id, "/\x00"):
		return fmt.Errorf("node id %q contains '/' or NUL", id)
	}
	return nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
