package dao

import (
	"context"
	"fmt"
	"strings"
)

// RolePowers are the powers of the role a node connects as that let it past the audit trail's
// append-only trigger without any DDL (which log_statement = 'ddl' would show): a superuser may
// do anything, a role with BYPASSRLS reads and writes around row security, and one that may
// SET session_replication_role = replica turns every ordinary trigger off for its session.
// zksched needs none of them.
type RolePowers struct {
	Role               string `db:"role"`
	Superuser          bool   `db:"superuser"`
	BypassRLS          bool   `db:"bypassrls"`
	SetReplicationRole bool   `db:"set_replication_role"`
}

// Held names the powers the role has, empty when it has none.
func (p RolePowers) Held() []string {
	var held []string
	if p.Superuser {
		held = append(held, "superuser")
	}
	if p.BypassRLS {
		held = append(held, "bypassrls")
	}
	if p.SetReplicationRole {
		held = append(held, "may set session_replication_role")
	}
	return held
}

// Warning is what a node says of p: empty when the role has none of the powers, else which it
// has and what they allow.
func (p RolePowers) Warning() string {
	held := p.Held()
	if len(held) == 0 {
		return ""
	}
	return fmt.Sprintf("database role %s is %s: it can rewrite the audit trail without DDL; give zksched a role that is no superuser (bin/services.sh makes one)",
		p.Role, strings.Join(held, ", "))
}

// RolePowersRead reads the powers of the role the pool connects as. has_parameter_privilege
// (PostgreSQL 15) answers for a superuser too, and for a role granted SET on the parameter.
func (db *DB) RolePowersRead(ctx context.Context) (RolePowers, error) {
	var p RolePowers
	if err := sqlxGet(ctx, db.Queries, &p, `SELECT current_user AS role, rolsuper AS superuser, rolbypassrls AS bypassrls,
		has_parameter_privilege('session_replication_role', 'SET') AS set_replication_role
		FROM pg_roles WHERE rolname = current_user`); err != nil {
		return RolePowers{}, fmt.Errorf("read the powers of the database role: %w", err)
	}
	return p, nil
}
