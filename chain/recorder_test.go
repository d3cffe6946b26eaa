package chain_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// TestRecorderGroupCommit: many concurrent recordings, each key sent
// twice, are all written (and applied) once, and exactly one of each pair
// is reported a duplicate, whether the pair met in one batch or not.
func TestRecorderGroupCommit(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	obs := &outcomes{}
	en, err := chain.New(chain.Config{Store: e.store, Graph: e.store.Graph, Now: e.clock.Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	rec := en.NewRecorder()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()

	const keys = 100
	var mu sync.Mutex
	fresh := map[string]int{}
	var wg sync.WaitGroup
	for i := range 2 * keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", i%keys)
			ev := chain.PipelineEvent{Project: "base", ProjectID: e.ids["base"], PipelineID: int64(1000 + i%keys), Ref: "main", Status: "running", Source: "push"}
			dup, err := rec.Record(e.ctx, key, chain.Event{Pipeline: &ev})
			if err != nil {
				t.Errorf("Record(%s): %v", key, err)
				return
			}
			if !dup {
				mu.Lock()
				fresh[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i := range keys {
		if k := fmt.Sprintf("k%d", i); fresh[k] != 1 {
			t.Errorf("key %s recorded %d times, want 1", k, fresh[k])
		}
	}
	// Every acknowledged event is in the database, as another process
	// (depsd restarted after kill -9) opening it now sees it: applied
	// with its recording (when it came alone to an idle recorder), or
	// waiting in the inbox.
	appliedAtOnce := len(obs.got)
	other, err := store.Open(e.ctx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = other.ViewChains(e.ctx, func(tx chain.Tx) error {
		n, err := tx.CountEvents(e.ctx)
		if err == nil && n != keys-appliedAtOnce {
			t.Errorf("another process sees %d unprocessed events, want %d (%d applied at once)", n, keys-appliedAtOnce, appliedAtOnce)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := en.ProcessInbox(e.ctx)
	if err != nil || appliedAtOnce+n != keys {
		t.Errorf("ProcessInbox = %d, %v; want %d", n, err, keys-appliedAtOnce)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ev := chain.PipelineEvent{Project: "base", PipelineID: 1}
	if _, err := rec.Record(e.ctx, "late", chain.Event{Pipeline: &ev}); !errors.Is(err, chain.ErrRecorderStopped) {
		t.Errorf("Record after Run returned: %v, want ErrRecorderStopped", err)
	}
}

// TestRecorderStoreDown: when the store cannot write, every waiter gets
// the error (the handler answers 503) and nothing is lost silently.
func TestRecorderStoreDown(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	rec := e.engine.NewRecorder()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go rec.Run(ctx)
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := chain.PipelineEvent{Project: "base", PipelineID: int64(i + 1)}
			if _, err := rec.Record(e.ctx, fmt.Sprintf("k%d", i), chain.Event{Pipeline: &ev}); err == nil {
				t.Errorf("Record %d on a closed store succeeded", i)
			}
		}()
	}
	wg.Wait()
}

// heldStore holds the first RecordEvents call until released, and counts
// the events of every call.
type heldStore struct {
	chain.Store
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	batches []int
}

func (s *heldStore) RecordEvents(ctx context.Context, evs []chain.NewEvent) ([]bool, error) {
	s.once.Do(func() { <-s.release })
	s.mu.Lock()
	s.batches = append(s.batches, len(evs))
	s.mu.Unlock()
	return s.Store.RecordEvents(ctx, evs)
}

// TestRecorderGroupsWhatArrivesDuringACommit: the recordings that arrive
// while a transaction is in progress are written together in the next
// one, not one transaction each.
func TestRecorderGroupsWhatArrivesDuringACommit(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	held := &heldStore{Store: e.store, release: make(chan struct{})}
	en, err := chain.New(chain.Config{Store: held, Graph: e.store.Graph, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// A wake-up of the inbox is pending (nothing runs it here): the
	// recorder does not apply what it records, only records it.
	en.NotifyInbox()
	rec := runRecorder(t, en.NewRecorder())

	const n = 50
	var started sync.WaitGroup
	var wg sync.WaitGroup
	record := func(i int) {
		defer wg.Done()
		ev := chain.PipelineEvent{Project: "base", ProjectID: e.ids["base"], PipelineID: int64(2000 + i), Ref: "main", Status: "running", Source: "push"}
		if _, err := rec.Record(e.ctx, fmt.Sprintf("g%d", i), chain.Event{Pipeline: &ev}); err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go record(0) // its transaction is held
	started.Add(n - 1)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func() { started.Done(); record(i) }()
	}
	started.Wait()
	for range 100 {
		runtime.Gosched() // let them reach the recorder's queue
	}
	close(held.release)
	wg.Wait()

	held.mu.Lock()
	defer held.mu.Unlock()
	total := 0
	for _, b := range held.batches {
		total += b
	}
	if total != n || len(held.batches) >= n {
		t.Errorf("%d events written in %d transactions %v; want %d in fewer", total, len(held.batches), held.batches, n)
	}
}

// runRecorder runs rec until the test ends.
func runRecorder(t *testing.T, rec *chain.Recorder) *chain.Recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return rec
}

// unprocessed counts the events waiting in the inbox.
func (e *env) unprocessed() int {
	e.t.Helper()
	var n int
	err := e.store.ViewChains(e.ctx, func(tx chain.Tx) error {
		var err error
		n, err = tx.CountEvents(e.ctx)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestRecorderAppliesAQuietEventAtOnce: with the recorder and the inbox
// idle, an upstream's success is applied in the transaction that records
// it: once Record returns, the chain runs and its action is queued, with
// nothing left for the inbox, and a second delivery under another key
// (a second hook of the project) counts nothing twice.
func TestRecorderAppliesAQuietEventAtOnce(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	rec := runRecorder(t, e.engine.NewRecorder())
	ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 77, Status: "success", Ref: "main", Source: "push", At: e.clock.Now()}
	for _, key := range []string{"hook-1", "hook-2"} {
		if dup, err := rec.Record(e.ctx, key, chain.Event{Pipeline: &ev}); dup || err != nil {
			t.Fatalf("Record(%s) = %v, %v", key, dup, err)
		}
		e.clock.Advance(10 * time.Millisecond) // quiet again
	}
	if n := e.unprocessed(); n != 0 {
		t.Errorf("%d events left for the inbox, want 0", n)
	}
	running, err := e.engine.Chains(e.ctx, chain.Filter{State: chain.Running})
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 1 {
		t.Fatalf("%d chains running, want 1", len(running))
	}
	if n := e.send(); n != 1 || e.count("app") != 1 {
		t.Errorf("sent %d, app has %d pipelines; want 1 and 1", n, e.count("app"))
	}
}

// TestRecorderAppliesOlderEventsFirst: an event another process recorded
// and nobody applied yet is applied before the quiet recording, in order:
// the success it reports starts the chain, and the recorder's later
// delivery of the same success finds it started.
func TestRecorderAppliesOlderEventsFirst(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	obs := &outcomes{}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 77, Status: "success", Ref: "main", Source: "push", At: e.clock.Now()}
	if _, err := e.store.RecordEvents(e.ctx, []chain.NewEvent{{Key: "other-process", Event: chain.Event{Pipeline: &ev}}}); err != nil {
		t.Fatal(err)
	}
	rec := runRecorder(t, en.NewRecorder())
	if dup, err := rec.Record(e.ctx, "second-hook", chain.Event{Pipeline: &ev}); dup || err != nil {
		t.Fatalf("Record = %v, %v", dup, err)
	}
	if n := e.unprocessed(); n != 0 {
		t.Errorf("%d events left for the inbox, want 0", n)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.got) != 2 || !strings.HasPrefix(obs.got[0], "started chain") || strings.HasPrefix(obs.got[1], "started chain") {
		t.Errorf("outcomes %q, want the older event to start the chain and the later one not", obs.got)
	}
}

// failingUpdates is a store whose write transactions fail.
type failingUpdates struct{ chain.Store }

func (failingUpdates) UpdateChains(context.Context, func(chain.Tx) error) error {
	return errors.New("update failed")
}

// TestRecorderRecordsForTheInboxWhenApplyingFails: when the transaction
// that would record and apply a quiet event fails, the event is still
// recorded (for the inbox, which tries again) and acknowledged.
func TestRecorderRecordsForTheInboxWhenApplyingFails(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	en, err := chain.New(chain.Config{Store: failingUpdates{e.store}, Graph: e.store.Graph, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rec := runRecorder(t, en.NewRecorder())
	ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 77, Status: "success", Ref: "main", Source: "push"}
	if dup, err := rec.Record(e.ctx, "k", chain.Event{Pipeline: &ev}); dup || err != nil {
		t.Fatalf("Record = %v, %v; want recorded", dup, err)
	}
	if n := e.unprocessed(); n != 1 {
		t.Errorf("%d events in the inbox, want 1", n)
	}
}

// announcingStore notes, for each write transaction, the events its
// context announced with chain.RecordingFirst and those it recorded.
type announcingStore struct {
	chain.Store
	mu                  sync.Mutex
	announced, recorded [][]chain.NewEvent
}

func (s *announcingStore) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	s.mu.Lock()
	s.announced = append(s.announced, chain.EventsRecordedFirst(ctx))
	s.mu.Unlock()
	return s.Store.UpdateChains(ctx, func(tx chain.Tx) error { return fn(announcedTx{tx, s}) })
}

type announcedTx struct {
	chain.Tx
	s *announcingStore
}

func (tx announcedTx) RecordEvents(ctx context.Context, evs []chain.NewEvent) ([]bool, error) {
	tx.s.mu.Lock()
	tx.s.recorded = append(tx.s.recorded, evs)
	tx.s.mu.Unlock()
	return tx.Tx.RecordEvents(ctx, evs)
}

// TestRecorderAnnouncesWhatItRecordsFirst: the quiet path's transaction
// tells the store (chain.RecordingFirst) which events it records first,
// and records exactly those, so that PostgreSQL can send the recording
// with the BEGIN.
func TestRecorderAnnouncesWhatItRecordsFirst(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	st := &announcingStore{Store: e.store}
	en, err := chain.New(chain.Config{Store: st, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rec := runRecorder(t, en.NewRecorder())
	ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 77, Status: "success", Ref: "main", Source: "push", At: e.clock.Now()}
	if dup, err := rec.Record(e.ctx, "hook-1", chain.Event{Pipeline: &ev}); dup || err != nil {
		t.Fatalf("Record = %v, %v", dup, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.recorded) != 1 || len(st.announced) == 0 {
		t.Fatalf("%d recordings in %d write transactions, want 1 in the first", len(st.recorded), len(st.announced))
	}
	got, want := st.announced[0], st.recorded[0]
	if len(got) != 1 || len(want) != 1 || &got[0] != &want[0] {
		t.Errorf("the transaction announced %v and recorded %v: want the same slice", got, want)
	}
}

// TestRecorderOnlyRecordsEventsThatWaitedTogether: events that waited
// for the recorder together (a burst, or a stall), and that a chain may
// use (successes of a project with a dependent), are recorded in one
// transaction and left to the inbox, so that their acknowledgements wait
// for the recording alone, not for applying them all.
func TestRecorderOnlyRecordsEventsThatWaitedTogether(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	rec := e.engine.NewRecorder()
	const n = 5
	var queued, wg sync.WaitGroup
	queued.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: int64(100 + i), Status: "success", Ref: "main", Source: "push"}
			queued.Done()
			if _, err := rec.Record(e.ctx, fmt.Sprintf("k%d", i), chain.Event{Pipeline: &ev}); err != nil {
				t.Error(err)
			}
		}()
	}
	queued.Wait()
	time.Sleep(50 * time.Millisecond) // all wait for Run
	runRecorder(t, rec)
	wg.Wait()
	if got := e.unprocessed(); got != n {
		t.Errorf("%d of %d events left for the inbox, want all", got, n)
	}
}

// TestRecorderOnlyRecordsAnEventThatFollowsClosely: an event a chain may
// use that comes less than quietGap after the recorder's last write (the
// engine's clock did not move) is recorded and left to the inbox, as in a
// burst.
func TestRecorderOnlyRecordsAnEventThatFollowsClosely(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	rec := runRecorder(t, e.engine.NewRecorder())
	for i, key := range []string{"first", "close-behind"} {
		ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: int64(300 + i), Status: "success", Ref: "main", Source: "push"}
		if _, err := rec.Record(e.ctx, key, chain.Event{Pipeline: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.unprocessed(); n != 1 {
		t.Errorf("%d events left for the inbox, want 1 (the second)", n)
	}
}

// TestRecorderSettlesWhatNoChainCanUseAsItRecords: in a burst (the
// clock does not move), events no chain can use are marked processed by
// the transaction that records them, so that they cost no second
// transaction and wake no inbox; the first a chain may use (base's
// success: app is downstream) is left to the inbox, and so is every event
// after it, to be applied in order.
func TestRecorderSettlesWhatNoChainCanUseAsItRecords(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	obs := &outcomes{}
	en, err := chain.New(chain.Config{Store: e.store, Graph: e.store.Graph, Now: e.clock.Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	rec := runRecorder(t, en.NewRecorder())
	for i, status := range []string{"pending", "running", "failed", "success", "running"} {
		ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: int64(400 + i), Status: status, Ref: "main", Source: "push"}
		if _, err := rec.Record(e.ctx, fmt.Sprintf("k%d", i), chain.Event{Pipeline: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.unprocessed(); n != 2 {
		t.Errorf("%d events left for the inbox, want 2 (the success and the status after it)", n)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	// The first, after a lull, is applied at once; the next two settled.
	want := []string{"settled: no chain holds the project", "settled: no chain holds the project"}
	if len(obs.got) != 3 || !slices.Equal(obs.got[1:], want) {
		t.Errorf("outcomes at recording = %q, want the first applied, then %q", obs.got, want)
	}
}

// TestRecorderLeavesABacklogToTheInbox: while the inbox has events to
// apply (it was woken and has not run), a recording does not look for
// events to settle behind them: it records only, and the inbox, once it
// runs, applies the backlog and the new event in order.
func TestRecorderLeavesABacklogToTheInbox(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	obs := &outcomes{}
	en, err := chain.New(chain.Config{Store: e.store, Graph: e.store.Graph, Now: e.clock.Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	en.NotifyInbox() // an inbox woken, not yet run
	rec := runRecorder(t, en.NewRecorder())
	for i, status := range []string{"pending", "running"} {
		ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: int64(500 + i), Status: status, Ref: "main", Source: "push"}
		if _, err := rec.Record(e.ctx, fmt.Sprintf("k%d", i), chain.Event{Pipeline: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.unprocessed(); n != 2 {
		t.Errorf("%d events left for the inbox, want both", n)
	}
	if n, err := en.ProcessInbox(e.ctx); err != nil || n != 2 {
		t.Errorf("ProcessInbox = %d, %v; want both applied", n, err)
	}
}

// busyLockStore is a store whose write lock another replica holds for
// every recording announced with RecordingFirst: it records those events
// alone and says so (RecordedOnlyError), as PostgreSQL does.
type busyLockStore struct {
	*store.Store
	recordedOnly atomic.Int32
}

func (s *busyLockStore) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	if evs := chain.EventsRecordedFirst(ctx); len(evs) > 0 {
		dups, err := s.Store.RecordEvents(ctx, evs)
		if err != nil {
			return err
		}
		s.recordedOnly.Add(1)
		return &chain.RecordedOnlyError{Duplicate: dups}
	}
	return s.Store.UpdateChains(ctx, fn)
}

// TestRecordedOnlyWhileAnotherReplicaHoldsTheLock: a lone webhook the
// store could only record (another replica held the write lock) is
// answered at once, as recorded, and this process's inbox, woken, applies
// it: the chain starts without waiting for the poll.
func TestRecordedOnlyWhileAnotherReplicaHoldsTheLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "a>b")
	s := &busyLockStore{Store: e.store}
	en, err := chain.New(chain.Config{Store: s, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now,
		PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// The recorder alone first: this process's inbox is idle, so the
	// lone event goes to applyNow.
	rec := runRecorder(t, en.NewRecorder())
	ev := chain.PipelineEvent{ProjectID: e.ids["a"], Project: "a", PipelineID: 70, Status: "success", Ref: "main", Source: "push", At: e.clock.Now()}
	dup, err := rec.Record(e.ctx, "k", chain.Event{Pipeline: &ev})
	if err != nil || dup {
		t.Fatalf("Record = %v, %v; want recorded", dup, err)
	}
	if s.recordedOnly.Load() != 1 {
		t.Fatalf("%d recordings only, want the lone event's", s.recordedOnly.Load())
	}
	if !chain.InboxWoken(en) {
		t.Fatal("the inbox was not woken for the event recorded only")
	}
	// The inbox, started now, applies it.
	stop := runWorkers(t, e.ctx, en.RunInbox)
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := en.Chains(e.ctx, chain.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no chain started: the inbox did not apply the event recorded only")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
