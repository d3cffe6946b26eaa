package scheduler_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
)

// A digest change whose rebuild fails transiently (store busy, graph
// momentarily without the project) must be retried: the new digest is
// already recorded, so later checks see "no change" and apps/a would never
// be rebuilt for the new base image.
func TestDigestChangeRebuildIsRetried(t *testing.T) {
	clk := clocktest.New(at(6, 0, 0))
	st := openStore(t, storePath(t))
	rb := newRebuilder()
	reg := &resolver{digests: map[string]string{debian: "sha256:d1", alpine: "sha256:a1"}, errs: map[string]error{}, asked: map[string]int{}}
	s := newScheduler(t, scheduler.Options{Config: scheduler.Config{WatchExternal: true}, Store: st, Rebuilder: rb, Resolver: reg, Images: users, Clock: clk})
	r := start(t, s)
	clk.WaitTimers(1)

	rb.mu.Lock()
	rb.fail = map[string]error{"apps/a": errors.New("database is locked")}
	rb.mu.Unlock()
	reg.set(debian, "sha256:d2", nil)
	clk.Advance(time.Hour)
	clk.WaitTimers(1)

	rb.mu.Lock()
	rb.fail = nil // the store is fine again
	rb.mu.Unlock()
	for range 3 {
		clk.Advance(time.Hour)
		clk.WaitTimers(1)
	}
	r.stop(t)
	var ok int
	for _, c := range rb.Calls() {
		if c.Project == "apps/a" {
			ok++
		}
	}
	if ok < 2 {
		t.Errorf("apps/a: %d rebuild attempts over 4h after a failed one (%v); want a retry so the d1→d2 change reaches it",
			ok, projectsOf(rb.Calls()))
	}
}

// A scheduled fire whose Rebuild fails transiently is tried again, or the
// weekly base rebuild would be lost.
func TestScheduledRebuildIsRetriedAfterTransientError(t *testing.T) {
	clk := clocktest.New(at(6, 2, 0))
	st := openStore(t, storePath(t))
	rb := newRebuilder()
	rb.fail = map[string]error{"infra/base": errors.New("database is locked")}
	r := start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(""), Store: st, Rebuilder: rb, Clock: clk}))
	clk.WaitTimers(1)
	clk.Set(at(6, 3, 0))
	rb.waitCall(t)
	// The schedule's own timer and the retry's: the clock moves on only
	// once the retry waits on it (moving it first left the retry armed
	// 30 minutes late, a flake under load).
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no retry waits after the failed rebuild")
		}
	}
	rb.mu.Lock()
	rb.fail = nil
	rb.mu.Unlock()
	for range 30 { // the next 30 minutes
		clk.WaitTimers(1)
		clk.Advance(time.Minute)
	}
	clk.WaitTimers(1)
	r.stop(t)
	calls := rb.Calls()
	if len(calls) < 2 {
		t.Errorf("%d Rebuild calls for the 03:00 fire within 30 min of a transient error (%v); want a retry",
			len(calls), slices.Collect(func(yield func(string) bool) {
				for _, c := range calls {
					yield(c.Project)
				}
			}))
	}
}
