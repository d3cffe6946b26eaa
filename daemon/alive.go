package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
)

// alivePrefix prefixes the liveness lease of each process incarnation.
const alivePrefix = "alive:"

// newIncarnation names one run of a replica: replica/<host mark>-<random>
// (hostMark: which host it runs on).
func newIncarnation(replica string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return replica + "/" + hostMark() + "-" + hex.EncodeToString(b[:])
}

// sameHostRun reports whether incarnation is a run of replica on this
// host (newIncarnation).
func sameHostRun(incarnation, replica string) bool {
	return strings.HasPrefix(incarnation, replica+"/"+hostMark()+"-")
}

// aliveStore is what the liveness lease needs of the store (*store.Store).
type aliveStore interface {
	leaseStore
	// LiveLeases returns the leases whose name starts with prefix and
	// that have not expired at now.
	LiveLeases(ctx context.Context, prefix string, now time.Time) ([]store.Lease, error)
	// DropLease deletes the lease l.Name if it still has l's holder and
	// expiry; dropped is false when it was renewed (or is gone) since.
	DropLease(ctx context.Context, l store.Lease) (dropped bool, err error)
}

// replicaIDInUseError is start's answer when another live process runs
// under the same replica id: a configuration error (a copied
// --replica-id), which `depsd serve` refuses to run with.
type replicaIDInUseError struct {
	replica string // the id both were given
	other   string // the other process's incarnation, if known
	// lock is the run lock the other holds on this host (runlock.go);
	// empty when the other was told by its renewed liveness lease.
	lock string
}

func (e *replicaIDInUseError) Error() string {
	how := fmt.Sprintf("its run %s keeps renewing its liveness lease", e.other)
	if e.lock != "" {
		how = fmt.Sprintf("it holds the run lock %s on this host", e.lock)
		if e.other != "" {
			how = fmt.Sprintf("its run %s holds the run lock %s on this host", e.other, e.lock)
		}
	}
	return fmt.Sprintf("replica id %q is already used by another running depsd serve (%s); refusing to start, "+
		"nothing was sent: give each replica its own --replica-id, or leave it unset for the default (host name "+
		"and listen port)", e.replica, how)
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
// replicas' clocks differ by more than the margin, if this process is
// stalled (paused, swapped out) so that it cannot cancel in time, or if a
// second process given this one's replica id starts while this one cannot
// renew: that one takes this one for a dead earlier run when it stops
// sending, without the margin (see start; a renewing twin is refused).
type liveness struct {
	st      aliveStore
	replica string // the replica id: start settles its other runs
	holder  string // this incarnation
	ttl     time.Duration
	clock   scheduler.Clock
	log     *slog.Logger
	// earlierDead: this run holds the run lock of its replica id on this
	// host (runlock.go), so every earlier run here is dead: their leases
	// are dropped at once instead of watched.
	earlierDead bool
}

// margin is how long before its lease can run out the work is stopped.
func (l *liveness) margin() time.Duration { return l.ttl / 3 }

// start takes this run's liveness lease and settles the live leases of
// the other runs of its replica id, before anything is served or sent
// (Daemon.Run calls it; run then keeps the lease). A replica id names one
// replica, so another run under it is either this replica's earlier run,
// dead (a crash-restart), or a second live process given the same id by
// mistake (a twin). Dropping a twin's lease would void the claims of the
// actions it is still sending, and another replica would send them again;
// so start watches each such lease, renewing its own meanwhile (a twin
// starting at the same moment sees it, and at least one of the two sees
// the other):
//
//   - rewritten (its expiry moved): a live twin. start releases its own
//     lease and returns a *replicaIDInUseError; this run has claimed
//     nothing, and the twin keeps its lease and its claims.
//   - gone (released, or run out): nothing to do.
//   - not rewritten by a margin (ttl/3) before it runs out: its run is
//     dead, or alive but unable to renew, and then it has already stopped
//     its sends by itself (run stops the work a margin before the lease
//     could run out). The lease is dropped then, only if it is still as
//     first read, so that a renewal landing at that moment counts as a
//     twin; the dead run's claims are taken over without waiting for the
//     rest of its lease. (A live twin that cannot renew then loses the
//     margin a lease running out would have left GitLab to finish the
//     create it cancelled; a run that crashed while renewing normally
//     sent last at least a margin before.)
//
// Why that bound: a live run renews every ttl/3, so by then it has had two
// chances to renew; waiting one renewal period only would take a twin
// whose renewal was slow or failed once for dead. The wait is at most 2/3
// of the lease after the old run's last renewal (10 s at the default
// 15 s), nothing when its lease is already in its last third or has run
// out, and nothing after a clean stop (the lease is released). It assumes
// the replicas share --leader-lease and have clocks in step, as the
// leases do anyway.
//
// start returns ctx's error when ctx ends first.
func (l *liveness) start(ctx context.Context) error {
	tick := l.ttl / 3
	var (
		held      bool                   // this run's lease was taken
		watched   map[string]store.Lease // other runs' live leases as first read; nil until read
		nextRenew = l.clock.Now()
	)
	for {
		now := l.clock.Now()
		if !now.Before(nextRenew) {
			if _, ok := l.take(ctx, now, tick); ok {
				held = true
			}
			nextRenew = now.Add(tick)
		}
		wake := nextRenew
		if held { // only then: a twin starting now must be able to see this run
			var err error
			if watched, wake, err = l.settle(ctx, watched, now, wake); err != nil {
				l.release(ctx)
				return err
			}
			if watched != nil && len(watched) == 0 {
				return nil
			}
		}
		timer, stopTimer := l.clock.NewTimer(wake.Sub(now))
		select {
		case <-ctx.Done():
			stopTimer()
			l.release(ctx)
			return ctx.Err()
		case <-timer:
		}
	}
}

// settle reads the live leases of the other runs of this replica id and
// decides what it can about those in watched (see start): it returns
// those still undecided (on the first call, all there are; nil while they
// could not be read), when to look again at the latest (before wake), and
// a *replicaIDInUseError for a live twin.
func (l *liveness) settle(ctx context.Context, watched map[string]store.Lease, now, wake time.Time) (map[string]store.Lease, time.Time, error) {
	leases, err := l.st.LiveLeases(ctx, alivePrefix+l.replica+"/", now)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("read the liveness leases of this replica id", "err", err)
		}
		return watched, wake, nil
	}
	current := make(map[string]store.Lease, len(leases))
	for _, o := range leases {
		if o.Holder != l.holder {
			current[o.Name] = o
		}
	}
	if watched == nil {
		watched = current
		for _, o := range watched {
			if l.earlierDead && sameHostRun(o.Holder, l.replica) {
				continue // dropped below
			}
			l.log.Info("another run of this replica id holds a live liveness lease: waiting to see whether it is renewed",
				"holder", o.Holder, "expires", o.ExpiresAt, "decide_at", o.ExpiresAt.Add(-l.margin()))
		}
	}
	for n, seen := range watched {
		cur, live := current[n]
		deadline := seen.ExpiresAt.Add(-l.margin())
		switch {
		case !live:
			delete(watched, n) // released, or run out
		case cur.Holder != seen.Holder || !cur.ExpiresAt.Equal(seen.ExpiresAt):
			return nil, wake, &replicaIDInUseError{replica: l.replica, other: cur.Holder}
		case !now.Before(deadline) || l.earlierDead && sameHostRun(seen.Holder, l.replica):
			// Not renewed in time: dead, or no longer sending; or an
			// earlier run on this host, which the run lock says is
			// dead. A renewal landing now keeps the lease in place,
			// and the next look sees it.
			dropped, err := l.st.DropLease(ctx, seen)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					l.log.Warn("drop the liveness lease of an earlier run", "holder", seen.Holder, "err", err)
				}
			case dropped:
				l.log.Info("earlier run of this replica id is dead: its claims are taken over", "holder", seen.Holder)
				delete(watched, n)
			}
		case deadline.Before(wake):
			wake = deadline
		}
	}
	return watched, wake, nil
}

