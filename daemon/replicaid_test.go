package daemon

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
	"gitlab.com/depsd/depsd/store"
)

// A second process started with the replica id of a running one (a copied
// --replica-id) refuses to start, saying why, before it serves or leads;
// the first one goes on leading under its own liveness lease.
func TestSecondProcessUnderTheSameReplicaIDIsRefused(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian:12\n"})
	state := filepath.Join(t.TempDir(), "depsd.db")
	// start runs a process; ended is closed when its Run returned, with
	// *runErr its error.
	start := func() (d *Daemon, ended <-chan struct{}, runErr *error, serving *atomic.Bool) {
		gl, cfg := testClient(t, srv), testConfig(t, srv)
		cfg.State = state
		serving = new(atomic.Bool)
		ctx, cancel := context.WithCancel(context.Background())
		d, err := New(ctx, Options{Config: cfg, Listen: "127.0.0.1:0", GitLab: gl, ReplicaID: "same",
			LeaderLease: 3 * time.Second, Listening: func(string) { serving.Store(true) }})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		runErr = new(error)
		go func() {
			defer close(done)
			*runErr = d.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
		return d, done, runErr, serving
	}
	first, firstEnded, firstErr, _ := start()
	eventually(t, "the first process to lead", func() bool {
		st, err := first.Status(t.Context())
		return err == nil && st.Leading
	})

	second, secondEnded, secondErr, secondServing := start()
	wait(t, "the second process to be refused", secondEnded)
	err := *secondErr
	var inUse *replicaIDInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("second process under the same replica id: Run = %v, want it refused", err)
	}
	for _, want := range []string{`"same"`, first.incarnation, "--replica-id"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if secondServing.Load() {
		t.Error("the refused process served before it was refused")
	}
	if _, ok, err := first.store.LeaseOf(t.Context(), alivePrefix+second.incarnation); err != nil || ok {
		t.Errorf("the refused process's liveness lease: %v, %v; want it released", ok, err)
	}
	st, err := first.Status(t.Context())
	if err != nil || !st.Leading {
		t.Fatalf("the first process after the second was refused: %+v, %v; want it leading", st, err)
	}
	if len(st.Replicas) != 1 || st.Replicas[0].Incarnation != first.incarnation {
		t.Errorf("live replicas %+v, want only the first process", st.Replicas)
	}
	select {
	case <-firstEnded:
		t.Fatalf("the first process stopped: %v", *firstErr)
	default:
	}
}

// newTestLiveness is the liveness of incarnation holder (replica id
// before the slash) on st, driven by clock.
func newTestLiveness(st aliveStore, clock *clocktest.Clock, holder string) *liveness {
	return &liveness{st: st, replica: replicaOf(holder), holder: holder, ttl: testLiveness, clock: clock,
		log: slog.New(slog.DiscardHandler)}
}

// A replica restarted after a crash finds its earlier run's liveness lease
// live but no longer renewed: it waits until that lease is a third from
// running out (a live run would have renewed it twice by then), not
// longer, then drops it, so that the dead run's claims are taken over
// without waiting for the rest of it; before that, it starts nothing and
// drops nothing.
func TestRestartDropsTheDeadRunsLease(t *testing.T) {
	st := openTestStore(t)
	clock := clocktest.New(time.Now().UTC())
	old, err := st.TryLease(t.Context(), alivePrefix+"r/old", "r/old", clock.Now(), testLiveness)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second) // the crash and the restart
	l := newTestLiveness(st, clock, "r/new")
	done := make(chan error, 1)
	go func() { done <- l.start(t.Context()) }()
	decideAt := old.ExpiresAt.Add(-testLiveness / 3)
	for _, at := range []time.Time{clock.Now(), decideAt.Add(-time.Millisecond)} {
		clock.Set(at)
		waitFor(t, "start to wait or return", func() bool { return clock.Pending() > 0 || len(done) > 0 })
		select {
		case err := <-done:
			t.Fatalf("start returned %v at %s, before the earlier run's lease was %s from running out",
				err, clock.Now(), testLiveness/3)
		default:
		}
		if _, ok, err := st.LeaseOf(t.Context(), alivePrefix+"r/old"); err != nil || !ok {
			t.Fatalf("the earlier run's lease at %s: %v, %v; want it kept until %s", clock.Now(), ok, err, decideAt)
		}
	}
	clock.Set(decideAt)
	if err := wait(t, "start to return", done); err != nil {
		t.Fatalf("start after a crash-restart: %v", err)
	}
	if _, ok, err := st.LeaseOf(t.Context(), alivePrefix+"r/old"); err != nil || ok {
		t.Errorf("the dead run's lease: %v, %v; want it dropped", ok, err)
	}
	if l, ok, err := st.LeaseOf(t.Context(), alivePrefix+"r/new"); err != nil || !ok || !clock.Now().Before(l.ExpiresAt) {
		t.Errorf("the new run's lease: %+v, %v, %v; want it held", l, ok, err)
	}
}

