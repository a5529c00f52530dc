package main

import "context"

// checkDBRole reads, once at start, whether the node's database role could rewrite the audit
// trail without DDL (dao.RolePowers), warns if so, and keeps the answer for /readyz. The node
// stays ready either way: such a role runs zksched correctly, and a development or migration
// setup may knowingly use one; the warning is for whoever reads the log or the probe.
func (n *node) checkDBRole(ctx context.Context) {
	p, err := n.db.RolePowersRead(ctx)
	if err != nil {
		n.dbRole = p
		n.dbRoleWarning = "unchecked: " + err.Error()
		n.log.Warn().Err(err).Msg("could not check the powers of the database role")
		return
	}
	n.dbRole, n.dbRoleWarning = p, p.Warning()
	if n.dbRoleWarning != "" {
		n.log.Warn().Str("db_role", p.Role).Strs("powers", p.Held()).Msg(n.dbRoleWarning)
	}
}

// dbRoleDetails are the lines of /readyz about the database role: its name, and a warning
// when it has powers zksched does not need.
func (n *node) dbRoleDetails(details map[string]any) {
	details["database_role"] = n.dbRole.Role
	if n.dbRoleWarning != "" {
		details["database_role_warning"] = n.dbRoleWarning
	}
}
