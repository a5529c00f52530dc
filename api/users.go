package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/conf"
)

// credential is one way in: a user's name, role and the SHA-256 of its token.
type credential struct {
	name string
	role Role
	hash [sha256.Size]byte
}

// id names the token a session was started with, without revealing its hash: a session
// holds only while its user still has that token.
func (c credential) id() string {
	h := sha256.Sum256(append([]byte("zksched session credential v1|"), c.hash[:]...))
	return hex.EncodeToString(h[:16])
}

// usersReloadEvery is how often the users file is looked at (one stat) for a change.
const usersReloadEvery = time.Second

// userStore holds the users of api.users-file and reads the file again when it changes,
// looking at most once every usersReloadEvery, so that every master follows an added or
// removed user within a second without a restart.
type userStore struct {
	path string
	log  zerolog.Logger
	now  func() time.Time
	// onRead, unless nil, is called (under mu) each time the file has been read again
	// successfully, missing included.
	onRead func()

	mu      sync.Mutex
	checked time.Time
	stamp   fileStamp
	users   []credential
}

// fileStamp tells one version of a file from another: a rewrite by rename changes the inode,
// an append the size, an edit in place the modification time.
type fileStamp struct {
	exists bool
	ino    uint64
	size   int64
	mtime  time.Time
}

func stampOf(fi fs.FileInfo) fileStamp {
	st := fileStamp{exists: true, size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// newUserStore reads the users file. A malformed file is an error; a missing one holds no
// user yet, which is logged.
func newUserStore(path string, log zerolog.Logger, now func() time.Time) (*userStore, error) {
	s := &userStore{path: path, log: log, now: now}
	st, users, err := s.read()
	if err != nil {
		return nil, err
	}
	if !st.exists {
		log.Warn().Str("users_file", path).Msg("the users file does not exist yet: none of its users can log in until zksched user add creates it")
	}
	s.stamp, s.users, s.checked = st, users, now()
	return s, nil
}

// read stats and reads the file.
func (s *userStore) read() (fileStamp, []credential, error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil, nil
	}
	if err != nil {
		return fileStamp{}, nil, fmt.Errorf("users file: %w", err)
	}
	users, err := conf.ReadUsersFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil, nil
	}
	if err != nil {
		return stampOf(fi), nil, err
	}
	out := make([]credential, len(users))
	for i, u := range users {
		out[i] = credential{name: u.Name, role: Role(u.Role), hash: u.TokenHash}
	}
	return stampOf(fi), out, nil
}

// current returns the users, after reading the file again if it changed. A file that has
// become unreadable or malformed holds no user until it is fixed: a removed user must not
// keep its access because an edit went wrong.
func (s *userStore) current() []credential {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.checked) < usersReloadEvery {
		return s.users
	}
	s.checked = now
	fi, err := os.Stat(s.path)
	var st fileStamp
	if err == nil {
		st = stampOf(fi)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		st = fileStamp{exists: true, mtime: now} // unreadable: read it again, and fail, below
	}
	if st == s.stamp {
		return s.users
	}
	st, users, err := s.read()
	s.stamp = st
	if err != nil {
		s.users = nil
		s.log.Error().Err(err).Str("users_file", s.path).Msg("users file unreadable: every user of it is refused until it is fixed")
		return nil
	}
	s.users = users
	if s.onRead != nil {
		s.onRead()
	}
	s.log.Info().Str("users_file", s.path).Int("users", len(users)).Bool("exists", st.exists).Msg("users file read again")
	return users
}

// sessionCheck ends the sessions that the users, as last read, no longer allow: those of a
// user removed from the users file or whose token changed (dao.APISessionsEndStale), at
// start and after every reading of the file that succeeded. The end is for good, in
// PostgreSQL: the same line coming back later (a restore, a config-management run) brings the
// token back, not the sessions, on this master and on every other. Until the users of the
// latest reading have been checked, no session is accepted.
type sessionCheck struct {
	log zerolog.Logger
	now func() time.Time
	// reads counts the readings of the users (the start's is the first); checked is the last
	// one whose sessions were checked.
	reads, checked atomic.Int64

	mu sync.Mutex
	// failed is when the check last failed: it is tried again usersReloadEvery later. A check
	// after a successful one runs at once.
	failed time.Time
}

// sessionCheckTimeout bounds one check of the sessions against the users.
const sessionCheckTimeout = 5 * time.Second

// init readies c: the users read at start are yet to be checked.
func (c *sessionCheck) init(log zerolog.Logger, now func() time.Time) {
	c.log, c.now = log, now
	c.reads.Store(1)
}

// usersRead notes that the users have been read again.
func (c *sessionCheck) usersRead() { c.reads.Add(1) }

// endStaleSessions ends the sessions of the users the latest reading no longer allows,
// unless done already; current returns the credentials now valid. With wait, it waits for a
// check under way and reports whether the sessions are checked; without, it leaves the check
// to whoever is doing it and reports nothing.
func (a *authenticator) endStaleSessions(current func() []credential, wait bool) error {
	c := &a.sessionCheck
	if c.checked.Load() == c.reads.Load() {
		return nil
	}
	if wait {
		c.mu.Lock()
	} else if !c.mu.TryLock() {
		return nil
	}
	defer c.mu.Unlock()
	n := c.reads.Load()
	if c.checked.Load() >= n {
		return nil
	}
	if now := c.now(); now.Sub(c.failed) >= usersReloadEvery {
		// The credentials are read after n: they are of reading n or a later one.
		creds := current()
		names, ids := make([]string, len(creds)), make([]string, len(creds))
		for i, cr := range creds {
			names[i], ids[i] = cr.name, cr.id()
		}
		ctx, cancel := context.WithTimeout(context.Background(), sessionCheckTimeout)
		defer cancel()
		ended, err := a.db.APISessionsEndStale(ctx, names, ids)
		if err != nil {
			c.failed = now
			c.log.Error().Err(err).Msg("the sessions of removed or changed users could not be ended: no session is accepted until they are")
		} else {
			c.failed = time.Time{}
			if len(ended) > 0 {
				c.log.Info().Strs("users", ended).Msg("sessions ended: their users left the users file or changed token")
			}
			c.checked.Store(n)
			return nil
		}
	}
	if !wait {
		return nil
	}
	return errorf(http.StatusServiceUnavailable, "sessions cannot be checked against the users file now: try again in a few seconds")
}
