package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"gitlab.com/depsd/depsd/store"
)

// leaderLease names the lease row the replicas compete for.
const leaderLease = "leader"

// leaseStore is what leader election needs of the store: a lease row that
// works the same on SQLite and PostgreSQL (*store.Store).
type leaseStore interface {
	// TryLease takes or renews the lease for holder until now+ttl if it
	// is free, expired or holder's, and returns the lease as it stands.
	TryLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (store.Lease, error)
	// ReleaseLease gives the lease up if holder holds it.
	ReleaseLease(ctx context.Context, name, holder string) error
}

// elector makes one replica at a time the leader: the one that runs the
// schedules, the maintenance job, the reconciler and the catch-up. Every
// replica campaigns every ttl/3; the holder renews at the same pace. A
// leader that cannot renew (the store is down, or another took the lease)
// stops its leader work before its lease runs out, so two leaders never
// overlap while clocks agree; a dead leader's lease expires after at most
// ttl and a follower takes it within ttl/3 more, well inside two lease
// periods. The fires themselves are claimed in the store as well, so even
// an overlap from a stalled process or a clock jump fires nothing twice.
// A leader whose work keeps failing steps down and sits out (see run).
type elector struct {
	st  leaseStore
	id  string
	ttl time.Duration
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	current store.Lease // as last read or written
	leading bool
}

// run campaigns until ctx ends. While this replica leads, lead runs with a
// context that ends when leadership is lost or ctx ends; run waits for it
// to return before campaigning again, and releases the lease on the way
// out so that another replica takes over at once.
//
// A term whose lead fails (returns an error by itself: its jobs keep
// failing, see Daemon.every) ends with the lease released, and this
// replica then sits out of the election for a lease period, doubled after
// each further failed term in a row (up to 16 periods), so that another
// replica takes over; a term that ends otherwise resets the sit-out.
func (e *elector) run(ctx context.Context, lead func(context.Context) error) error {
	tick := e.ttl / 3
	failedTerms := 0
	for {
		wait := tick
		lease, err := e.st.TryLease(ctx, leaderLease, e.id, e.now(), e.ttl)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				e.log.Warn("leader election: store unavailable", "err", err)
			}
		case lease.Holder == e.id:
			e.set(lease, true)
			if e.term(ctx, lease, lead) {
				failedTerms++
				wait = e.ttl << min(failedTerms-1, 4)
				e.log.Warn("leader: stepped down because its work failed; sitting out", "sit_out", wait)
			} else {
				failedTerms = 0
			}
		default:
			e.set(lease, false)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// term runs lead while the lease is renewed. failed reports that lead
// returned an error by itself; the lease is then released.
func (e *elector) term(ctx context.Context, lease store.Lease, lead func(context.Context) error) (failed bool) {
	e.log.Info("leadership taken", "until", lease.ExpiresAt)
	termCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lead(termCtx) }()
	tick := time.NewTicker(e.ttl / 3)
	defer tick.Stop()
	expires := lease.ExpiresAt
	reason := ""
	for reason == "" {
		select {
		case <-ctx.Done():
			reason = "shutting down"
		case err := <-done:
			done <- err // keep it for the wait below
			reason = "leader work ended"
			if err != nil {
				e.log.Error("leader work failed", "err", err)
				reason, failed = "leader work failed: "+err.Error(), true
			}
		case <-tick.C:
			// A renewal that hangs (the store unreachable) must not keep
			// this replica leading past its lease.
			rctx, rcancel := context.WithDeadline(ctx, expires.Add(-e.ttl/6))
			l, err := e.st.TryLease(rctx, leaderLease, e.id, e.now(), e.ttl)
			rcancel()
			switch {
			case err != nil:
				// Step down while the lease still holds: the next attempt
				// comes a tick later, and by then another replica may
				// have taken the expired lease.
				if !e.now().Add(e.ttl/3 + e.ttl/6).Before(expires) {
					reason = "lease could not be renewed: " + err.Error()
				} else {
					e.log.Warn("leader: renewing the lease failed", "err", err)
				}
			case l.Holder != e.id:
				e.set(l, false)
				reason = "lease taken by " + l.Holder
			default:
				expires = l.ExpiresAt
				e.set(l, true)
			}
		}
	}
	cancel()
	<-done
	e.mu.Lock()
	e.leading = false
	e.mu.Unlock()
	if ctx.Err() != nil || failed {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if err := e.st.ReleaseLease(rctx, leaderLease, e.id); err != nil {
			e.log.Warn("leader: release the lease", "err", err)
		}
	}
	e.log.Info("leadership lost", "reason", reason)
	return failed
}

func (e *elector) set(l store.Lease, leading bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.current, e.leading = l, leading
}

// state returns the lease as last seen and whether this replica leads.
func (e *elector) state() (store.Lease, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.current, e.leading
}
