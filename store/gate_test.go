package store

import (
	"context"
	"testing"
	"time"
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
