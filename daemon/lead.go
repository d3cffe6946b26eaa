package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/store"
)

// Names of the background jobs in `depsd status`.
const (
	jobReconcile   = "reconcile"
	jobCatchUp     = "catch-up"
	jobMaintenance = "maintenance"
	jobSchedules   = "schedules"
	jobImageWatch  = "image-watch"
)

// lead is the leader's work for one term: the schedules and maintenance
// (a scheduler built for the term), the reconciler, the catch-up, the
// verification of successful builds' images and the chains' commit
// statuses. It
// returns when ctx ends (leadership lost or shutdown).
func (d *Daemon) lead(ctx context.Context) error {
	sched, err := d.newScheduler()
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sched.Run(gctx) })
	// The health page's webhook states: looked at once per term, by the
	// leader only, so that replicas do not each list every project's hooks.
	g.Go(func() error { d.checkHooksAtStart(gctx); return nil })
	// Successful builds' images are verified by the leader alone, so no
	// two replicas read the same images (the store queues them; a leader
	// that dies leaves them to the next).
	g.Go(func() error { return d.engine.RunVerify(gctx) })
	// The chains' commit statuses are posted by the leader alone: one
	// sender, whose claims a leader that dies leaves to the next once
	// their owner's liveness lease runs out (chain/statussend.go).
	g.Go(func() error { return d.engine.RunStatuses(gctx) })
	g.Go(func() error { d.watchVerifyQueue(gctx); return nil })
	// The pin merge requests of waiting members: merged, closed, timed out.
	g.Go(func() error { return d.engine.RunPins(gctx) })
	// The validations of merge requests (premerge): candidates read,
	// merge requests followed, notes written, tags deleted.
	g.Go(func() error { return d.engine.RunValidations(gctx) })
	g.Go(func() error { return d.rescanWhenAsked(gctx) })
	g.Go(func() error {
		return d.every(gctx, jobReconcile, d.opts.ReconcileInterval, func(ctx context.Context) error {
			_, err := d.engine.Reconcile(ctx)
			// Liveness leases of processes gone for an hour are history.
			if _, perr := d.store.PruneLeases(ctx, alivePrefix, d.opts.Now().Add(-time.Hour)); perr != nil && err == nil {
				err = perr
			}
			return err
		})
	})
	g.Go(func() error {
		return d.every(gctx, jobCatchUp, d.opts.CatchUpInterval, func(ctx context.Context) error {
			res, err := d.engine.CatchUp(ctx)
			if res.Applied > 0 {
				d.log.Info("catch-up applied missed successes", "applied", res.Applied, "projects", res.Projects)
			}
			return err
		})
	})
	return g.Wait()
}

// watchVerifyQueue wakes the leader's verifier when another replica
// queues a verification (store.WatchVerifyQueue), so that a member's
// success applied there is verified at once, not at the next poll of the
// queue (5 s later, on the chain's critical path). A connection that
// fails is listened on again after listenRetry; the poll covers the gap.
func (d *Daemon) watchVerifyQueue(ctx context.Context) {
	for {
		err := d.store.WatchVerifyQueue(ctx, d.engine.NotifyVerify)
		if err == nil { // ctx ended, or SQLite: nothing to listen to
			return
		}
		d.log.Warn("listening for verifications queued by other replicas failed; polling the queue meanwhile", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(listenRetry):
		}
	}
}

// listenRetry is how long watchVerifyQueue waits before it listens again.
const listenRetry = 5 * time.Second

// stepDownAfter is how many runs in a row a leader job may fail before
// the leader steps down (see every), provided the failures span at least
// two lease periods: a store or GitLab that is back within a few seconds
// is no reason to hand over.
const stepDownAfter = 3

// errLeaderWorkFailing ends a term whose work keeps failing (see every).
var errLeaderWorkFailing = errors.New("leader work failing")

