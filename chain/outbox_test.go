package chain_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/store"
)

func TestRetryableCreateErrorBacksOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	fails := 2
	e.gl.createErr = func(int64) (error, bool) {
		if fails > 0 {
			fails--
			return errBoom, false
		}
		return nil, false
	}
	id := e.rebuild("base")
	if n := e.send(); n != 0 {
		t.Fatalf("sent %d despite the error", n)
	}
	v := e.wantStates(id, "a=waiting base=pending")
	if why := member(v, "base").Why; !strings.Contains(why, "retrying at") || !strings.Contains(why, "connection reset") {
		t.Errorf("base why = %q", why)
	}
	if n := e.send(); n != 0 || e.gl.creates != 1 {
		t.Fatalf("retried before the backoff: sent %d, creates %d", n, e.gl.creates)
	}
	e.clock.Advance(10 * time.Second) // first backoff: BackoffBase
	e.send()
	if e.gl.creates != 2 {
		t.Fatalf("creates = %d after the first backoff, want 2", e.gl.creates)
	}
	e.clock.Advance(10 * time.Second) // second backoff is 20 s: not yet
	e.send()
	if e.gl.creates != 2 {
		t.Fatalf("creates = %d before the second backoff ended, want 2", e.gl.creates)
	}
	e.clock.Advance(10 * time.Second)
	if n := e.send(); n != 1 {
		t.Fatalf("sent %d after the second backoff, want 1", n)
	}
	e.wantStates(id, "a=waiting base=triggered")
	e.wantCounts(map[string]int{"base": 1})
}

func TestFailedCreateThatDidCreateIsAdoptedNotResent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	first := true
	e.gl.createErr = func(int64) (error, bool) {
		if first {
			first = false
			return errBoom, true // 5xx, but GitLab made the pipeline
		}
		return nil, false
	}
	id := e.rebuild("base")
	e.send()
	e.wantCounts(map[string]int{"base": 1})
	e.clock.Advance(time.Minute)
	if n := e.send(); n != 1 {
		t.Fatalf("sent %d, want 1 (adopted)", n)
	}
	e.wantCounts(map[string]int{"base": 1})
	if e.gl.creates != 1 {
		t.Errorf("CreatePipeline called %d times, want 1", e.gl.creates)
	}
	v := e.wantStates(id, "a=waiting base=triggered")
	if member(v, "base").PipelineID != e.latest("base").ID {
		t.Errorf("adopted pipeline not recorded: %+v", member(v, "base"))
	}
}

// A crash after GitLab created the pipeline and before the store recorded
// it: after a restart the action is adopted, not sent again.
func TestCrashAfterSendIsAdoptedAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b")
	id := e.rebuild("base")

	crashCtx, crash := context.WithCancel(e.ctx)
	e.gl.createErr = func(int64) (error, bool) {
		crash() // the process dies while the answer is on its way
		return context.Canceled, true
	}
	if _, err := e.engine.SendPending(crashCtx); err == nil {
		t.Fatal("SendPending survived the crash")
	}
	e.gl.createErr = nil
	e.wantStates(id, "a=waiting b=waiting base=pending")
	e.wantCounts(map[string]int{"base": 1})

	// Restart: a new store handle and engine on the same file. The lease
	// of the dead worker must run out first.
	s2, err := store.Open(e.ctx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	e.store = s2
	e.engine = e.newEngine(chain.Full, e.gl)
	if n := e.send(); n != 0 {
		t.Fatalf("sent %d while the dead worker's lease holds", n)
	}
	e.clock.Advance(5 * time.Minute)
	if n := e.send(); n != 1 {
		t.Fatalf("sent %d after the lease, want 1 (adopted)", n)
	}
	e.wantCounts(map[string]int{"base": 1})
	e.finish("base", "success")
	e.send()
	e.finish("a", "success")
	e.send()
	e.finish("b", "success")
	e.wantStates(id, "a=success b=success base=success")
	e.wantCounts(map[string]int{"base": 1, "a": 1, "b": 1})
}

