package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// cutLeases is a store whose liveness leases cannot be taken or renewed
// while down is set, as for a replica cut off from its database; it
// counts the attempts that failed.
type cutLeases struct {
	*store.Store
	down   atomic.Bool
	failed atomic.Int32
}

func (c *cutLeases) TryLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (store.Lease, error) {
	if c.down.Load() && strings.HasPrefix(name, alivePrefix) {
		c.failed.Add(1)
		return store.Lease{}, errors.New("store unreachable")
	}
	return c.Store.TryLease(ctx, name, holder, now, ttl)
}

func openTestStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), storetest.State(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// The work runs only once the liveness lease is held: while it cannot be
// taken, nothing is started, however often the renewal is tried.
func TestLivenessStartsWorkOnlyOnceTheLeaseIsHeld(t *testing.T) {
	st := &cutLeases{Store: openTestStore(t)}
	st.down.Store(true)
	clock := clocktest.New(time.Now())
	l := &liveness{st: st, replica: "r", holder: "r/1", ttl: 15 * time.Second, clock: clock, log: slog.New(slog.DiscardHandler)}
	var started atomic.Int32
	leaseHeld := make(chan bool, 4)
	work := func(ctx context.Context) error {
		started.Add(1)
		lease, ok, err := st.LeaseOf(ctx, alivePrefix+"r/1")
		leaseHeld <- err == nil && ok && lease.Holder == "r/1" && clock.Now().Before(lease.ExpiresAt)
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.run(ctx, work) }()
	for range 3 { // three failed attempts, a tick apart
		waitTimer(t, clock)
		clock.Advance(5 * time.Second)
	}
	waitTimer(t, clock)
	if n := st.failed.Load(); n < 3 {
		t.Fatalf("%d failed lease attempts, want 3 or more", n)
	}
	if n := started.Load(); n != 0 {
		t.Fatalf("work started %d times without a liveness lease", n)
	}
	st.down.Store(false)
	clock.Advance(5 * time.Second)
	if held := <-leaseHeld; !held {
		t.Error("work started without a live liveness lease")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.LeaseOf(t.Context(), alivePrefix+"r/1"); ok {
		t.Error("liveness lease not released at the end")
	}
}

// daemon.Run starts the outbox only through the liveness lease: while the
// lease cannot be taken, the outbox never runs, not even once at start.
func TestOutboxWaitsForTheFirstLivenessLease(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian\n"})
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	d, err := New(ctx, Options{Config: cfg, Listen: "127.0.0.1:0", GitLab: gl, LeaderLease: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cut := &cutLeases{Store: d.store}
	cut.down.Store(true)
	d.alive.st = cut
	var ran atomic.Bool
	d.outbox = func(ctx context.Context) error {
		ran.Store(true)
		<-ctx.Done()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitFor(t, "three failed liveness lease attempts", func() bool { return cut.failed.Load() >= 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Run has waited for every goroutine it started: had it started the
	// outbox, it would have run by now.
	if ran.Load() {
		t.Error("the outbox ran before the process held its liveness lease")
	}
}

// heldCreates stands between a replica and GitLab: it holds the
// replica's pipeline creations (POST /projects/:id/pipeline) until the
// test lets them through or the replica gives up on them. With landed,
// GitLab has received the request (and made the pipeline) and only the
// answer is held; without, the request itself is held on its way.
type heldCreates struct {
	next    http.RoundTripper
	landed  bool
	held    chan struct{} // one value per create held
	gaveUp  chan struct{} // one value per held create the replica cancelled
	release chan struct{} // closed: held creates go through
}

func newHeldCreates(landed bool) *heldCreates {
	return &heldCreates{next: http.DefaultTransport, landed: landed, held: make(chan struct{}, 4),
		gaveUp: make(chan struct{}, 4), release: make(chan struct{})}
}

func (h *heldCreates) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/pipeline") {
		return h.next.RoundTrip(r)
	}
	var resp *http.Response
	if h.landed {
		var err error
		if resp, err = h.next.RoundTrip(r); err != nil {
			return nil, err
		}
	}
	h.held <- struct{}{}
	select {
	case <-r.Context().Done():
		if resp != nil {
			resp.Body.Close()
		}
		h.gaveUp <- struct{}{}
		return nil, r.Context().Err()
	case <-h.release:
	}
	if resp != nil {
		return resp, nil
	}
	return h.next.RoundTrip(r.WithContext(context.WithoutCancel(r.Context())))
}

// outboxEnv is two replicas' outbox senders on one store and one fake
// GitLab: a, which runs under its liveness lease (and can be cut off from
// it), and b, which the test drives by hand. The clock is the test's.
type outboxEnv struct {
	t        *testing.T
	srv      *gitlabtest.Server
	st       *store.Store
	cut      *cutLeases
	clock    *clocktest.Clock
	net      *heldCreates
	a, b     *chain.Engine
	live     *liveness
	workEnds chan error // a's RunOutbox returned
}

const testLiveness = 15 * time.Second

func newOutboxEnv(t *testing.T, landed bool) *outboxEnv {
	t.Helper()
	e := &outboxEnv{t: t, srv: gitlabtest.New(gitlabtest.Options{Token: "t"}), st: openTestStore(t),
		clock: clocktest.New(time.Now().UTC()), net: newHeldCreates(landed), workEnds: make(chan error, 4)}
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		select {
		case <-e.net.release:
		default:
			close(e.net.release)
		}
	})
	id, err := e.srv.AddProject(gitlabtest.Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.ApplyScan(t.Context(), []scan.Project{{ID: id, Path: "g/base", DefaultBranch: "main"}},
		scan.Meta{StartedAt: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	e.cut = &cutLeases{Store: e.st}
	e.a = e.engine("a/1", &http.Client{Transport: e.net})
	e.b = e.engine("b/1", &http.Client{})
	e.live = &liveness{st: e.cut, replica: "a", holder: "a/1", ttl: testLiveness, clock: e.clock, log: slog.New(slog.DiscardHandler)}
	return e
}

func (e *outboxEnv) engine(owner string, hc *http.Client) *chain.Engine {
	gl, err := gitlab.New(gitlab.Config{BaseURL: e.srv.URL, Token: "t", RequestsPerMinute: -1, MaxRetries: -1, HTTPClient: hc})
	if err != nil {
		e.t.Fatal(err)
	}
	en, err := chain.New(chain.Config{Owner: owner, Store: e.st, GitLab: gl, Graph: e.st.Graph, Now: e.clock.Now,
		PollInterval: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	return en
}

// sendingBase rebuilds g/base and runs a's outbox until a's create of its
// pipeline is in flight (held by the network).
func (e *outboxEnv) sendingBase() {
	e.t.Helper()
	if _, err := e.a.Rebuild(e.t.Context(), "g/base", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"}); err != nil {
		e.t.Fatal(err)
	}
	e.runA()
	wait(e.t, "a's create to be in flight", e.net.held)
}

// runA runs a's outbox under its liveness lease until the test ends.
func (e *outboxEnv) runA() {
	ctx, cancel := context.WithCancel(e.t.Context())
	done := make(chan error, 1)
	go func() {
		done <- e.live.run(ctx, func(ctx context.Context) error {
			err := e.a.RunOutbox(ctx)
			e.workEnds <- err
			return err
		})
	}()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
	})
}

// waitTimer waits until the code under test waits on the clock, failing
// the test after 10 s.
func waitTimer(t *testing.T, clock *clocktest.Clock) {
	t.Helper()
	waitFor(t, "a timer on the test clock", func() bool { return clock.Pending() > 0 })
}

// wait receives from c, failing the test after 10 s.
func wait[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
		panic("unreachable")
	}
}

// aliveUntil is when a's liveness lease runs out, as stored.
func (e *outboxEnv) aliveUntil() time.Time {
	e.t.Helper()
	l, ok, err := e.st.LeaseOf(e.t.Context(), alivePrefix+"a/1")
	if err != nil || !ok {
		e.t.Fatalf("a's liveness lease: %v, %v", ok, err)
	}
	return l.ExpiresAt
}

// cutOff cuts a off from its liveness lease while its create is in
// flight, and moves the clock a tick at a time until a gives up the
// create; it returns when that happened, with a's outbox stopped.
func (e *outboxEnv) cutOff() (gaveUpAt, expires time.Time) {
	e.t.Helper()
	expires = e.aliveUntil()
	e.cut.down.Store(true)
	for {
		select {
		case <-e.net.gaveUp:
			gaveUpAt = e.clock.Now()
			wait(e.t, "a's outbox to stop", e.workEnds)
			return gaveUpAt, expires
		default:
		}
		if !e.clock.Now().Add(testLiveness / 3).Before(expires) {
			// The next tick reaches the lease's end: a must have given
			// up by now.
			wait(e.t, "a to give up its create before its liveness lease runs out", e.net.gaveUp)
			gaveUpAt = e.clock.Now()
			wait(e.t, "a's outbox to stop", e.workEnds)
			return gaveUpAt, expires
		}
		waitTimer(e.t, e.clock)
		e.clock.Advance(testLiveness / 3)
	}
}

// A replica cut off from the store while its pipeline creation is in
// flight cancels it before its liveness lease runs out; the replica that
// takes the action over then creates the pipeline, or adopts the one
// GitLab made from the cancelled request: one pipeline in both cases, even
// once the cut-off replica's network gives its request back.
func TestCutOffReplicaCancelsItsSendBeforeTakeover(t *testing.T) {
	for _, landed := range []bool{false, true} {
		name := map[bool]string{false: "request held on its way", true: "GitLab received it"}[landed]
		t.Run(name, func(t *testing.T) {
			e := newOutboxEnv(t, landed)
			e.sendingBase()

			gaveUpAt, expires := e.cutOff()
			if !gaveUpAt.Before(expires) {
				t.Fatalf("a gave up its create at %s, not before its liveness lease ran out at %s", gaveUpAt, expires)
			}

			// b takes over once a's lease has run out.
			e.clock.Set(expires.Add(time.Millisecond))
			if _, err := e.st.TryLease(t.Context(), alivePrefix+"b/1", "b/1", e.clock.Now(), testLiveness); err != nil {
				t.Fatal(err)
			}
			if n, err := e.b.SendPending(t.Context()); err != nil || n != 1 {
				t.Fatalf("b sent %d, %v; want 1", n, err)
			}
			close(e.net.release) // whatever a's network still held goes through
			if ps := e.srv.Pipelines("g/base"); len(ps) != 1 {
				t.Fatalf("%d pipelines of g/base, want 1", len(ps))
			}
			cs, err := e.b.Chains(t.Context(), chain.Filter{})
			if err != nil || len(cs) != 1 || cs[0].Members[0].PipelineID != e.srv.Pipelines("g/base")[0].ID {
				t.Fatalf("chains %+v, %v: want the pipeline recorded", cs, err)
			}
		})
	}
}

// A replica cut off from the store only briefly stops sending, and when it
// holds its liveness lease again it resends at once: the claim it
// abandoned is given back, not left to run out.
func TestCutOffReplicaResumesWhenItHoldsItsLeaseAgain(t *testing.T) {
	e := newOutboxEnv(t, false)
	e.sendingBase()
	e.cutOff()
	if ps := e.srv.Pipelines("g/base"); len(ps) != 0 {
		t.Fatalf("%d pipelines while a was cut off", len(ps))
	}

	close(e.net.release)
	e.cut.down.Store(false)
	waitTimer(e.t, e.clock)
	e.clock.Advance(testLiveness / 3) // the next renewal succeeds
	waitFor(t, "a to create the pipeline after it got its lease back", func() bool {
		return len(e.srv.Pipelines("g/base")) == 1
	})
	waitFor(t, "the pipeline to be recorded", func() bool {
		cs, err := e.a.Chains(t.Context(), chain.Filter{})
		return err == nil && len(cs) == 1 && cs[0].Members[0].PipelineID != 0
	})
	if ps := e.srv.Pipelines("g/base"); len(ps) != 1 {
		t.Fatalf("%d pipelines of g/base, want 1", len(ps))
	}
}
