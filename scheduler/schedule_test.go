package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
)

func dailyAt3(catchUp scheduler.CatchUp) scheduler.Config {
	return scheduler.Config{
		Schedules: []scheduler.ScheduleSpec{{Project: "infra/base", Cron: "0 3 * * *"}},
		CatchUp:   catchUp,
	}
}

// A schedule fires at its time with a schedule reason; a restart right
// after does not fire it again, and the next day fires normally.
func TestNoDoubleFireAfterRestart(t *testing.T) {
	path := storePath(t)
	clk := clocktest.New(at(6, 2, 0))
	rb := newRebuilder()

	st1 := openStore(t, path)
	r1 := start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(""), Store: st1, Rebuilder: rb, Clock: clk, Owner: "first"}))
	clk.WaitTimers(1)
	clk.Set(at(6, 3, 0))
	c := rb.waitCall(t)
	if c.Project != "infra/base" || c.Reason.Kind != chain.ReasonSchedule || c.Reason.Detail != "0 3 * * *" {
		t.Errorf("rebuild = %+v, want infra/base for schedule 0 3 * * *", c)
	}
	r1.stop(t)

	// Restart 30 s later on the same file, with a new Store handle.
	clk.Set(at(6, 3, 0).Add(30 * time.Second))
	st2 := openStore(t, path)
	r2 := start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(""), Store: st2, Rebuilder: rb, Clock: clk, Owner: "second"}))
	clk.WaitTimers(1) // the restarted loop has looked and gone to sleep
	if got := scheduleState(t, st2, "infra/base"); got.FiredBy != "first" || !got.LastFire.Equal(at(6, 3, 0)) {
		t.Errorf("after restart: fired by %q at %s; want first at 03:00", got.FiredBy, got.LastFire)
	}
	clk.Set(at(7, 3, 0))
	rb.waitCall(t)
	r2.stop(t)
	if n := len(rb.Calls()); n != 2 {
		t.Errorf("%d rebuilds over two days, want 2", n)
	}
	got := scheduleState(t, st2, "infra/base")
	if got.FiredBy != "second" || got.Outcome.ChainID != 102 || got.Outcome.Err != "" || got.LastSuccess.IsZero() {
		t.Errorf("stored outcome = %+v, want chain 102 fired by second", got)
	}
}

// Fires missed while no depsd ran: "once" fires one catch-up for the
// latest of them, "skip" fires none and waits for the next time.
func TestCatchUp(t *testing.T) {
	for _, policy := range []scheduler.CatchUp{"", scheduler.CatchUpOnce, scheduler.CatchUpSkip} {
		t.Run(string(policy)+"_", func(t *testing.T) {
			path := storePath(t)
			clk := clocktest.New(at(6, 2, 0))
			rb := newRebuilder()
			st := openStore(t, path)
			// First run registers the schedule, then depsd is down for 3 days.
			r := start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(policy), Store: st, Rebuilder: rb, Clock: clk}))
			clk.WaitTimers(1)
			r.stop(t)
			clk.Set(at(9, 12, 0))

			r = start(t, newScheduler(t, scheduler.Options{Config: dailyAt3(policy), Store: st, Rebuilder: rb, Clock: clk}))
			if policy == scheduler.CatchUpSkip {
				clk.WaitTimers(1)
				if n := len(rb.Calls()); n != 0 {
					t.Fatalf("skip policy: %d rebuilds at start, want 0", n)
				}
			} else {
				c := rb.waitCall(t)
				if !c.Reason.At.Equal(at(9, 3, 0)) {
					t.Errorf("caught-up fire for %s, want the latest missed time %s", c.Reason.At, at(9, 3, 0))
				}
				clk.WaitTimers(1)
			}
			clk.Set(at(10, 3, 0))
			c := rb.waitCall(t)
			if !c.Reason.At.Equal(at(10, 3, 0)) {
				t.Errorf("next fire for %s, want %s", c.Reason.At, at(10, 3, 0))
			}
			r.stop(t)
			want := 2
			if policy == scheduler.CatchUpSkip {
				want = 1
			}
			if n := len(rb.Calls()); n != want {
				t.Errorf("%d rebuilds, want %d", n, want)
			}
		})
	}
}