// The webhook of a new pipeline can arrive before the worker recorded the
// create call's answer.
func TestWebhookBeforeCreateAnswerIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	id := e.rebuild("base")
	chain.SetSendHook(e.engine, func(a chain.Action) {
		chain.SetSendHook(e.engine, nil)
		// GitLab creates the pipeline and its hook is processed at once.
		p, err := e.gl.CreatePipeline(e.ctx, a.ProjectID, a.Ref, gitlab.CreateOptions{Variables: a.Variables(a.ChainID)})
		if err != nil {
			t.Error(err)
		}
		e.gl.createErr = func(int64) (error, bool) { return errBoom, false }
		e.gl.setStatus(p.ID, "running")
		e.deliver(chain.PipelineEvent{ProjectID: a.ProjectID, Project: a.Project, PipelineID: p.ID, Status: "running",
			Ref: "main", Source: "api", Variables: a.Variables(a.ChainID), URL: p.WebURL})
	})
	e.send() // its own create fails: the action is already sent
	v := e.wantStates(id, "a=waiting base=running")
	if why := member(v, "base").Why; why != "" {
		t.Errorf("base why = %q after the webhook recorded the pipeline", why)
	}
	e.clock.Advance(time.Hour)
	e.send()
	e.wantCounts(map[string]int{"base": 1})
}

