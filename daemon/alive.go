package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
)

// alivePrefix prefixes the liveness lease of each process incarnation.
const alivePrefix = "alive:"

// newIncarnation names one run of a replica.
func newIncarnation(replica string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return replica + "/" + hex.EncodeToString(b[:])
}

// aliveStore is what the liveness lease needs of the store (*store.Store).
type aliveStore interface {
	leaseStore
	// DropLeases deletes the leases whose name starts with prefix, except
	// keep.
	DropLeases(ctx context.Context, prefix, keep string) error
}

// liveness keeps this process's liveness lease "alive:<incarnation>" and
// runs the work that other replicas must be able to take over once that
// lease has run out: the outbox sender, whose claims are signed with the
// incarnation (chain.Config.Owner). While the lease lives, other replicas
// leave those claims alone; once it has run out (the process died or lost
// the store), they take them over and look for the pipeline (by its
// DEPSD_ACTION_ID) before creating it again.
//
// The lease is renewed every ttl/3. The work runs only while the lease
// is safely held: when it could not be renewed and fewer than margin
// (ttl/3) remain before it runs out, the work's context is cancelled, so
// the sends in flight are abandoned and nothing new is claimed; once the
// lease is held again, the work starts anew (the outbox first gives back
// the claims it abandoned, see chain.Engine.RunOutbox).
//
// The guarantee this gives: another replica can take an action over only
// after this process stopped sending it, and at least margin later. A
// create request that had already reached GitLab when it was cancelled may
// still be carried out there; the new owner finds that pipeline and adopts
// it, provided GitLab finished creating it within the margin (5 s at the
// default 15 s lease). A pipeline is created twice only if GitLab takes
// longer than that for a request it received before the cancel, if the
// replicas' clocks differ by more than the margin, or if this process is
// stalled (paused, swapped out) so that it cannot cancel in time.
type liveness struct {
	st      aliveStore
	replica string // earlier runs of this replica id are dead (see run)
	holder  string // this incarnation
	ttl     time.Duration
	clock   scheduler.Clock
	log     *slog.Logger
}

// margin is how long before its lease can run out the work is stopped.
func (l *liveness) margin() time.Duration { return l.ttl / 3 }

// run keeps the lease and runs work while it is safely held, until ctx
// ends; then it stops the work, waits for it and releases the lease. work
// runs in its own goroutine, owned by run; it must return once its
// context ends. An error or return of work that run did not ask for ends
// run with that error.
func (l *liveness) run(ctx context.Context, work func(context.Context) error) error {
	name := alivePrefix + l.holder
	tick := l.ttl / 3
	var (
		expires   time.Time          // of the lease as last written; zero: never held
		stopWork  context.CancelFunc // nil when no work runs
		workDone  chan error         // nil when no work runs
		stopping  bool               // stopWork was called; waiting for workDone
		dropped   bool
		nextRenew = l.clock.Now()
	)
	safeUntil := func() time.Time { return expires.Add(-l.margin()) }
	for {
		now := l.clock.Now()
		if !now.Before(nextRenew) {
			// Earlier runs of this replica id are dead: a replica id is
			// one address, and this process holds it now. Their claims
			// are taken over at once.
			if !dropped {
				dropped = l.st.DropLeases(ctx, alivePrefix+l.replica+"/", name) == nil
			}
			// A renewal that hangs (the store unreachable) must not keep
			// the work running past the safe part of the lease.
			budget := tick
			if d := safeUntil().Sub(now); d > 0 {
				budget = d
			}
			rctx, cancel := context.WithTimeout(ctx, budget)
			lease, err := l.st.TryLease(rctx, name, l.holder, now, l.ttl)
			cancel()
			switch {
			case err != nil:
				if ctx.Err() == nil {
					l.log.Warn("renew the liveness lease", "err", err, "expires", expires)
				}
			case lease.Holder != l.holder:
				l.log.Error("liveness lease held by another process", "holder", lease.Holder)
			default:
				expires = lease.ExpiresAt
			}
			nextRenew = now.Add(tick)
			now = l.clock.Now()
		}
		safe := !expires.IsZero() && now.Before(safeUntil())
		switch {
		case safe && workDone == nil:
			wctx, cancel := context.WithCancel(ctx)
			stopWork, workDone, stopping = cancel, make(chan error, 1), false
			go func() { workDone <- work(wctx) }()
		case !safe && workDone != nil && !stopping:
			l.log.Warn("liveness lease about to run out: stopping the outbox until it is renewed", "expires", expires)
			stopWork()
			stopping = true
		}
		wake := nextRenew
		if workDone != nil && !stopping && safeUntil().Before(wake) {
			wake = safeUntil()
		}
		timer, stopTimer := l.clock.NewTimer(wake.Sub(now))
		select {
		case <-ctx.Done():
			stopTimer()
			if workDone != nil {
				stopWork()
				<-workDone
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = l.st.ReleaseLease(rctx, name, l.holder)
			return nil
		case err := <-workDone:
			stopTimer()
			if !stopping {
				// The work ended by itself: that is a failure of the
				// process (the outbox returns only when stopped).
				stopWork()
				return l.end(ctx, name, err)
			}
			stopWork()
			stopWork, workDone, stopping = nil, nil, false
			if err != nil {
				l.log.Warn("outbox stopped with an error", "err", err)
			}
		case <-timer:
		}
	}
}

// end releases the lease after the work ended by itself.
func (l *liveness) end(ctx context.Context, name string, err error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = l.st.ReleaseLease(rctx, name, l.holder)
	return err
}

var _ aliveStore = (*store.Store)(nil)

// wallClock reads the time from now and waits on real timers.
type wallClock struct{ now func() time.Time }

func (c wallClock) Now() time.Time { return c.now() }

func (wallClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
