package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store/pgtest"
)

// TestRecordEventsReplicasDoNotDeadlock: two replicas on one PostgreSQL
// database record batches of the same deliveries at once, in opposite
// orders (a load balancer that sends a resend to the other replica). Every
// batch is recorded without an error (a deadlock would abort one, and its
// webhooks would be answered 503), and each delivery is recorded exactly
// once.
func TestRecordEventsReplicasDoNotDeadlock(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	var replicas [2]*Store
	for i := range replicas {
		s, err := Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		replicas[i] = s
	}
	const rounds, batch = 15, 300
	fresh := map[string]int{}
	var mu sync.Mutex
	for round := range rounds {
		evs := make([]chain.NewEvent, batch)
		for i := range evs {
			ev := chain.PipelineEvent{Project: "g/p", ProjectID: 1, PipelineID: int64(i), Status: "running", Ref: "main"}
			evs[i] = chain.NewEvent{Key: fmt.Sprintf("r%d-k%03d", round, i), Event: chain.Event{Pipeline: &ev}}
		}
		reversed := slices.Clone(evs)
		slices.Reverse(reversed)
		var wg sync.WaitGroup
		for r, order := range [][]chain.NewEvent{evs, reversed} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dups, err := replicas[r].RecordEvents(t.Context(), order)
				if err != nil {
					t.Errorf("round %d, replica %d: %v", round, r, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i, dup := range dups {
					if !dup {
						fresh[order[i].Key]++
					}
				}
			}()
		}
		wg.Wait()
	}
	if len(fresh) != rounds*batch {
		t.Errorf("%d deliveries recorded, want %d", len(fresh), rounds*batch)
	}
	for k, n := range fresh {
		if n != 1 {
			t.Errorf("delivery %s recorded %d times", k, n)
		}
	}
}

// TestRecordingDoesNotWaitForAnotherReplicasLock: on PostgreSQL, a
// recording announced to be applied in its own transaction
// (chain.RecordingFirst, the Recorder's quiet path) does not wait while
// another replica holds the write lock: it is committed alone and
// UpdateChains says so (chain.RecordedOnlyError, with the duplicate
// flags), without calling fn. Once the lock is free, the same path
// records and applies as before.
func TestRecordingDoesNotWaitForAnotherReplicasLock(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := t.Context()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(writeLockKey)); err != nil {
		t.Fatal(err)
	}
	record := func(key string) (called bool, err error) {
		ev := chain.PipelineEvent{Project: "g/p", ProjectID: 1, PipelineID: 9, Status: "running", Ref: "main"}
		evs := []chain.NewEvent{{Key: key, Event: chain.Event{Pipeline: &ev}}}
		done := make(chan error, 1)
		go func() {
			done <- s.UpdateChains(chain.RecordingFirst(ctx, evs), func(tx chain.Tx) error {
				called = true
				_, err := tx.RecordEvents(ctx, evs)
				return err
			})
		}()
		select {
		case err := <-done:
			return called, err
		case <-time.After(10 * time.Second):
			t.Fatal("the recording waited for the write lock another session holds")
			return false, nil
		}
	}
	called, err := record("k1")
	var only *chain.RecordedOnlyError
	if !errors.As(err, &only) || called || len(only.Duplicate) != 1 || only.Duplicate[0] {
		t.Fatalf("with the lock held elsewhere: fn called %v, err %v; want a RecordedOnlyError of one new event", called, err)
	}
	// Again: a duplicate, still answered at once.
	if _, err := record("k1"); !errors.As(err, &only) || !only.Duplicate[0] {
		t.Fatalf("the same key again: %v, want a duplicate recorded only", err)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(writeLockKey)); err != nil {
		t.Fatal(err)
	}
	if called, err := record("k2"); err != nil || !called {
		t.Fatalf("with the lock free: fn called %v, err %v", called, err)
	}
	var n int
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		var err error
		n, err = tx.CountEvents(ctx)
		return err
	})
	if err != nil || n != 2 {
		t.Fatalf("%d events unprocessed (%v), want 2: k1 recorded once, k2", n, err)
	}
}

// TestRecordingDoesNotQueueBehindThisProcesssWriters: on PostgreSQL, a
// recording announced with chain.RecordingFirst does not wait in this
// process's write gate either, where a writer of its own (a sender's
// outcome, a claim) may itself be waiting for the write lock another
// replica holds: it is recorded on the pool and UpdateChains says so
// (chain.RecordedOnlyError), without calling fn.
func TestRecordingDoesNotQueueBehindThisProcesssWriters(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := t.Context()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(writeLockKey)); err != nil {
		t.Fatal(err)
	}
	// This process's writer: through the gate, then waiting for the lock.
	writer := make(chan error, 1)
	go func() { writer <- s.UpdateChains(ctx, func(chain.Tx) error { return nil }) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		s.gate.mu.Lock()
		held := s.gate.held
		s.gate.mu.Unlock()
		if held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never took the gate")
		}
		time.Sleep(time.Millisecond)
	}
	ev := chain.PipelineEvent{Project: "g/p", ProjectID: 1, PipelineID: 9, Status: "running", Ref: "main"}
	evs := []chain.NewEvent{{Key: "k1", Event: chain.Event{Pipeline: &ev}}}
	called := false
	done := make(chan error, 1)
	go func() {
		done <- s.UpdateChains(chain.RecordingFirst(ctx, evs), func(tx chain.Tx) error {
			called = true
			_, err := tx.RecordEvents(ctx, evs)
			return err
		})
	}()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(writeLockKey)); err != nil {
			t.Error(err)
		}
		<-done
		t.Fatal("the recording waited in the gate behind this process's writer")
	}
	var only *chain.RecordedOnlyError
	if !errors.As(err, &only) || called || len(only.Duplicate) != 1 || only.Duplicate[0] {
		t.Fatalf("behind this process's writer: fn called %v, err %v; want a RecordedOnlyError of one new event", called, err)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(writeLockKey)); err != nil {
		t.Fatal(err)
	}
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	var n int
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		var err error
		n, err = tx.CountEvents(ctx)
		return err
	})
	if err != nil || n != 1 {
		t.Fatalf("%d events unprocessed (%v), want the one recorded", n, err)
	}
}