func TestTwoEnginesOnOneStoreNeverDoubleTrigger(t *testing.T) {
	t.Parallel()
	edges := []string{"base>l1a", "base>l1b", "base>l1c"}
	for _, up := range []string{"l1a", "l1b", "l1c"} {
		for _, down := range []string{"l2a", "l2b", "l2c"} {
			edges = append(edges, up+">"+down)
		}
	}
	edges = append(edges, "l2a>end", "l2b>end", "l2c>end")
	e := newEnv(t, chain.Full, edges...)
	s2, err := store.Open(e.ctx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	engines := []*chain.Engine{e.engine, e.newEngineOn(s2)}
	id := e.rebuild("base")

	done := map[int64]bool{}
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		for _, en := range engines {
			wg.Go(func() {
				if _, err := en.SendPending(e.ctx); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// Each success is delivered to both engines (two hooks), at once.
		for _, p := range e.gl.pipelinesSnapshot() {
			if done[p.ID] {
				continue
			}
			done[p.ID] = true
			e.gl.setStatus(p.ID, "success")
			for i, en := range engines {
				wg.Go(func() {
					ev := chain.PipelineEvent{ProjectID: p.ProjectID, Project: e.pathOf(p.ProjectID), PipelineID: p.ID,
						Status: "success", Ref: "main", Source: "api", Variables: p.vars}
					key := "k" + string(rune('a'+i)) + p.WebURL
					if _, err := en.RecordEvent(e.ctx, key, chain.Event{Pipeline: &ev}); err != nil {
						t.Error(err)
					}
					if _, err := en.ProcessInbox(e.ctx); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		if e.chain(id).State == chain.Finished {
			break
		}
	}
	if v := e.chain(id); v.State != chain.Finished {
		t.Fatalf("chain not finished: %s", states(v))
	}
	for p := range e.ids {
		if n := e.count(p); n != 1 {
			t.Errorf("%s built %d times, want 1", p, n)
		}
	}
}

func (e *env) newEngineOn(s *store.Store) *chain.Engine {
	en, err := chain.New(chain.Config{Store: s, GitLab: e.gl, Graph: s.Graph, Now: e.clock.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	return en
}

func (e *env) pathOf(id int64) string {
	for p, i := range e.ids {
		if i == id {
			return p
		}
	}
	return ""
}

func (f *fakeGitLab) pipelinesSnapshot() []fakePipeline {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakePipeline(nil), f.pipelines...)
}

func TestReconcilerCatchesMissedWebhooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	id := e.rebuild("base")
	e.send()
	e.gl.setStatus(e.latest("base").ID, "running") // no webhook
	if n, err := e.engine.Reconcile(e.ctx); n != 1 || err != nil {
		t.Fatalf("Reconcile = %d, %v; want 1", n, err)
	}
	e.wantStates(id, "a=waiting base=running")
	if n, _ := e.engine.Reconcile(e.ctx); n != 0 {
		t.Errorf("second Reconcile changed %d", n)
	}
	e.gl.setStatus(e.latest("base").ID, "success")
	e.engine.Reconcile(e.ctx)
	e.wantStates(id, "a=pending base=success")
	e.send()
	// A late webhook after the reconciler saw the end changes nothing.
	e.deliver(chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: e.latest("base").ID,
		Status: "running", Ref: "main", Source: "api"})
	e.wantStates(id, "a=triggered base=success")
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>b")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success") // a and b pending, not sent
	e.clock.Advance(7*24*time.Hour - time.Minute)
	e.engine.Reconcile(e.ctx)
	if v := e.chain(id); v.State != chain.Running {
		t.Fatalf("expired early: %s", v.State)
	}
	e.clock.Advance(2 * time.Minute)
	if _, err := e.engine.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	v := e.wantStates(id, "a=expired b=expired base=success")
	if v.State != chain.Expired || !strings.Contains(member(v, "a").Why, "expired while pending") {
		t.Errorf("chain = %s, a why %q", v.State, member(v, "a").Why)
	}
	if n := e.send(); n != 0 {
		t.Errorf("sent %d actions of an expired chain", n)
	}
	// The chain no longer reacts; a new success starts a new chain.
	e.external("base", 4242, "success")
	cs, _ := e.engine.Chains(e.ctx, chain.Filter{State: chain.Running})
	if len(cs) != 1 || cs[0].ID == id {
		t.Errorf("running chains = %+v", cs)
	}
}

func TestFirstLevelModeTriggersDirectDependentsOnEverySuccess(t *testing.T) {
	t.Parallel()
	diamond := []string{"base>a", "base>b", "a>c", "b>c"}
	run := func(mode chain.Mode) *env {
		e := newEnv(t, mode, diamond...)
		e.rebuild("base")
		for range 10 {
			e.send()
			for _, p := range e.gl.pipelinesSnapshot() {
				if p.Status == "created" {
					e.finishPipeline(e.pathOf(p.ProjectID), p, "success")
				}
			}
		}
		return e
	}
	full, first := run(chain.Full), run(chain.FirstLevel)
	full.wantCounts(map[string]int{"base": 1, "a": 1, "b": 1, "c": 1})
	first.wantCounts(map[string]int{"base": 1, "a": 1, "b": 1, "c": 2})
	cs, err := first.engine.Chains(first.ctx, chain.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// rebuild base; base's success → a, b; a's success → c; b's → c; c's → none.
	if len(cs) != 4 {
		t.Fatalf("%d first-level chains, want 4", len(cs))
	}
	for _, c := range cs {
		if c.Mode != chain.FirstLevel || c.State != chain.Finished {
			t.Errorf("chain %d: %s %s", c.ID, c.Mode, c.State)
		}
	}
}

// The workers wake at once: a rebuild wakes the outbox worker, a recorded
// event wakes the inbox processor; canceling ctx stops both.
func TestWorkersWakeAndStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	obs := &signalObserver{created: make(chan string, 4)}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Now: e.clock.Now, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = en
	stop := runWorkers(t, e.ctx, e.engine.RunInbox, e.engine.RunOutbox)
	defer stop() // if the test ends early
	id := e.rebuild("base")
	if p := <-obs.created; p != "base" {
		t.Fatalf("created %s first", p)
	}
	p := e.latest("base")
	ev := chain.PipelineEvent{ProjectID: p.ProjectID, Project: "base", PipelineID: p.ID, Status: "success",
		Ref: "main", Source: "api", Variables: p.vars}
	e.gl.setStatus(p.ID, "success")
	if _, err := e.engine.RecordEvent(e.ctx, "run-1", chain.Event{Pipeline: &ev}); err != nil {
		t.Fatal(err)
	}
	if p := <-obs.created; p != "a" { // the event was processed and a's action sent
		t.Fatalf("created %s second", p)
	}
	stop()
	if v := e.chain(id); states(v) != "a=triggered base=success" {
		t.Errorf("chain: %s", states(v))
	}
}

// signalObserver reports created pipelines on a channel.
type signalObserver struct{ created chan string }

func (o *signalObserver) EventApplied(string, string)            {}
func (o *signalObserver) PipelineCreated(project string, _ bool) { o.created <- project }
func (o *signalObserver) ActionError(string, bool)               {}
func (o *signalObserver) ChainEnded(chain.State, time.Duration)  {}
func (o *signalObserver) CommitStatus(string, string)            {}

// A failed member whose retry succeeds while the webhook is lost: the
// reconciler sees the retried pipeline (same id) succeed and unblocks.
func TestReconcilerCatchesMissedRetrySuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	e.finish("a", "failed")
	e.wantStates(id, "a=failed b=blocked base=success")
	if n, err := e.engine.Reconcile(e.ctx); n != 0 || err != nil {
		t.Fatalf("Reconcile with nothing new = %d, %v", n, err)
	}
	e.clock.Advance(time.Minute)
	e.gl.setStatus(e.latest("a").ID, "success") // a retry; its webhook is lost
	if n, err := e.engine.Reconcile(e.ctx); n != 1 || err != nil {
		t.Fatalf("Reconcile = %d, %v; want 1", n, err)
	}
	e.wantStates(id, "a=success b=pending base=success")
	e.send()
	if e.count("a") != 1 || e.count("b") != 1 {
		t.Errorf("pipelines: a %d, b %d", e.count("a"), e.count("b"))
	}
}

// RunOutbox stopped in the middle of a send (the daemon stops it while
// its liveness lease cannot be renewed) gives the claim back when it runs
// again, instead of leaving the action claimed for its whole Lease; the
// new claim looks for the pipeline first, so a create GitLab carried out
// before the stop is adopted, not repeated.
func TestRestartedOutboxGivesBackTheClaimOfAStoppedSend(t *testing.T) {
	t.Parallel()
	for _, landed := range []bool{false, true} {
		t.Run(map[bool]string{false: "not created", true: "created"}[landed], func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, chain.Full, "base>a")
			obs := &signalObserver{created: make(chan string, 4)}
			en, err := chain.New(chain.Config{Owner: "p/1", Store: e.store, GitLab: e.gl, Graph: e.store.Graph,
				Now: e.clock.Now, Observer: obs, PollInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.store.TryLease(e.ctx, "alive:p/1", "p/1", e.clock.Now(), time.Hour); err != nil {
				t.Fatal(err)
			}
			e.engine = en
			id := e.rebuild("base")

			stopCtx, stop := context.WithCancel(e.ctx)
			e.gl.createErr = func(int64) (error, bool) {
				stop() // the outbox is stopped while the request is out
				return context.Canceled, landed
			}
			if err := en.RunOutbox(stopCtx); err != nil {
				t.Fatalf("RunOutbox = %v", err)
			}
			e.gl.createErr = nil

			ctx, cancel := context.WithCancel(e.ctx)
			stopped := make(chan error, 1)
			go func() { stopped <- en.RunOutbox(ctx) }()
			select {
			case p := <-obs.created:
				if p != "base" {
					t.Fatalf("created %s", p)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the restarted outbox did not send the action whose send was stopped")
			}
			cancel()
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			e.wantStates(id, "a=waiting base=triggered")
			e.wantCounts(map[string]int{"base": 1})
		})
	}
}

// A claim given up by a stopped send and since taken over by another
// process (its owner's liveness lease ran out) is that process's: the
// first owner, running again, neither gives it back nor sends it.
func TestGivingBackLeavesAClaimTakenOverAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	engine := func(owner string) *chain.Engine {
		en, err := chain.New(chain.Config{Owner: owner, Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return en
	}
	first, second := engine("p/1"), engine("p/2")
	if _, err := e.store.TryLease(e.ctx, "alive:p/1", "p/1", e.clock.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	e.engine = first
	id := e.rebuild("base")
	stopCtx, stop := context.WithCancel(e.ctx)
	e.gl.createErr = func(int64) (error, bool) { stop(); return context.Canceled, false }
	if _, err := first.SendPending(stopCtx); err == nil {
		t.Fatal("the stopped send reported no error")
	}
	e.gl.createErr = nil

	// p/1's liveness lease runs out; p/2 takes the action over, and while
	// its create is on its way p/1 runs again.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.store.TryLease(e.ctx, "alive:p/2", "p/2", e.clock.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	chain.SetSendHook(second, func(chain.Action) {
		chain.SetSendHook(second, nil)
		if _, err := e.store.TryLease(e.ctx, "alive:p/1", "p/1", e.clock.Now(), time.Hour); err != nil {
			t.Error(err)
		}
		if err := chain.ReleaseAbandoned(e.ctx, first); err != nil {
			t.Error(err)
		}
		if n, err := first.SendPending(e.ctx); err != nil || n != 0 {
			t.Errorf("the first owner sent %d, %v while the second's claim holds", n, err)
		}
	})
	if n, err := second.SendPending(e.ctx); err != nil || n != 1 {
		t.Fatalf("second sent %d, %v; want 1", n, err)
	}
	e.engine = second
	e.wantStates(id, "a=waiting base=triggered")
	e.wantCounts(map[string]int{"base": 1})
}

// blockingGitLab holds the creates of one project (of all, if hold is 0)
// until release is closed, and reports every create that reaches it.
type blockingGitLab struct {
	*fakeGitLab
	hold    int64
	release chan struct{}
	entered chan int64
}

func (b *blockingGitLab) CreatePipeline(ctx context.Context, projectID int64, ref string, vars gitlab.CreateOptions) (gitlab.Pipeline, error) {
	b.entered <- projectID
	if b.hold == 0 || projectID == b.hold {
		select {
		case <-b.release:
		case <-ctx.Done():
			return gitlab.Pipeline{}, ctx.Err()
		}
	}
	return b.fakeGitLab.CreatePipeline(ctx, projectID, ref, vars)
}

// An action written while another is being sent is sent beside it, not
// after it: RunOutbox used to wait for a whole round of sends, and a round
// whose last worker kept finding work sent one action at a time (the
// 2,000-project rebuild ran at a quarter of its speed, now and then). y's
// action is written by another engine (as by `depsd rebuild`), so that
// this one's outbox finds it by itself rather than being handed it.
func TestRunOutboxSendsANewActionBesideASlowOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x", "y")
	gl := &blockingGitLab{fakeGitLab: e.gl, hold: e.ids["x"], release: make(chan struct{}), entered: make(chan int64, 8)}
	en, err := chain.New(chain.Config{Store: e.store, GitLab: gl, Graph: e.store.Graph, Now: e.clock.Now,
		PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.engine = en
	other := e.newEngine(chain.Full, gl)
	defer runWorkers(t, e.ctx, e.engine.RunOutbox)()
	defer close(gl.release)
	wait := func(want int64) {
		t.Helper()
		select {
		case got := <-gl.entered:
			if got != want {
				t.Fatalf("create for project %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no create for project %d while project %d's is in flight", want, gl.hold)
		}
	}
	e.rebuild("x")
	wait(e.ids["x"]) // held
	// Let the claim that took x end first: y must then be found by the
	// outbox's next round, not by a claim still running since x's (which
	// let an outbox that waits for its sends pass, under CI's load).
	time.Sleep(10 * 20 * time.Millisecond)
	if _, err := other.Rebuild(e.ctx, "y", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"}); err != nil {
		t.Fatal(err)
	}
	wait(e.ids["y"])
}

// The due actions are sent at once, up to SendConcurrency: each claim
// starts another worker while slots are free.
func TestSendPendingSendsDueActionsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x", "y", "z")
	gl := &blockingGitLab{fakeGitLab: e.gl, release: make(chan struct{}), entered: make(chan int64, 8)}
	e.engine = e.newEngine(chain.Full, gl)
	for _, p := range []string{"x", "y", "z"} {
		e.rebuild(p)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := e.engine.SendPending(e.ctx)
		done <- result{n, err}
	}()
	for i := range 3 {
		select {
		case <-gl.entered:
		case <-time.After(10 * time.Second):
			close(gl.release)
			<-done
			t.Fatalf("%d creates in flight, want 3 at once", i)
		}
	}
	close(gl.release)
	if r := <-done; r.err != nil || r.n != 3 {
		t.Fatalf("SendPending = %d, %v; want 3", r.n, r.err)
	}
}

// noClaimStore is a store whose transactions never find an action due:
// only an action handed to the outbox by the transaction that queued it
// can be sent.
type noClaimStore struct{ *store.Store }

type noDueTx struct{ chain.Tx }

func (noDueTx) DueAction(context.Context, time.Time) (chain.Action, bool, error) {
	return chain.Action{}, false, nil
}

func (s noClaimStore) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	return s.Store.UpdateChains(ctx, func(tx chain.Tx) error { return fn(noDueTx{tx}) })
}

// With RunOutbox running, the transaction that queues an action claims it
// for this engine and hands it to a sender once committed: the create goes
// out without a claim transaction (here, claims find nothing) and without
// waking the outbox.
func TestQueuedActionIsHandedToTheRunningOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x")
	gl := &blockingGitLab{fakeGitLab: e.gl, hold: -1, entered: make(chan int64, 8)}
	en, err := chain.New(chain.Config{Store: noClaimStore{e.store}, GitLab: gl, Graph: e.store.Graph, Now: e.clock.Now,
		Owner: "me", PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer runWorkers(t, e.ctx, en.RunOutbox)()
	// RunOutbox registers its senders as it starts; an action queued
	// before that would be written unclaimed.
	deadline := time.Now().Add(10 * time.Second)
	for !chain.OutboxRunning(en) {
		if time.Now().After(deadline) {
			t.Fatal("RunOutbox did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := en.Rebuild(e.ctx, "x", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-gl.entered:
		if got != e.ids["x"] {
			t.Fatalf("create for project %d", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued action was not handed to the running outbox")
	}
}
