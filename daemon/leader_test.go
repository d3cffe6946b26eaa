package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/store"
)

// flakyLeases is a lease store that can be cut off, as a replica that
// loses its database connection.
type flakyLeases struct {
	*store.Store
	down atomic.Bool
}

func (f *flakyLeases) TryLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (store.Lease, error) {
	if f.down.Load() {
		return store.Lease{}, errors.New("store unreachable")
	}
	return f.Store.TryLease(ctx, name, holder, now, ttl)
}

// Two replicas on one store: exactly one leads; when the leader cannot
// reach the store it stops leading before its lease expires, and the other
// takes over; the terms never overlap.
func TestElectorOneLeaderAndFailover(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const ttl = 600 * time.Millisecond
	var mu sync.Mutex
	leading := map[string]bool{}
	overlap := false
	var terms atomic.Int32
	lead := func(id string) func(context.Context) error {
		return func(ctx context.Context) error {
			mu.Lock()
			for other, on := range leading {
				if on && other != id {
					overlap = true
				}
			}
			leading[id] = true
			mu.Unlock()
			terms.Add(1)
			<-ctx.Done()
			mu.Lock()
			leading[id] = false
			mu.Unlock()
			return nil
		}
	}
	a := &flakyLeases{Store: st}
	ea := &elector{st: a, id: "a", ttl: ttl, now: time.Now, log: slog.New(slog.DiscardHandler)}
	eb := &elector{st: st, id: "b", ttl: ttl, now: time.Now, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ea.run(ctx, lead("a")) }()
	waitFor(t, "a leads", func() bool { _, on := ea.state(); return on })
	go func() { defer wg.Done(); eb.run(ctx, lead("b")) }()

	a.down.Store(true)
	waitFor(t, "b leads", func() bool { _, on := eb.state(); return on })
	if _, on := ea.state(); on {
		t.Error("a still leads")
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Error("two replicas led at once")
	}
	if terms.Load() != 2 {
		t.Errorf("%d terms, want 2", terms.Load())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A leader whose work keeps failing (its jobs return errors: a revoked
// token, GitLab unreachable from its host) steps down and sits out, so
// that another replica takes over.
func TestElectorStepsDownWhenItsWorkFails(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const ttl = 600 * time.Millisecond
	var aTerms atomic.Int32
	failing := func(ctx context.Context) error {
		aTerms.Add(1)
		return fmt.Errorf("catch-up failed 3 times in a row: %w", errLeaderWorkFailing)
	}
	working := func(ctx context.Context) error { <-ctx.Done(); return nil }
	ea := &elector{st: st, id: "a", ttl: ttl, now: time.Now, log: slog.New(slog.DiscardHandler)}
	eb := &elector{st: st, id: "b", ttl: ttl, now: time.Now, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { ea.run(ctx, failing) })
	waitFor(t, "a's first term", func() bool { return aTerms.Load() >= 1 })
	wg.Go(func() { eb.run(ctx, working) })
	waitFor(t, "b leads", func() bool { _, on := eb.state(); return on })
	if _, on := ea.state(); on {
		t.Error("a still leads")
	}
}

// every ends the leader's term after stepDownAfter failed runs in a row
// over at least two lease periods; a success in between starts the count
// again.
func TestEveryGivesUpAfterFailuresInARow(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Each run takes 5 s on this clock: three failed runs span 10 s,
	// less than two 15 s lease periods; the sixth failure is 25 s after
	// the first of its streak.
	var clockMu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return now
	}
	d := &Daemon{opts: Options{Now: clock, ReplicaID: "r", LeaderLease: 15 * time.Second}, store: st, log: slog.New(slog.DiscardHandler), metrics: newMetrics(true)}
	outcomes := []bool{false, false, true, false, false, false, false, false, false, false} // false: the run fails
	runs := 0
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		done <- d.every(ctx, "catch-up", time.Millisecond, func(context.Context) error {
			ok := runs >= len(outcomes) || outcomes[runs]
			runs++
			clockMu.Lock()
			now = now.Add(5 * time.Second)
			clockMu.Unlock()
			if ok {
				return nil
			}
			return errors.New("401 Unauthorized")
		})
	}()
	err = wait(t, "every to give up", done)
	if !errors.Is(err, errLeaderWorkFailing) || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("every = %v; want errLeaderWorkFailing with the job's error", err)
	}
	if runs != 9 {
		t.Errorf("gave up after %d runs, want 9", runs)
	}
	runsOf, err := st.JobRuns(t.Context())
	if err != nil || len(runsOf) != 1 || runsOf[0].Err == "" {
		t.Errorf("recorded runs %+v, %v: want the failure recorded", runsOf, err)
	}
}
