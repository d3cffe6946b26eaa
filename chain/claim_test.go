package chain_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// claimCountingStore counts, per write transaction, the due actions the
// engine found.
type claimCountingStore struct {
	*store.Store
	mu    sync.Mutex
	found []int // per transaction that looked for a due action
}

type claimCountingTx struct {
	chain.Tx
	n      *int
	looked *bool
}

func (t claimCountingTx) DueAction(ctx context.Context, now time.Time) (chain.Action, bool, error) {
	*t.looked = true
	a, ok, err := t.Tx.DueAction(ctx, now)
	if ok {
		*t.n++
	}
	return a, ok, err
}

func (s *claimCountingStore) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	n, looked := 0, false
	err := s.Store.UpdateChains(ctx, func(tx chain.Tx) error {
		n, looked = 0, false
		return fn(claimCountingTx{tx, &n, &looked})
	})
	if looked {
		s.mu.Lock()
		s.found = append(s.found, n)
		s.mu.Unlock()
	}
	return err
}

// Due actions are claimed together, one transaction for all the free
// slots, not one transaction each: claims wait for the write lock, which
// a rebuild of thousands of projects spent a third of its time on.
func TestOneClaimTakesActionsForEveryFreeSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x", "y", "z")
	e.engine = e.newEngine(chain.Full, e.gl)
	for _, p := range []string{"x", "y", "z"} {
		e.rebuild(p)
	}
	counting := &claimCountingStore{Store: e.store}
	en, err := chain.New(chain.Config{Store: counting, GitLab: e.gl, Graph: e.store.Graph, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := en.SendPending(e.ctx); err != nil || n != 3 {
		t.Fatalf("SendPending = %d, %v; want 3", n, err)
	}
	counting.mu.Lock()
	defer counting.mu.Unlock()
	if len(counting.found) == 0 || counting.found[0] != 3 {
		t.Errorf("due actions found per claim transaction: %v; want 3 in the first", counting.found)
	}
}

// failingRecordStore fails every look-up of an action by id (what
// recording a created pipeline starts with) while fail is set.
type failingRecordStore struct {
	*store.Store
	fail atomic.Bool
}

type failingRecordTx struct {
	chain.Tx
	s *failingRecordStore
}

func (t failingRecordTx) Action(ctx context.Context, id string) (chain.Action, bool, error) {
	if t.s.fail.Load() {
		return chain.Action{}, false, errors.New("store unreachable (test)")
	}
	return t.Tx.Action(ctx, id)
}

func (s *failingRecordStore) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	return s.Store.UpdateChains(ctx, func(tx chain.Tx) error { return fn(failingRecordTx{tx, s}) })
}

// A sender's slot bounds the creates in flight, not the recordings after
// them: once GitLab answered, the next action is sent while the first
// one's outcome waits to be recorded (behind the write lock, or here a
// store that fails for a while).
func TestNextCreateDoesNotWaitForTheRecording(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x", "y")
	e.engine = e.newEngine(chain.Full, e.gl)
	e.rebuild("x")
	e.rebuild("y")
	s := &failingRecordStore{Store: e.store}
	s.fail.Store(true)
	en, err := chain.New(chain.Config{Store: s, GitLab: e.gl, Graph: e.store.Graph, Now: e.clock.Now, SendConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := en.SendPending(e.ctx)
		done <- err
	}()
	creates := func() int {
		e.gl.mu.Lock()
		defer e.gl.mu.Unlock()
		return e.gl.creates
	}
	deadline := time.Now().Add(10 * time.Second)
	for creates() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := creates()
	s.fail.Store(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got != 2 {
		t.Errorf("%d creates while the first outcome could not be recorded, want both", got)
	}
}

// recordingStore counts the transactions that record a created pipeline
// (they look its action up by id) and holds the first until wait returns.
type recordingStore struct {
	*store.Store
	wait       func()
	mu         sync.Mutex
	recordings int
}

type recordingTx struct {
	chain.Tx
	s      *recordingStore
	looked *bool
}

func (t recordingTx) Action(ctx context.Context, id string) (chain.Action, bool, error) {
	if !*t.looked {
		*t.looked = true
		t.s.mu.Lock()
		t.s.recordings++
		first := t.s.recordings == 1
		t.s.mu.Unlock()
		if first {
			t.s.wait()
		}
	}
	return t.Tx.Action(ctx, id)
}

func (s *recordingStore) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	return s.Store.UpdateChains(ctx, func(tx chain.Tx) error {
		looked := false
		return fn(recordingTx{tx, s, &looked})
	})
}

// The pipelines created while a recording waits for the write lock are
// recorded together in the next transaction, not one transaction each.
func TestOutcomesAreRecordedTogether(t *testing.T) {
	t.Parallel()
	names := []string{"p1", "p2", "p3", "p4", "p5"}
	e := newEnv(t, chain.Full, names...)
	e.engine = e.newEngine(chain.Full, e.gl)
	for _, p := range names {
		e.rebuild(p)
	}
	s := &recordingStore{Store: e.store}
	en, err := chain.New(chain.Config{Store: s, GitLab: e.gl, Graph: e.store.Graph, Now: e.clock.Now, SendConcurrency: len(names)})
	if err != nil {
		t.Fatal(err)
	}
	s.wait = func() {
		// The first recording holds the write lock until the other
		// four pipelines wait to be recorded.
		deadline := time.Now().Add(10 * time.Second)
		for chain.SentQueued(en) < len(names)-1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	if n, err := en.SendPending(e.ctx); err != nil || n != len(names) {
		t.Fatalf("SendPending = %d, %v; want %d", n, err, len(names))
	}
	if s.recordings != 2 {
		t.Errorf("%d transactions recorded %d pipelines, want 2 (the first, then the rest together)", s.recordings, len(names))
	}
}

// A send handed over by the transaction that queued it needs no claim
// when it ends: nothing was left due. Such claims found nothing, after
// waiting for the write lock ahead of the inbox.
func TestHandedSendEndsWithoutAClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x")
	counting := &claimCountingStore{Store: e.store}
	en, err := chain.New(chain.Config{Store: counting, GitLab: e.gl, Graph: e.store.Graph, Now: e.clock.Now,
		PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorkers(t, e.ctx, en.RunOutbox)
	defer stop() // if the test ends early
	claims := func() int {
		counting.mu.Lock()
		defer counting.mu.Unlock()
		return len(counting.found)
	}
	// RunOutbox claims once as it starts.
	deadline := time.Now().Add(10 * time.Second)
	for (!chain.OutboxRunning(en) || claims() < 1) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	id, err := en.Rebuild(e.ctx, "x", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = en
	for states(e.chain(id)) != "x=triggered" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	stop()
	e.wantStates(id, "x=triggered")
	if n := claims(); n != 1 {
		t.Errorf("%d claim transactions, want 1 (RunOutbox's first)", n)
	}
}
