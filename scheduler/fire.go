package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// runSchedules is the loop behind the cron schedules: it fires what is
// due, then sleeps on the clock until the next fire time (or maxWait).
// Fires run in goroutines it owns, one at most per schedule, so a long job
// does not hold back the rebuilds.
func (s *Scheduler) runSchedules(ctx context.Context, entries []*entry) error {
	done := make(chan *entry, len(entries)) // one fire in flight per entry: sends never block
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		now := s.clock.Now()
		next := now.Add(maxWait)
		for _, e := range entries {
			if e.busy {
				continue
			}
			if t := s.handle(ctx, e, now, &wg, done); t.Before(next) {
				next = t
			}
		}
		timer, stop := s.clock.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			stop()
			return nil
		case e := <-done:
			stop()
			e.busy = false
		case <-timer:
		}
	}
}

// handle brings one schedule up to now: it loads its stored state the
// first time, claims and starts the fire that is due (the latest one, if
// several were missed), and returns when the schedule needs attention
// next.
func (s *Scheduler) handle(ctx context.Context, e *entry, now time.Time, wg *sync.WaitGroup, done chan<- *entry) time.Time {
	log := s.log.With("schedule", e.spec.text, e.targetKey(), e.target)
	if !e.loaded {
		st, err := s.opts.Store.RegisterSchedule(ctx, ScheduleState{ID: e.id, Kind: e.kind, Target: e.target,
			Spec: e.spec.text, Timezone: e.spec.tz, Cursor: now})
		if err != nil {
			log.Error("cannot load schedule state", "err", err)
			return now.Add(retryWait)
		}
		e.cursor, e.loaded = st.Cursor, true
		if s.resumable(ctx, e, st, now, log) {
			log.Warn("resuming a scheduled rebuild that was claimed but never started", "scheduled", st.LastFire,
				"claimed_by", st.FiredBy, "claimed_at", st.FiredAt)
			s.start(ctx, e, st.LastFire, log, wg, done)
			return now.Add(maxWait)
		}
	}
	last, n := latestDue(e.spec.sched, e.cursor, now)
	if n == 0 {
		return e.spec.sched.Next(e.cursor)
	}
	missed := now.Sub(last) > misfireGrace
	var ok bool
	var err error
	if missed && s.catchUp == CatchUpSkip {
		ok, err = s.opts.Store.SkipFires(ctx, e.id, e.cursor, last)
	} else {
		ok, err = s.opts.Store.ClaimFire(ctx, e.id, e.cursor, last, now, s.owner)
	}
	switch {
	case err != nil:
		log.Error("cannot claim fire", "err", err)
		return now.Add(retryWait)
	case !ok:
		// Another process moved the cursor (it fires); follow it.
		return s.reload(ctx, e, now, log)
	}
	e.cursor = last
	if missed && s.catchUp == CatchUpSkip {
		log.Info("missed fires skipped", "scheduled", last, "missed", n, "catch_up", string(s.catchUp))
		return e.spec.sched.Next(last)
	}
	if missed {
		log.Info("catching up a missed fire", "scheduled", last, "missed", n)
	}
	s.start(ctx, e, last, log, wg, done)
	return now.Add(maxWait)
}

// start runs the fire at scheduled in a goroutine that reports on done.
func (s *Scheduler) start(ctx context.Context, e *entry, scheduled time.Time, log *slog.Logger, wg *sync.WaitGroup, done chan<- *entry) {
	e.busy = true
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.fire(ctx, e, scheduled, log)
		done <- e
	}()
}

// resumable reports whether st's last fire is a rebuild that was claimed
// but never finished, because the process that claimed it stopped (killed,
// or shut down while the rebuild kept failing to start), and takes it
// over if so. Such a fire is lost otherwise: the claim moved the cursor
// past it. It is not resumed when a newer fire is due (that one replaces
// it, as missed fires collapse into the latest) nor, under the "skip"
// catch-up policy, when it is older than the misfire grace. Starting it
// twice is harmless: chain.Engine.Rebuild starts a fire's chain once.
func (s *Scheduler) resumable(ctx context.Context, e *entry, st ScheduleState, now time.Time, log *slog.Logger) bool {
	if e.kind != KindRebuild || st.LastFire.IsZero() || !st.LastFire.Equal(st.Cursor) || !st.Outcome.FinishedAt.IsZero() {
		return false
	}
	if _, n := latestDue(e.spec.sched, st.Cursor, now); n > 0 {
		return false
	}
	if now.Sub(st.LastFire) > misfireGrace && s.catchUp == CatchUpSkip {
		log.Info("a scheduled rebuild claimed but never started is skipped", "scheduled", st.LastFire, "catch_up", string(s.catchUp))
		return false
	}
	ok, err := s.opts.Store.ResumeFire(ctx, e.id, st.LastFire, st.FiredAt, now, s.owner)
	if err != nil {
		log.Error("cannot resume an unfinished fire", "scheduled", st.LastFire, "err", err)
	}
	return ok
}