// An earlier run's lease that has already run out, or is already in its
// last third, costs no wait at all: start returns without waiting on the
// clock (the one in its last third is dropped, the one run out left to
// the prune). A live lease of another replica id whose name starts alike
// (r2 beside r) is not waited on, nor dropped.
func TestRestartAfterTheLeaseRanOutDoesNotWait(t *testing.T) {
	for _, c := range []struct {
		name    string
		age     time.Duration // of the earlier run's last renewal
		dropped bool
	}{
		{"lease run out", testLiveness, false},
		{"lease in its last third", testLiveness - testLiveness/3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := openTestStore(t)
			clock := clocktest.New(time.Now().UTC())
			if _, err := st.TryLease(t.Context(), alivePrefix+"r/old", "r/old", clock.Now(), testLiveness); err != nil {
				t.Fatal(err)
			}
			if _, err := st.TryLease(t.Context(), alivePrefix+"r2/1", "r2/1", clock.Now().Add(c.age), testLiveness); err != nil {
				t.Fatal(err)
			}
			clock.Advance(c.age)
			done := make(chan error, 1)
			go func() { done <- newTestLiveness(st, clock, "r/new").start(t.Context()) }()
			if err := wait(t, "start to return without the clock moving", done); err != nil {
				t.Fatal(err)
			}
			_, ok, err := st.LeaseOf(t.Context(), alivePrefix+"r/old")
			if err != nil || ok == c.dropped {
				t.Errorf("the earlier run's lease present: %v, %v; want %v", ok, err, !c.dropped)
			}
			if _, ok, err := st.LeaseOf(t.Context(), alivePrefix+"r2/1"); err != nil || !ok {
				t.Errorf("another replica's lease: %v, %v; want it kept", ok, err)
			}
		})
	}
}

// A second live process under a running replica's id: its start sees the
// running one renew its liveness lease and refuses, naming both; the
// running one keeps its lease and its claim on the action it is sending,
// which no other replica may take over, and the pipeline is created once.
func TestTwinIsRefusedAndTheRunningReplicaKeepsItsClaims(t *testing.T) {
	e := newOutboxEnv(t, false)
	e.sendingBase()

	twin := newTestLiveness(e.st, e.clock, "a/2")
	done := make(chan error, 1)
	go func() { done <- twin.start(t.Context()) }()
	var err error
	for ticks := 0; ; ticks++ {
		// a waits for its renewal, the twin watches (or has returned).
		waitFor(t, "a and the twin to wait", func() bool { return e.clock.Pending() >= 2 || len(done) > 0 })
		if len(done) > 0 {
			err = <-done
			break
		}
		if ticks > 3 {
			t.Fatalf("the twin still watches after %d renewal periods", ticks)
		}
		e.clock.Advance(testLiveness / 3)
	}
	var inUse *replicaIDInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("start of a twin of a running replica = %v, want it refused", err)
	}
	for _, want := range []string{`"a"`, "a/1", "--replica-id", "host name and listen port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, ok, err := e.st.LeaseOf(t.Context(), alivePrefix+"a/2"); err != nil || ok {
		t.Errorf("the refused twin's lease: %v, %v; want it released", ok, err)
	}
	if until := e.aliveUntil(); !e.clock.Now().Before(until) {
		t.Fatalf("a's liveness lease runs out at %s, now is %s: want it live", until, e.clock.Now())
	}
	if _, err := e.st.TryLease(t.Context(), alivePrefix+"b/1", "b/1", e.clock.Now(), testLiveness); err != nil {
		t.Fatal(err)
	}
	if n, err := e.b.SendPending(t.Context()); err != nil || n != 0 {
		t.Fatalf("b sent %d, %v while a still sends the action; want 0", n, err)
	}
	close(e.net.release)
	waitFor(t, "a to record its pipeline", func() bool {
		cs, err := e.a.Chains(t.Context(), chain.Filter{})
		return err == nil && len(cs) == 1 && cs[0].Members[0].PipelineID != 0
	})
	if ps := e.srv.Pipelines("g/base"); len(ps) != 1 {
		t.Fatalf("%d pipelines of g/base, want 1", len(ps))
	}
}

