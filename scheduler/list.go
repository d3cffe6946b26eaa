package scheduler

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Entry is one line of `depsd schedules`.
type Entry struct {
	Kind     Kind
	Target   string // project (rebuild), job name (job), image (watch)
	Spec     string // cron spec; "every 1h0m0s" for watches; "off" for a disabled job
	Timezone string // empty for watches
	// Next is when it fires (or is checked) next. It is in the past when
	// the fire is due but no depsd is running; zero when disabled.
	Next time.Time
	// LastFire is the scheduled time of the last fire, or for a watch the
	// time of the last check; zero if never.
	LastFire time.Time
	// LastOutcome says how the last fire ended, for people: "chain 42",
	// "ok in 2m3s", "running", "error: ...", or for a watch the digest and
	// the rebuilds its last change started.
	LastOutcome string
	// The structured parts of LastOutcome.
	ChainID     int64
	Err         string
	Duration    time.Duration
	LastSuccess time.Time
	Digest      string   // watches
	Projects    []string // watches: rebuilt when the digest changes
	Failures    int      // watches: consecutive failed checks
}

// List returns every configured schedule, job and watched image with its
// stored state, rebuilds first, then jobs, then watches. It reads the store
// and calls Options.Images (for the watched set); it needs no running
// Scheduler, so `depsd schedules` builds one with New and calls List.
func (s *Scheduler) List(ctx context.Context) ([]Entry, error) {
	states, err := s.opts.Store.ScheduleStates(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	byID := make(map[string]ScheduleState, len(states))
	for _, st := range states {
		byID[st.ID] = st
	}
	now := s.clock.Now()
	s.mu.Lock()
	entries := append([]*entry(nil), s.entries...)
	s.mu.Unlock()
	var out []Entry
	for _, e := range entries {
		out = append(out, e.listEntry(byID, now))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Kind == KindRebuild && out[j].Kind != KindRebuild })
	if s.watch != nil {
		ws, err := s.watch.list(ctx, now)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, ws...)
	}
	return out, nil
}

func (e *entry) listEntry(byID map[string]ScheduleState, now time.Time) Entry {
	x := Entry{Kind: e.kind, Target: e.target, Spec: e.spec.text, Timezone: e.spec.tz}
	if e.off {
		x.LastOutcome = "disabled"
		return x
	}
	st, ok := byID[e.id]
	if !ok {
		x.Next = e.spec.sched.Next(now)
		x.LastOutcome = "never fired"
		return x
	}
	x.Next = e.spec.sched.Next(st.Cursor)
	x.LastFire, x.LastSuccess = st.LastFire, st.LastSuccess
	x.ChainID, x.Err, x.Duration = st.Outcome.ChainID, st.Outcome.Err, st.Outcome.Duration
	switch {
	case st.LastFire.IsZero():
		x.LastOutcome = "never fired"
	case st.Outcome.FinishedAt.IsZero():
		x.LastOutcome = "running (claimed by " + st.FiredBy + ")"
	case st.Outcome.Err != "":
		x.LastOutcome = "error: " + st.Outcome.Err
	case e.kind == KindRebuild:
		x.LastOutcome = fmt.Sprintf("chain %d", st.Outcome.ChainID)
	default:
		x.LastOutcome = "ok in " + st.Outcome.Duration.Round(time.Millisecond).String()
	}
	return x
}

// list describes the watched images: the same set Run checks.
func (w *watcher) list(ctx context.Context, now time.Time) ([]Entry, error) {
	targets, err := w.targets(ctx)
	if err != nil {
		return nil, fmt.Errorf("watched images: %w", err)
	}
	states, err := w.s.opts.Store.ImageStates(ctx)
	if err != nil {
		return nil, err
	}
	byImage := make(map[string]ImageState, len(states))
	for _, st := range states {
		byImage[st.Image] = st
	}
	out := make([]Entry, 0, len(targets))
	for _, t := range targets {
		x := Entry{Kind: KindWatch, Target: t.image, Spec: "every " + w.interval.String(), Projects: t.projects, Next: now}
		st, ok := byImage[t.image]
		if !ok {
			x.LastOutcome = "never checked"
			out = append(out, x)
			continue
		}
		x.Next, x.LastFire, x.Digest, x.Failures, x.Err = st.NextCheck, st.CheckedAt, st.Digest, st.Failures, st.Err
		if st.Failures > 0 {
			x.LastFire = st.ErrAt
		}
		switch {
		case st.Failures > 0:
			x.LastOutcome = fmt.Sprintf("error (%d in a row): %s", st.Failures, st.Err)
		case st.RebuildOutcome != "":
			x.LastOutcome = fmt.Sprintf("%s; changed %s: %s", st.Digest, st.ChangedAt.Format(time.RFC3339), st.RebuildOutcome)
		default:
			x.LastOutcome = st.Digest
		}
		out = append(out, x)
	}
	return out, nil
}