// Several depsd processes sharing one store file fire each time once.
func TestSchedulersSharingAStoreFireOnce(t *testing.T) {
	path := storePath(t)
	clk := clocktest.New(at(6, 2, 0))
	rb := newRebuilder()
	const processes, days = 3, 4
	var rs []*running
	for i := range processes {
		st := openStore(t, path) // each process has its own handle on the file
		s := newScheduler(t, scheduler.Options{Config: dailyAt3(""), Store: st, Rebuilder: rb, Clock: clk,
			Owner: "p" + string(rune('0'+i))})
		rs = append(rs, start(t, s))
	}
	for d := range days {
		clk.WaitTimers(processes)
		clk.Set(at(6+d, 3, 0))
		rb.waitCall(t)
	}
	// And a catch-up that all of them see at once, after a gap.
	clk.WaitTimers(processes)
	clk.Set(at(20, 12, 0))
	rb.waitCall(t)
	for _, r := range rs {
		r.stop(t)
	}
	if n := len(rb.Calls()); n != days+1 {
		t.Errorf("%d rebuilds for %d fire times, want one each", n, days+1)
	}
}

// Jobs fire like schedules and record success, errors and panics with
// their duration, for the listing and the metrics.
func TestJobs(t *testing.T) {
	clk := clocktest.New(at(6, 0, 0))
	st := openStore(t, storePath(t))
	var mu sync.Mutex
	var observed []scheduler.Fired
	s := newScheduler(t, scheduler.Options{Store: st, Clock: clk, Observe: func(f scheduler.Fired) {
		mu.Lock()
		defer mu.Unlock()
		observed = append(observed, f)
	}})
	ran := make(chan string, 10)
	mustAdd := func(name, spec string, fn func(context.Context) error) {
		if err := s.AddJob(name, spec, fn); err != nil {
			t.Fatal(err)
		}
	}
	mustAdd("rescan", scheduler.Config{}.RescanSpec(), func(context.Context) error {
		clk.Advance(2 * time.Second) // the job takes 2 s of clock time
		ran <- "rescan"
		return nil
	})
	mustAdd("broken", "@hourly", func(context.Context) error { ran <- "broken"; return errors.New("gitlab unreachable") })
	mustAdd("panics", "@hourly", func(context.Context) error { ran <- "panics"; panic("boom") })
	mustAdd("disabled", "off", func(context.Context) error { ran <- "disabled"; return nil })
	if err := s.AddJob("bad", "@every 6", func(context.Context) error { return nil }); err == nil || !strings.Contains(err.Error(), `job bad: bad cron expression "@every 6"`) {
		t.Errorf("AddJob with a bad spec: %v", err)
	}
	r := start(t, s)
	clk.WaitTimers(1)
	clk.Set(at(6, 6, 0))
	got := map[string]bool{}
	for range 3 {
		select {
		case name := <-ran:
			got[name] = true
		case <-time.After(wait):
			t.Fatalf("jobs run: %v", got)
		}
	}
	r.stop(t)
	if !got["rescan"] || !got["broken"] || !got["panics"] {
		t.Errorf("jobs run: %v", got)
	}
	if err := s.AddJob("late", "@hourly", func(context.Context) error { return nil }); err == nil {
		t.Error("AddJob after Run succeeded")
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]scheduler.Entry{}
	for _, e := range list {
		outcomes[e.Target] = e
	}
	if e := outcomes["rescan"]; e.LastOutcome != "ok in 2s" || !e.Next.Equal(at(6, 12, 0)) || !e.LastSuccess.Equal(at(6, 6, 0).Add(2*time.Second)) {
		t.Errorf("rescan listed as %+v", e)
	}
	if e := outcomes["broken"]; e.LastOutcome != "error: gitlab unreachable" {
		t.Errorf("broken listed as %q", e.LastOutcome)
	}
	if e := outcomes["panics"]; !strings.Contains(e.LastOutcome, "job panicked: boom") {
		t.Errorf("panics listed as %q", e.LastOutcome)
	}
	if e := outcomes["disabled"]; e.Spec != "off" || !e.Next.IsZero() || e.LastOutcome != "disabled" {
		t.Errorf("disabled listed as %+v", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(observed) != 3 {
		t.Errorf("observed %d fires, want 3", len(observed))
	}
}

// The listing shows each schedule's timezone, next and last fire, and
// outcome, also for a rebuild that failed.
func TestListSchedules(t *testing.T) {
	clk := clocktest.New(at(6, 2, 0))
	st := openStore(t, storePath(t))
	rb := newRebuilder()
	rb.fail = map[string]error{"infra/gone": chain.ErrUnknownProject}
	cfg := scheduler.Config{Schedules: []scheduler.ScheduleSpec{
		{Project: "infra/base", Cron: "0 3 * * *", Timezone: "Europe/Zurich"},
		{Project: "infra/gone", Cron: "0 3 * * *"},
		{Project: "infra/weekly", Cron: "@weekly"},
	}}
	s := newScheduler(t, scheduler.Options{Config: cfg, Store: st, Rebuilder: rb, Clock: clk})
	r := start(t, s)
	clk.WaitTimers(1)
	clk.Set(at(6, 3, 0))
	rb.waitCall(t)
	clk.WaitTimers(1)
	r.stop(t)
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range list {
		lines = append(lines, strings.Join([]string{string(e.Kind), e.Target, e.Spec, e.Timezone,
			e.Next.UTC().Format(time.RFC3339), e.LastFire.UTC().Format(time.RFC3339), e.LastOutcome}, " | "))
	}
	want := []string{
		"rebuild | infra/base | 0 3 * * * | Europe/Zurich | 2025-01-07T02:00:00Z | 0001-01-01T00:00:00Z | never fired",
		"rebuild | infra/gone | 0 3 * * * | UTC | 2025-01-07T03:00:00Z | 2025-01-06T03:00:00Z | error: project not in the dependency graph",
		"rebuild | infra/weekly | @weekly | UTC | 2025-01-12T00:00:00Z | 0001-01-01T00:00:00Z | never fired",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("listing:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// `depsd schedules` lists from the store alone; only Run needs the engine.
func TestListWithoutEngine(t *testing.T) {
	st := openStore(t, storePath(t))
	clk := clocktest.New(at(6, 2, 0))
	s := newScheduler(t, scheduler.Options{Config: dailyAt3(""), Store: st, Clock: clk})
	list, err := s.List(t.Context())
	if err != nil || len(list) != 1 || !list[0].Next.Equal(at(6, 3, 0)) || list[0].LastOutcome != "never fired" {
		t.Errorf("List = %+v, %v", list, err)
	}
	if err := s.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "no rebuilder") {
		t.Errorf("Run without a rebuilder: %v", err)
	}
	if err := s.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Run: %v", err)
	}
}

// Stopping the daemon mid-job ends the job through its context, waits for
// it, and records how it ended.
func TestStopWaitsForRunningJob(t *testing.T) {
	clk := clocktest.New(at(6, 0, 0))
	st := openStore(t, storePath(t))
	s := newScheduler(t, scheduler.Options{Store: st, Clock: clk})
	started, finished := make(chan struct{}), make(chan struct{})
	if err := s.AddJob("rescan", "@hourly", func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(finished)
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	r := start(t, s)
	clk.WaitTimers(1)
	clk.Set(at(6, 1, 0))
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("the job did not start")
	}
	r.stop(t)
	select {
	case <-finished:
	default:
		t.Fatal("Run returned before the job ended")
	}
	if got := scheduleState(t, st, "rescan"); got.Outcome.Err != "context canceled" || got.Outcome.FinishedAt.IsZero() {
		t.Errorf("outcome after stop: %+v", got.Outcome)
	}
}

// A schedule with a ref rebuilds that node of its project: a followed
// branch, or its releases (docs/chains.md, release tags and maintenance
// branches).
func TestScheduleOfANode(t *testing.T) {
	clk := clocktest.New(at(6, 2, 0))
	st := openStore(t, storePath(t))
	rb := newRebuilder()
	cfg := scheduler.Config{Schedules: []scheduler.ScheduleSpec{
		{Project: "infra/base", Ref: "bookworm", Cron: "0 3 * * *"},
		{Project: "infra/base", Ref: "tags", Cron: "0 3 * * *"},
	}}
	s := newScheduler(t, scheduler.Options{Config: cfg, Store: st, Rebuilder: rb, Clock: clk})
	r := start(t, s)
	clk.WaitTimers(1)
	clk.Set(at(6, 3, 0))
	got := []string{rb.waitCall(t).Project, rb.waitCall(t).Project}
	r.stop(t)
	slices.Sort(got)
	if want := []string{"infra/base@bookworm", "infra/base@tags"}; !slices.Equal(got, want) {
		t.Errorf("rebuilt %q, want %q", got, want)
	}
}
