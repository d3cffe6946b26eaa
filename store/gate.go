package store

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// writeGate queues this process's writers in Go before they take a
// connection and the database's write lock. SQLite's busy handler polls
// with sleeps of up to 100 ms, so writers of one process that met on the
// lock would wait far longer than the transaction in front of them; here
// they wait exactly for it. Urgent writers (the webhook recordings, whose
// answer GitLab is waiting for) go before the others, so an
// acknowledgement waits for at most the one transaction in progress, not
// for a queue of chain updates. Writers of other processes still meet on
// the database's lock.
type writeGate struct {
	mu     sync.Mutex
	held   bool
	urgent []chan struct{}
	normal []chan struct{}
}

// acquire waits for the gate; the caller must release it.
func (g *writeGate) acquire(ctx context.Context, urgent bool) error {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if urgent {
		g.urgent = append(g.urgent, ch)
	} else {
		g.normal = append(g.normal, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		select {
		case <-ch: // handed over meanwhile: pass it on
			g.handOff()
		default:
			g.urgent = slices.DeleteFunc(g.urgent, func(c chan struct{}) bool { return c == ch })
			g.normal = slices.DeleteFunc(g.normal, func(c chan struct{}) bool { return c == ch })
		}
		return ctx.Err()
	}
}

// tryAcquire takes the gate if it is free, without waiting; the caller
// must release it if it did.
func (g *writeGate) tryAcquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		return false
	}
	g.held = true
	return true
}

// release hands the gate to the next waiter, urgent ones first.
func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.handOff()
}

func (g *writeGate) handOff() {
	var next chan struct{}
	switch {
	case len(g.urgent) > 0:
		next, g.urgent = g.urgent[0], g.urgent[1:]
	case len(g.normal) > 0:
		next, g.normal = g.normal[0], g.normal[1:]
	default:
		g.held = false
		return
	}
	close(next)
}

// urgentKey marks a context whose writes go first (withUrgentWrites).
type urgentKey struct{}

// withUrgentWrites marks ctx's write transactions as urgent.
func withUrgentWrites(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// noWaitKey marks a context whose write transaction must not wait for
// the gate (withoutGateWait).
type noWaitKey struct{}

// withoutGateWait makes ctx's write transaction fail with errGateBusy
// instead of waiting when the gate is held.
func withoutGateWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noWaitKey{}, true)
}

// errGateBusy is a write transaction begun withoutGateWait while another
// writer of this process held the gate.
var errGateBusy = errors.New("another writer of this process holds the write gate")

func isUrgent(ctx context.Context) bool {
	u, _ := ctx.Value(urgentKey{}).(bool)
	return u
}

// UrgentWritersWaiting reports whether an urgent writer (a webhook
// recording) waits for the gate; it implements chain.WriteYielder, so the
// inbox processor ends its transaction early for it.
func (s *Store) UrgentWritersWaiting() bool {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	return len(s.gate.urgent) > 0
}