// take takes or renews this run's liveness lease at now, giving the store
// at most budget, and reports whether this run holds it; failures are
// logged.
func (l *liveness) take(ctx context.Context, now time.Time, budget time.Duration) (store.Lease, bool) {
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	lease, err := l.st.TryLease(rctx, alivePrefix+l.holder, l.holder, now, l.ttl)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.log.Warn("take or renew the liveness lease", "err", err)
		}
		return store.Lease{}, false
	case lease.Holder != l.holder:
		l.log.Error("liveness lease held by another process", "holder", lease.Holder)
		return store.Lease{}, false
	}
	return lease, true
}

// run keeps the lease and runs work while it is safely held, until ctx
// ends; then it stops the work, waits for it and releases the lease. work
// runs in its own goroutine, owned by run; it must return once its
// context ends. An error or return of work that run did not ask for ends
// run with that error.
func (l *liveness) run(ctx context.Context, work func(context.Context) error) error {
	tick := l.ttl / 3
	var (
		expires   time.Time          // of the lease as last written; zero: never held
		stopWork  context.CancelFunc // nil when no work runs
		workDone  chan error         // nil when no work runs
		stopping  bool               // stopWork was called; waiting for workDone
		nextRenew = l.clock.Now()
	)
	safeUntil := func() time.Time { return expires.Add(-l.margin()) }
	for {
		now := l.clock.Now()
		if !now.Before(nextRenew) {
			// A renewal that hangs (the store unreachable) must not keep
			// the work running past the safe part of the lease.
			budget := tick
			if d := safeUntil().Sub(now); d > 0 {
				budget = d
			}
			if lease, ok := l.take(ctx, now, budget); ok {
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
			l.release(ctx)
			return nil
		case err := <-workDone:
			stopTimer()
			if !stopping {
				// The work ended by itself: that is a failure of the
				// process (the outbox returns only when stopped).
				stopWork()
				l.release(ctx)
				return err
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

// release gives this run's liveness lease up, so that what it claimed is
// taken over at once; it tries for 5 s even once ctx has ended.
func (l *liveness) release(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = l.st.ReleaseLease(rctx, alivePrefix+l.holder, l.holder)
}

var _ aliveStore = (*store.Store)(nil)

// wallClock reads the time from now and waits on real timers.
type wallClock struct{ now func() time.Time }

func (c wallClock) Now() time.Time { return c.now() }

func (wallClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// dropDeadLeader drops the leader lease when the run lock says its holder
// is a dead earlier run of this replica on this host (a crash while
// leading), so that a replica leads at once instead of after the lease
// ran out. A renewal landing meanwhile keeps it (DropLease checks).
func (d *Daemon) dropDeadLeader(ctx context.Context) {
	if !d.alive.earlierDead {
		return
	}
	leases, err := d.store.LiveLeases(ctx, leaderLease, d.opts.Now())
	if err != nil {
		return
	}
	for _, l := range leases {
		if l.Name == leaderLease && l.Holder != d.incarnation && sameHostRun(l.Holder, d.opts.ReplicaID) {
			if dropped, err := d.store.DropLease(ctx, l); err == nil && dropped {
				d.log.Info("the leader was a dead earlier run of this replica id: its lease is dropped", "holder", l.Holder)
			}
		}
	}
}
