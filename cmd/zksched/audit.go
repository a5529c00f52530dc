package main

import (
	"os"
	"os/user"
	"strconv"

	"github.com/zksched/zksched/dao"
)

// cliAudit is the audit_event row of a change made with the command line, written in the
// change's transaction: the actor is cli:<the operating-system user running the command>, an
// admin (whoever holds the database's DSN can do anything), and the client is this host.
func cliAudit(action, target string, params any) *dao.AuditEvent {
	ev := cliActor()
	ev.Action, ev.Target, ev.Params = action, target, dao.AuditParams(params)
	return ev
}

// cliActor is the command line's audit row without its change: who, in what role, from where.
func cliActor() *dao.AuditEvent {
	host, _ := os.Hostname()
	return &dao.AuditEvent{Actor: "cli:" + osUser(), Role: "admin", Client: host, Outcome: dao.AuditOK}
}

// osUser names the user running the command: the account name, or its uid when the account
// database does not know it.
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return name
	}
	return strconv.Itoa(os.Getuid())
}
