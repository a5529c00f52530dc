package dao_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/zksched/zksched/dao"
	"github.com/zksched/zksched/dao/daotest"
	"github.com/zksched/zksched/internal/testenv"
)

// TestReplyLimitEndsAStatementOnASilentConnection: a statement whose connection goes silent
// (the link cut behind a proxy that stays up) outlives its context in lib/pq, which only
// sends a cancel request; with a reply limit it fails once the limit has passed, and the
// statements after it run on a new connection once the link is back.
func TestReplyLimitEndsAStatementOnASilentConnection(t *testing.T) {
	t.Parallel()
	_, dsn := daotest.New(t)
	at := strings.Index(dsn, "@") + 1
	slash := at + strings.Index(dsn[at:], "/")
	p := testenv.NewProxy(t, dsn[at:slash])
	db, err := dao.OpenReplyLimited(context.Background(), dsn[:at]+p.Addr()+dsn[slash:], 2, time.Second, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, _, err := db.SettingProviders(ctx); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	start := time.Now()
	done := make(chan error, 1)
	go func() { _, _, err := db.SettingProviders(ctx); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a statement on a cut connection succeeded")
		}
		t.Logf("the statement failed %v after the cut: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("a statement on a cut connection still waits 30 s after the cut, with a reply limit of 1 s")
	}
	p.Heal()
	testenv.WaitFor(t, 30*time.Second, 100*time.Millisecond, "a statement to succeed once the link is back", func() bool {
		_, _, err := db.SettingProviders(ctx)
		return err == nil
	})
}