// every runs job now and then every interval until ctx ends, recording
// each run for `depsd status`. Errors are logged and the job runs again at
// the next tick; after stepDownAfter failed runs in a row it returns an
// error wrapping errLeaderWorkFailing (if the first of them was at least
// two lease periods ago), which ends the leader's term: the
// elector then steps down and sits out for a while, so that another
// replica (whose GitLab token, network or store connection may be sound)
// takes over. A replica alone takes the lease back after sitting out.
func (d *Daemon) every(ctx context.Context, name string, interval time.Duration, job func(context.Context) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failed := 0
	var failingSince time.Time
	for {
		start := d.opts.Now()
		err := job(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if failed == 0 {
				failingSince = start
			}
			failed++
			d.log.Warn("background job failed", "job", name, "err", err, "failures_in_a_row", failed)
			d.metrics.jobRuns.WithLabelValues(name, "failure").Inc()
		} else {
			failed = 0
			d.metrics.jobRuns.WithLabelValues(name, "success").Inc()
		}
		d.recordJob(ctx, name, start, err)
		if failed >= stepDownAfter && !d.opts.Now().Before(failingSince.Add(2*d.opts.LeaderLease)) {
			return fmt.Errorf("%w: %s failed %d times in a row: %w", errLeaderWorkFailing, name, failed, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// recordJob stores a job's last run; a store that is down only costs the
// record.
func (d *Daemon) recordJob(ctx context.Context, name string, start time.Time, err error) {
	r := store.JobRun{Name: name, Replica: d.opts.ReplicaID, StartedAt: start, FinishedAt: d.opts.Now()}
	if err != nil {
		r.Err = err.Error()
	}
	if rerr := d.store.RecordJobRun(ctx, r); rerr != nil && ctx.Err() == nil {
		d.log.Warn("record background job run", "job", name, "err", rerr)
	}
}

// followScans reloads the graph when another replica (or `depsd scan`)
// stored a newer scan, so that every replica starts chains from the same
// graph. It costs one small query per poll interval.
func (d *Daemon) followScans(ctx context.Context) error {
	interval := d.opts.PollInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if _, err := d.followScan(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("reload the graph after a scan", "err", err)
		}
	}
}

// followScan reloads the graph if the stored scan is not the one it was
// read after (this replica's own scans load their graph themselves).
func (d *Daemon) followScan(ctx context.Context) (reloaded bool, err error) {
	m, ok, err := d.store.LastScan(ctx)
	if err != nil || !ok || m.StartedAt.Equal(d.state.loadedScan()) {
		return false, err
	}
	return true, d.state.reload(ctx, d.store)
}

// Status is what `GET /api/v1/status` and `depsd status` show.
type Status struct {
	Replica string     `json:"replica"`
	Store   store.Kind `json:"store"`
	// StorePath is the state file, or the database URL without password.
	StorePath string `json:"store_path"`
	// Leading says whether this replica is the leader now.
	Leading bool        `json:"leading"`
	Leader  *LeaderInfo `json:"leader"`
	// Replicas are the processes whose liveness lease is current.
	Replicas []ReplicaInfo `json:"replicas"`
	Jobs     []JobInfo     `json:"jobs"`
}

// ReplicaInfo is one live process.
type ReplicaInfo struct {
	Incarnation string    `json:"incarnation"` // replica id / random suffix of this run
	Since       time.Time `json:"since"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// LeaderInfo is the leader lease as stored.
type LeaderInfo struct {
	Replica     string    `json:"replica"`
	Incarnation string    `json:"incarnation"` // the process holding the lease
	Since       time.Time `json:"since"`
	ExpiresAt   time.Time `json:"expires_at"`
	Expired     bool      `json:"expired"`
}

// JobInfo is the last run of a background job.
type JobInfo struct {
	Name       string    `json:"name"`
	Replica    string    `json:"replica"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Error      string    `json:"error,omitempty"`
}

// Status reads this replica's view of the replicas from the store.
func (d *Daemon) Status(ctx context.Context) (Status, error) {
	_, leading := d.elector.state()
	st, err := ReadStatus(ctx, d.store, d.opts.Now())
	st.Replica, st.Leading = d.opts.ReplicaID, leading
	return st, err
}

// ReadStatus reads the leader and the background jobs' last runs from the
// store; `depsd status` uses it without a daemon.
func ReadStatus(ctx context.Context, st *store.Store, now time.Time) (Status, error) {
	s := Status{Store: st.Kind(), StorePath: st.Path(), Jobs: []JobInfo{}, Replicas: []ReplicaInfo{}}
	l, ok, err := st.LeaseOf(ctx, leaderLease)
	if err != nil {
		return s, fmt.Errorf("status: %w", err)
	}
	if ok {
		s.Leader = &LeaderInfo{Replica: replicaOf(l.Holder), Incarnation: l.Holder, Since: l.AcquiredAt, ExpiresAt: l.ExpiresAt, Expired: !now.Before(l.ExpiresAt)}
	}
	alive, err := st.LiveLeases(ctx, alivePrefix, now)
	if err != nil {
		return s, fmt.Errorf("status: %w", err)
	}
	for _, l := range alive {
		s.Replicas = append(s.Replicas, ReplicaInfo{Incarnation: l.Holder, Since: l.AcquiredAt, ExpiresAt: l.ExpiresAt})
	}
	runs, err := st.JobRuns(ctx)
	if err != nil {
		return s, fmt.Errorf("status: %w", err)
	}
	for _, r := range runs {
		s.Jobs = append(s.Jobs, JobInfo{Name: r.Name, Replica: r.Replica, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Error: r.Err})
	}
	return s, nil
}

// replicaOf is the replica id of an incarnation (newIncarnation).
func replicaOf(incarnation string) string {
	if i := strings.LastIndexByte(incarnation, '/'); i >= 0 {
		return incarnation[:i]
	}
	return incarnation
}