// reload reads the schedule's cursor after another process claimed a fire.
func (s *Scheduler) reload(ctx context.Context, e *entry, now time.Time, log *slog.Logger) time.Time {
	all, err := s.opts.Store.ScheduleStates(ctx)
	if err != nil {
		log.Error("cannot reload schedule state", "err", err)
		return now.Add(retryWait)
	}
	for _, st := range all {
		if st.ID == e.id && st.Cursor.After(e.cursor) {
			e.cursor = st.Cursor
			return now // look again at once, from the new cursor
		}
	}
	log.Error("schedule state changed under us but did not advance")
	return now.Add(retryWait)
}

// fire runs one claimed fire and records its outcome. The claim is made
// before the work, so no two processes fire it. A rebuild that could not
// start before ctx ended (shutdown, or leadership lost while the store was
// down) records no outcome: like one whose process was killed, it is
// resumed by the next scheduler to start (see resumable). A job records
// how it ended and is not resumed: the next fire does its work.
func (s *Scheduler) fire(ctx context.Context, e *entry, scheduled time.Time, log *slog.Logger) {
	start := s.clock.Now()
	var chainID int64
	var err error
	switch e.kind {
	case KindRebuild:
		// The fire is claimed: a transient failure (a busy store) must not
		// lose this week's rebuild, so it is tried again with backoff
		// until it starts or depsd stops.
		reason := chain.Reason{Kind: chain.ReasonSchedule, Project: e.target, Detail: e.spec.detail(), At: scheduled}
		for attempt := 1; ; attempt++ {
			chainID, err = s.opts.Rebuilder.Rebuild(ctx, e.target, reason)
			if err == nil || permanent(err) || attempt == rebuildAttempts || ctx.Err() != nil {
				break
			}
			wait := backoff(attempt, rebuildRetryMax)
			log.Warn("scheduled rebuild failed, trying again", "attempt", attempt, "retry_in", wait, "err", err)
			if !s.sleep(ctx, wait) {
				break
			}
		}
	case KindJob:
		err = runJob(ctx, e.job)
	}
	if e.kind == KindRebuild && err != nil && !permanent(err) && ctx.Err() != nil {
		log.Warn("scheduled rebuild interrupted before it started; the next scheduler to run starts it",
			"scheduled", scheduled, "err", err)
		return
	}
	end := s.clock.Now()
	o := Outcome{FinishedAt: end, Duration: end.Sub(start), ChainID: chainID}
	if err != nil {
		o.Err = err.Error()
	}
	// Record even when ctx ended (shutdown): the outcome is the point.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if rerr := s.opts.Store.RecordOutcome(rctx, e.id, scheduled, o); rerr != nil {
		log.Error("cannot record fire outcome", "err", rerr)
	}
	switch {
	case err != nil:
		log.Error("scheduled fire failed", "scheduled", scheduled, "duration", o.Duration, "err", err)
	case e.kind == KindRebuild:
		log.Info("scheduled rebuild started", "scheduled", scheduled, "chain_id", chainID)
	default:
		log.Info("scheduled job done", "scheduled", scheduled, "duration", o.Duration)
	}
	s.observe(Fired{Kind: e.kind, Target: e.target, Scheduled: scheduled, Started: start, Duration: o.Duration, ChainID: chainID, Err: err})
}

// permanent reports whether a rebuild failed for good: trying again (now,
// or in the next scheduler) cannot start it until the graph changes.
func permanent(err error) bool {
	return errors.Is(err, chain.ErrUnknownProject) || errors.Is(err, chain.ErrCycle)
}

// rebuildAttempts and rebuildRetryMax bound the retries of a rebuild that
// failed to start (a fire, or a digest change's users).
const (
	rebuildAttempts = 6
	rebuildRetryMax = 30 * time.Minute
)

// sleep waits d on the scheduler's clock; false when ctx ended first.
func (s *Scheduler) sleep(ctx context.Context, d time.Duration) bool {
	c, stop := s.clock.NewTimer(d)
	defer stop()
	select {
	case <-c:
		return true
	case <-ctx.Done():
		return false
	}
}

// runJob runs a job, turning a panic into its error: a broken rescan must
// not take the daemon down.
func runJob(ctx context.Context, job func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("job panicked: %v", r)
		}
	}()
	return job(ctx)
}

// targetKey is the log key naming what the schedule starts.
func (e *entry) targetKey() string {
	if e.kind == KindRebuild {
		return "project"
	}
	return "job"
}
