package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// TestWriteGateOrder: while the gate is held, urgent waiters get it before
// normal ones that came earlier, and a waiter whose context ends leaves the
// queue without blocking the others.
func TestWriteGateOrder(t *testing.T) {
	var g writeGate
	ctx := t.Context()
	if err := g.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	waiting := func(n int) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			got := len(g.urgent) + len(g.normal)
			g.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	enter := func(name string, urgent bool) {
		if err := g.acquire(ctx, urgent); err != nil {
			t.Error(err)
			return
		}
		order <- name
		g.release()
	}
	go enter("normal", false)
	waiting(1)
	gone, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- g.acquire(gone, true) }()
	waiting(2)
	go enter("urgent", true)
	waiting(3)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("acquire with an ended context succeeded")
	}
	g.release()
	if a, b := <-order, <-order; a != "urgent" || b != "normal" {
		t.Errorf("order %s, %s; want urgent, normal", a, b)
	}
	if err := g.acquire(ctx, false); err != nil || !g.held {
		t.Errorf("gate not free at the end: %v", err)
	}
}

// TestUrgentWritersWaiting: the inbox processor's signal to end its
// transaction is on exactly while a webhook recording waits for the gate.
func TestUrgentWritersWaiting(t *testing.T) {
	s := &Store{gate: &writeGate{}}
	ctx := t.Context()
	if err := s.gate.acquire(ctx, false); err != nil {
		t.Fatal(err)
	}
	if s.UrgentWritersWaiting() {
		t.Fatal("an urgent writer waits before any came")
	}
	normal := make(chan error, 1)
	go func() { normal <- s.gate.acquire(ctx, false) }()
	urgent := make(chan error, 1)
	go func() { urgent <- s.gate.acquire(ctx, true) }()
	deadline := time.Now().Add(10 * time.Second)
	for !s.UrgentWritersWaiting() {
		if time.Now().After(deadline) {
			t.Fatal("the urgent writer's wait is not seen")
		}
		time.Sleep(time.Millisecond)
	}
	s.gate.release() // to the urgent writer
	if err := <-urgent; err != nil {
		t.Fatal(err)
	}
	if s.UrgentWritersWaiting() {
		t.Error("an urgent writer still seen waiting after it got the gate")
	}
	s.gate.release() // to the normal one
	if err := <-normal; err != nil {
		t.Fatal(err)
	}
	s.gate.release()
}

// TestRecordingThatAppliesGoesFirstThroughTheGate: on SQLite, a webhook
// recording that also applies what it records (UpdateChains announced by
// chain.RecordingFirst: the recorder's way) is a webhook's answer, as
// RecordEvents is: it passes this process's other writers queued in the
// gate, so that an acknowledgement waits for the transaction in progress
// only.
func TestRecordingThatAppliesGoesFirstThroughTheGate(t *testing.T) {
	ctx := t.Context()
	s, _ := backends[0].openTemp(t)
	if err := s.gate.acquire(ctx, false); err != nil { // a transaction in progress
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	run := func(ctx context.Context, name string) chan error {
		done := make(chan error, 1)
		go func() {
			done <- s.UpdateChains(ctx, func(chain.Tx) error {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				return nil
			})
		}()
		return done
	}
	// Counted by queue: the store's checkpointer may queue in the gate
	// too, and must not stand for either.
	waiting := func(urgent bool) int {
		s.gate.mu.Lock()
		defer s.gate.mu.Unlock()
		if urgent {
			return len(s.gate.urgent)
		}
		return len(s.gate.normal)
	}
	wait := func(urgent bool) {
		for deadline := time.Now().Add(10 * time.Second); waiting(urgent) < 1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no writer queued (urgent %v)", urgent)
			}
		}
	}
	normal := run(ctx, "chain update")
	wait(false)
	ev := chain.PipelineEvent{Project: "g/p", ProjectID: 1, PipelineID: 9, Status: "running", Ref: "main"}
	recording := run(chain.RecordingFirst(ctx, []chain.NewEvent{{Key: "k", Event: chain.Event{Pipeline: &ev}}}), "recording")
	wait(true)
	s.gate.release()
	for _, done := range []chan error{normal, recording} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"recording", "chain update"}; !slices.Equal(order, want) {
		t.Errorf("order through the gate = %q, want %q", order, want)
	}
}
