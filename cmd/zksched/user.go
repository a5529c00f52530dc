package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/zksched/zksched/conf"
	"github.com/zksched/zksched/dao"
)

const userUsage = "add NAME --role viewer|operator|admin | list | remove NAME  [--users-file FILE | --config FILE]"

// runUser is `zksched user add|list|remove`: the users file (api.users-file) the masters read
// again whenever it changes.
func runUser(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("user", stdout)
	config := configFlag(fs)
	file := fs.String("users-file", "", "the users file (default: api.users-file of the config)")
	role := fs.String("role", "", "add: the user's role: viewer, operator or admin")
	what, args, err := parseSub(fs, args, userUsage, "add", "list", "remove")
	if err != nil {
		return err
	}
	name, args := first(args)
	switch {
	case len(args) > 0:
		return usageError{fmt.Errorf("unexpected arguments %v", args)}
	case what == "list" && name != "":
		return usageError{fmt.Errorf("user list takes no name, got %q", name)}
	case what != "list" && name == "":
		return usageError{fmt.Errorf("user %s: want a user name", what)}
	case what != "add" && *role != "":
		return usageError{fmt.Errorf("user %s takes no --role", what)}
	}
	cfg, err := loadConfig(*config)
	if err != nil {
		return err
	}
	path := *file
	if path == "" {
		if path = cfg.API.UsersFile; path == "" {
			return usageError{errors.New("no users file: give --users-file, or a config (or ZKSCHED_API_USERS_FILE) with api.users-file")}
		}
	}
	switch what {
	case "add":
		if err := conf.CheckUserName(name); err != nil {
			return usageError{err}
		}
		if err := conf.CheckUserRole(*role); err != nil {
			return usageError{fmt.Errorf("--role: %w", err)}
		}
		token, line, err := newUserLine(name, *role)
		if err != nil {
			return err
		}
		ev := cliAudit(dao.AuditUserAdd, "user/"+name, map[string]any{"role": *role, "users_file": path})
		err = auditedUserChange(ctx, cfg, stderr, ev, func(*dao.Queries) (func() error, error) {
			if err := appendUser(path, name, line); err != nil {
				return nil, err
			}
			return func() error { _, err := removeUser(path, name); return err }, nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added user %s (%s) to %s; the masters take it within a second\n", name, *role, path)
		if fi, err := os.Stat(path); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && fi.Mode().Perm()&0o077 == 0 {
				fmt.Fprintf(stdout, "note: %s belongs to root alone; the masters read it as their own user (chown zksched %s)\n", path, path)
			}
		}
		fmt.Fprintf(stdout, "its token, shown only now (the file keeps its hash): %s\n", token)
	case "remove":
		ev := cliAudit(dao.AuditUserRemove, "user/"+name, map[string]any{"users_file": path})
		err := auditedUserChange(ctx, cfg, stderr, ev, func(q *dao.Queries) (func() error, error) {
			// The user's sessions end with the removal, in PostgreSQL: its line coming back
			// later, by hand or from a backup, brings back its token but none of them, and
			// that holds whether or not a master is running now.
			if err := q.APIUserEnd(ctx, name); err != nil {
				return nil, err
			}
			line, err := removeUser(path, name)
			if err != nil {
				return nil, err
			}
			return func() error { return appendUser(path, name, line) }, nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed user %s from %s; its sessions have ended, its token stops working within a second\n", name, path)
	case "list":
		users, err := conf.ReadUsersFile(path)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tROLE\tLINE")
		for _, u := range users {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", u.Name, u.Role, u.Line)
		}
		return tw.Flush()
	}
	return nil
}

// userChangeTimeout bounds how long `zksched user add|remove` waits for the database.
const userChangeTimeout = 30 * time.Second

// auditedUserChange makes a change to the users file inside the transaction that writes its
// audit_event row (change gets that transaction, for what the database holds of users), and
// undoes the change when that transaction does not commit: the file
// never holds a change the trail lacks. The file is not in the database, so the two are not
// one atomic write: a command killed between the change and the commit leaves the change
// without its row (a crash, not a refusal).
func auditedUserChange(ctx context.Context, cfg *conf.Config, stderr io.Writer, ev *dao.AuditEvent, change func(q *dao.Queries) (undo func() error, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, userChangeTimeout)
	defer cancel()
	db, err := openDB(ctx, cfg, newLogger(cfg.Log, stderr))
	if err != nil {
		return fmt.Errorf("%w (a change of users is recorded in the audit trail: the database must be reachable)", err)
	}
	defer db.Close()
	var undo func() error
	err = db.Tx(ctx, func(q *dao.Queries) error {
		if err := q.AuditInsert(ctx, *ev); err != nil {
			return err
		}
		var err error
		undo, err = change(q)
		return err
	})
	if err != nil && undo != nil {
		if uerr := undo(); uerr != nil {
			return fmt.Errorf("%w; and undoing the change to the users file failed: %v", err, uerr)
		}
		return fmt.Errorf("%w (the users file was left as it was)", err)
	}
	return err
}

// lockUsersFile opens the users file (creating it 0600 when create is set, and its folder,
// 0755, when that is missing too: /etc/zksched on a new machine) and locks it against another
// `zksched user` at the same time. A remove replaces the file by a rename, so a lock taken on
// the file it replaced is taken again on the new one.
func lockUsersFile(path string, create bool) (*os.File, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("make the users file's folder: %w", err)
		}
	}
	for {
		f, err := os.OpenFile(path, flags, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open users file: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock users file %s: %w", path, err)
		}
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
		if err2 != nil && !create {
			return nil, fmt.Errorf("open users file: %w", err2)
		}
	}
}

// newUserLine returns a new random token and the users-file line of name with its hash.
func newUserLine(name, role string) (token, line string, err error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", fmt.Errorf("new token: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(raw)
	return token, conf.User{Name: name, Role: role, TokenHash: sha256.Sum256([]byte(token))}.String(), nil
}

// appendUser appends the line of user name to the users file, refusing a name it already has.
func appendUser(path, name, line string) error {
	f, err := lockUsersFile(path, true)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read users file: %w", err)
	}
	users, err := conf.ParseUsers(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("users file %s: %w (fix it before adding a user)", path, err)
	}
	for _, u := range users {
		if u.Name == name {
			return exitError{code: exitFailed, msg: fmt.Sprintf("user %s already exists (line %d of %s, role %s): remove it first to give it a new token", name, u.Line, path, u.Role)}
		}
	}
	line += "\n"
	if len(data) > 0 && data[len(data)-1] != '\n' {
		line = "\n" + line
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("append to users file: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		return fmt.Errorf("append to users file: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync users file: %w", err)
	}
	return nil
}

// removeUser writes the users file again without name's line, keeping every other line
// (comments included), and replaces the file by a rename, so a master never reads half of it.
func removeUser(path, name string) (removed string, err error) {
	f, err := lockUsersFile(path, false)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("read users file: %w", err)
	}
	users, err := conf.ParseUsers(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("users file %s: %w (fix it before removing a user)", path, err)
	}
	line := 0
	for _, u := range users {
		if u.Name == name {
			line = u.Line
		}
	}
	if line == 0 {
		return "", exitError{code: exitFailed, msg: fmt.Sprintf("no user %s in %s", name, path)}
	}
	lines := strings.SplitAfter(string(data), "\n")
	kept := strings.Join(append(lines[:line-1:line-1], lines[line:]...), "")
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("stat users file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return "", fmt.Errorf("write users file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write users file: %w", err)
	}
	// The masters read the file as their own user: run by root, the new file keeps the old
	// one's owner, or they could no longer read it.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil {
			tmp.Close()
			return "", fmt.Errorf("write users file: %w", err)
		}
	}
	if _, err := tmp.WriteString(kept); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write users file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write users file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write users file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("replace users file: %w", err)
	}
	return strings.TrimSuffix(lines[line-1], "\n"), nil
}
