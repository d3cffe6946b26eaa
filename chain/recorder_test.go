package chain_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// TestRecorderGroupCommit: many concurrent recordings, each key sent
// twice, are all written (and applied) once, and exactly one of each pair
// is reported a duplicate, whether the pair met in one batch or not.
func TestRecorderGroupCommit(t *testing.T) {
	e := newEnv(t, chain.Full, "base>app")
	rec := e.engine.NewRecorder()
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
	// (depsd restarted after kill -9) opening it now sees it.
	other, err := store.Open(e.ctx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = other.ViewChains(e.ctx, func(tx chain.Tx) error {
		n, err := tx.CountEvents(e.ctx)
		if err == nil && n != keys {
			t.Errorf("another process sees %d events, want %d", n, keys)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := e.engine.ProcessInbox(e.ctx)
	if err != nil || n != keys {
		t.Errorf("ProcessInbox = %d, %v; want %d", n, err, keys)
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
	rec := en.NewRecorder()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

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
