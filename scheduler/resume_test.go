package scheduler_test

import (
	"context"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
)

// stuckRebuilder is an engine whose store cannot be written: every
// Rebuild waits until its caller gives up.
type stuckRebuilder struct{ called chan struct{} }

func (r *stuckRebuilder) Rebuild(ctx context.Context, _ string, _ chain.Reason) (int64, error) {
	select {
	case r.called <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// interruptedFire claims the 03:00 fire on day 6 in a scheduler whose
// rebuild never starts, and stops that scheduler (a leader losing its
// store and stepping down, or a shutdown), leaving the fire claimed with
// no outcome.
func interruptedFire(t *testing.T, path string, clk *clocktest.Clock, catchUp scheduler.CatchUp) {
	t.Helper()
	stuck := &stuckRebuilder{called: make(chan struct{}, 1)}
	r := start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(catchUp), Store: openStore(t, path), Rebuilder: stuck, Clock: clk, Owner: "first"}))
	clk.WaitTimers(1)
	clk.Set(at(6, 3, 0))
	select {
	case <-stuck.called:
	case <-time.After(wait):
		t.Fatal("the fire did not start")
	}
	r.stop(t)
}

// A scheduled rebuild claimed but never started (its process stopped
// while the rebuild could not start) is started by the next scheduler:
// before, the claim had moved the cursor past it and the week's rebuild
// was lost.
func TestUnfinishedFireIsResumed(t *testing.T) {
	path := storePath(t)
	clk := clocktest.New(at(6, 2, 0))
	interruptedFire(t, path, clk, "")
	st := openStore(t, path)
	if got := scheduleState(t, st, "infra/base"); !got.Outcome.FinishedAt.IsZero() || got.FiredBy != "first" {
		t.Fatalf("after the interruption: %+v; want the fire claimed by first with no outcome", got)
	}

	clk.Set(at(6, 3, 5))
	rb := newRebuilder()
	r := start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(""), Store: st, Rebuilder: rb, Clock: clk, Owner: "second"}))
	c := rb.waitCall(t)
	if c.Project != "infra/base" || c.Reason.Kind != chain.ReasonSchedule || !c.Reason.At.Equal(at(6, 3, 0)) {
		t.Errorf("resumed rebuild = %+v; want infra/base for the 03:00 fire", c)
	}
	clk.WaitTimers(1) // the fire is done and the loop sleeps
	r.stop(t)
	got := scheduleState(t, st, "infra/base")
	if got.FiredBy != "second" || got.Outcome.ChainID != 101 || got.Outcome.Err != "" {
		t.Errorf("stored state = %+v; want the 03:00 fire finished by second with chain 101", got)
	}
	if n := len(rb.Calls()); n != 1 {
		t.Errorf("%d rebuilds after the restart, want 1", n)
	}
}

// A newer fire that is due replaces the unfinished one (missed fires
// collapse into the latest); under "skip" an unfinished fire older than
// the grace period is not resumed.
func TestUnfinishedFireNotResumed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		catchUp scheduler.CatchUp
		restart time.Time
		want    []time.Time // fires rebuilt after the restart
	}{
		{"a newer fire is due", "", at(7, 3, 1), []time.Time{at(7, 3, 0)}},
		{"skip, past the grace", scheduler.CatchUpSkip, at(6, 9, 0), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := storePath(t)
			clk := clocktest.New(at(6, 2, 0))
			interruptedFire(t, path, clk, tt.catchUp)
			clk.Set(tt.restart)
			rb := newRebuilder()
			r := start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(tt.catchUp), Store: openStore(t, path), Rebuilder: rb, Clock: clk, Owner: "second"}))
			for range tt.want {
				rb.waitCall(t)
			}
			clk.WaitTimers(1)
			r.stop(t)
			calls := rb.Calls()
			if len(calls) != len(tt.want) {
				t.Fatalf("rebuilds after the restart: %+v; want fires %v", calls, tt.want)
			}
			for i, c := range calls {
				if !c.Reason.At.Equal(tt.want[i]) {
					t.Errorf("rebuild %d for the fire at %s, want %s", i, c.Reason.At, tt.want[i])
				}
			}
		})
	}
}