// renewOnDrop is a store in which the holder of a lease renews it just
// before another process's DropLease of it lands: a live run whose renewal
// comes at the last moment.
type renewOnDrop struct {
	*store.Store
	clock *clocktest.Clock
}

func (r renewOnDrop) DropLease(ctx context.Context, l store.Lease) (bool, error) {
	if _, err := r.Store.TryLease(ctx, l.Name, l.Holder, r.clock.Now(), testLiveness); err != nil {
		return false, err
	}
	return r.Store.DropLease(ctx, l)
}

// A lease renewed at the moment start decides its run is dead is not
// dropped, and its holder counts as a live twin.
func TestRenewalAtTheLastMomentIsNotDropped(t *testing.T) {
	st := openTestStore(t)
	clock := clocktest.New(time.Now().UTC())
	if _, err := st.TryLease(t.Context(), alivePrefix+"r/old", "r/old", clock.Now(), testLiveness); err != nil {
		t.Fatal(err)
	}
	clock.Advance(testLiveness - testLiveness/3) // decide at once
	done := make(chan error, 1)
	go func() { done <- newTestLiveness(renewOnDrop{st, clock}, clock, "r/new").start(t.Context()) }()
	var err error
	for ticks := 0; ; ticks++ {
		waitFor(t, "start to wait or return", func() bool { return clock.Pending() > 0 || len(done) > 0 })
		if len(done) > 0 {
			err = <-done
			break
		}
		if ticks > 3 {
			t.Fatalf("start still watches after %d renewal periods", ticks)
		}
		clock.Advance(testLiveness / 3)
	}
	var inUse *replicaIDInUseError
	if !errors.As(err, &inUse) || inUse.other != "r/old" {
		t.Fatalf("start = %v, want it refused for r/old", err)
	}
	if _, ok, err := st.LeaseOf(t.Context(), alivePrefix+"r/old"); err != nil || !ok {
		t.Errorf("the lease renewed at the last moment: %v, %v; want it kept", ok, err)
	}
}

// Two processes under one replica id starting at the same moment: each
// takes its lease before it looks, so at least one sees the other, and
// never do both go on to run.
func TestTwinsStartingTogetherNeverBothRun(t *testing.T) {
	st := openTestStore(t)
	clock := clocktest.New(time.Now().UTC())
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		holder string
		err    error // nil: it runs
	}
	results := make(chan result, 2)
	for _, holder := range []string{"r/1", "r/2"} {
		l := newTestLiveness(st, clock, holder)
		wg.Go(func() {
			if err := l.start(ctx); err != nil {
				results <- result{holder, err}
				return
			}
			_ = l.run(ctx, func(ctx context.Context) error {
				select {
				case results <- result{holder, nil}:
				default: // started again: reported once
				}
				<-ctx.Done()
				return nil
			})
		})
	}
	var got []result
	for ticks := 0; len(got) < 2; ticks++ {
		if ticks > 6 {
			t.Fatalf("after %d renewal periods only %+v", ticks, got)
		}
		waitFor(t, "both to wait, run or be refused", func() bool {
			for {
				select {
				case r := <-results:
					got = append(got, r)
					continue
				default:
				}
				// Each one not refused waits on the clock.
				refused := 0
				for _, r := range got {
					if r.err != nil {
						refused++
					}
				}
				return len(got) == 2 || clock.Pending() >= 2-refused
			}
		})
		clock.Advance(testLiveness / 3)
	}
	running := 0
	for _, r := range got {
		var inUse *replicaIDInUseError
		switch {
		case r.err == nil:
			running++
		case !errors.As(r.err, &inUse):
			t.Errorf("%s: %v, want it running or refused", r.holder, r.err)
		}
	}
	if running > 1 {
		t.Fatalf("both processes under one replica id run: %+v", got)
	}
}
