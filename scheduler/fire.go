package scheduler

import (
	"context"
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
	e.busy = true
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.fire(ctx, e, last, log)
		done <- e
	}()
	return now.Add(maxWait)
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
// before the work, so a crash in between loses that fire rather than
// repeating it: at most once, never twice.
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
			if err == nil || attempt == rebuildAttempts || ctx.Err() != nil {
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
