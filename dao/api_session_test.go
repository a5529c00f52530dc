package dao_test

import (
	"context"
	"errors"
	"fmt"
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

// TestAPISessionsEndWithTheirUsersGeneration: ending a user's sessions deletes them and
// bumps its generation, so a session row of the generation before (a login that raced the
// end) is dead too, while a login after it lives; other users' sessions are untouched.
// APISessionsEndStale ends the sessions of the users missing from the list or whose
// credential differs, and only those.
func TestAPISessionsEndWithTheirUsersGeneration(t *testing.T) {
	t.Parallel()
	db, _ := daotest.New(t)
	ctx := context.Background()
	live := func(id string) bool {
		_, err := db.APISessionGetIfLive(ctx, []byte(id))
		if err != nil && !errors.Is(err, dao.ErrNoSession) {
			t.Fatal(err)
		}
		return err == nil
	}
	create := func(id, user, cred string) {
		if _, err := db.APISessionCreate(ctx, []byte(id), user, cred, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	create("alice-1", "alice", "cred-a")
	create("bob-1", "bob", "cred-b")
	if err := db.Tx(ctx, func(q *dao.Queries) error { return q.APIUserEnd(ctx, "alice") }); err != nil {
		t.Fatal(err)
	}
	if live("alice-1") || !live("bob-1") {
		t.Errorf("after alice's end: alice-1 live %v, bob-1 live %v; want false, true", live("alice-1"), live("bob-1"))
	}
	// A row that the end's deletion did not see, of the generation before it.
	if _, err := db.SQL().Exec(`INSERT INTO api_session (id_hash, user_name, credential, expires_at, generation)
		VALUES ('alice-raced', 'alice', 'cred-a', now() + interval '1 hour', 0)`); err != nil {
		t.Fatal(err)
	}
	create("alice-2", "alice", "cred-a")
	if live("alice-raced") || !live("alice-2") {
		t.Errorf("alice-raced live %v, alice-2 live %v; want false, true", live("alice-raced"), live("alice-2"))
	}

	create("carol-1", "carol", "cred-c")
	ended, err := db.APISessionsEndStale(ctx, []string{"alice", "carol"}, []string{"cred-a", "cred-c2"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ended) != "[bob carol]" {
		t.Errorf("ended %v, want [bob carol]: bob is gone, carol's credential changed", ended)
	}
	for id, want := range map[string]bool{"alice-2": true, "bob-1": false, "carol-1": false} {
		if live(id) != want {
			t.Errorf("%s live %v after the end of the stale sessions, want %v", id, !want, want)
		}
	}
	create("alice-3", "alice", "cred-a")
	if ended, err := db.APISessionsEndStale(ctx, []string{"alice"}, []string{"cred-a"}); err != nil || len(ended) != 0 || !live("alice-3") {
		t.Errorf("a check with nothing stale ended %v (%v); alice-3 live %v", ended, err, live("alice-3"))
	}
	if _, err := db.APISessionsEndStale(ctx, []string{"alice"}, nil); err == nil {
		t.Errorf("users and credentials of different lengths taken")
	}
}
