package api

import (
	"context"
	"net/http"
)

// Role is what a user of the API and the UI may do. Each role may do everything the roles
// before it may.
type Role string

const (
	// RoleViewer reads: lists, pages, logs, the cluster, the audit trail.
	RoleViewer Role = "viewer"
	// RoleOperator also acts on instances: kills, reruns, stops, signals, and triggers,
	// enables and disables schedules.
	RoleOperator Role = "operator"
	// RoleAdmin also stores definitions, submits from them, backfills and manages pools and
	// users.
	RoleAdmin Role = "admin"
)

var roleRank = map[Role]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return roleRank[r] > 0 }

// Allows reports whether a user with role r may do what needs role need.
func (r Role) Allows(need Role) bool { return roleRank[r] > 0 && roleRank[r] >= roleRank[need] }

// Principal is who makes a request: the user it authenticated as and that user's role.
type Principal struct {
	Name string
	Role Role
}

type principalKey struct{}

// withPrincipal returns ctx carrying p.
func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf returns who makes r: set by requireAuth for every request it lets through.
// A request that reached no authentication (open paths) is an anonymous viewer.
func principalOf(r *http.Request) Principal {
	if p, ok := r.Context().Value(principalKey{}).(Principal); ok {
		return p
	}
	return Principal{Name: "anonymous", Role: RoleViewer}
}
