package store

import (
	"context"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

func TestWatchVerifyQueue(t *testing.T) { forEachBackend(t, testWatchVerifyQueue) }

// testWatchVerifyQueue: on PostgreSQL the process watching the queue (the
// leader) is woken when another process's transaction that queued a
// verification commits, not by one that rolled back; on SQLite there is
// nothing to watch and the call returns at once.
func testWatchVerifyQueue(t *testing.T, b backend) {
	leader, dsn := b.openTemp(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	woken := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() { done <- leader.WatchVerifyQueue(ctx, func() { woken <- struct{}{} }) }()
	if leader.dialect.kind != KindPostgres {
		if err := <-done; err != nil {
			t.Errorf("WatchVerifyQueue on SQLite = %v, want nil at once", err)
		}
		return
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-woken:
		case err := <-done:
			t.Fatalf("WatchVerifyQueue ended before %s: %v", what, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("not woken by %s", what)
		}
	}
	wait("listening") // the first wake-up: what was queued before

	follower, err := Open(t.Context(), dsn) // another replica
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	queue := func(pipeline int64, fail bool) error {
		return follower.UpdateChains(ctx, func(tx chain.Tx) error {
			task := chain.VerifyTask{Project: "g/app", ProjectID: 2, PipelineID: pipeline, QueuedAt: time.Now()}
			if err := tx.QueueVerify(ctx, task); err != nil {
				return err
			}
			if fail {
				return errRolledBack
			}
			return nil
		})
	}
	if err := queue(7, true); err == nil {
		t.Fatal("the rolled back transaction committed")
	}
	if err := queue(8, false); err != nil {
		t.Fatal(err)
	}
	wait("a queued verification")
	select {
	case <-woken:
		t.Error("woken twice: the rolled back transaction notified too")
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchVerifyQueue after ctx ended = %v, want nil", err)
	}
}
