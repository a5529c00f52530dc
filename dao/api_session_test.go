package dao_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
)

func TestAPISessionLifecycle(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	live, ended, revoked := []byte("live-session-hash"), []byte("ended-session-hash"), []byte("revoked-session-hash")
	exp, err := db.APISessionCreate(ctx, live, "alice", "cred-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("expires in %v, want an hour", d)
	}
	s, err := db.APISessionGetIfLive(ctx, live)
	if err != nil || s.UserName != "alice" || s.Credential != "cred-a" {
		t.Fatalf("live session = %+v, %v", s, err)
	}
	if _, err := db.APISessionCreate(ctx, ended, "bob", "cred-b", -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := db.APISessionGetIfLive(ctx, ended); !errors.Is(err, dao.ErrNoSession) {
		t.Errorf("expired session: %v, want ErrNoSession", err)
	}
	if _, err := db.APISessionCreate(ctx, revoked, "carol", "cred-c", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.APISessionRevoke(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	if _, err := db.APISessionGetIfLive(ctx, revoked); !errors.Is(err, dao.ErrNoSession) {
		t.Errorf("revoked session: %v, want ErrNoSession", err)
	}
	if err := db.APISessionRevoke(ctx, []byte("never-was")); err != nil {
		t.Errorf("revoking an unknown session: %v", err)
	}
	if _, err := db.APISessionGetIfLive(ctx, []byte("never-was")); !errors.Is(err, dao.ErrNoSession) {
		t.Errorf("unknown session: %v, want ErrNoSession", err)
	}

	// A login deletes the rows of sessions that ended over a day ago, and only those.
	if _, err := db.APISessionCreate(ctx, []byte("long-gone"), "dave", "cred-d", -25*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := db.APISessionCreate(ctx, []byte("another-login"), "erin", "cred-e", time.Hour); err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := db.SQL().Select(&names, `SELECT user_name FROM api_session ORDER BY user_name`); err != nil {
		t.Fatal(err)
	}
	if got := len(names); got != 4 || names[0] != "alice" || names[3] != "erin" {
		t.Errorf("rows left: %v, want alice, bob, carol and erin", names)
	}
}
