package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
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
	s.log.Info().Str("users_file", s.path).Int("users", len(users)).Bool("exists", st.exists).Msg("users file read again")
	return users
}
