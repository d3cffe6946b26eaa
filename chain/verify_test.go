package chain_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// fakeVerifier answers each project's verifications from a script: the
// n-th verification of a project gets its n-th answer (the last one
// repeats). A project without answers publishes nothing.
type fakeVerifier struct {
	mu      sync.Mutex
	answers map[string][]chain.Verification
	asked   []chain.VerifyRequest
	// hold, when set, makes Verify wait for its context to end (a
	// registry that never answers); held is closed at the first call.
	hold bool
	held chan struct{}
	// gates hold the verifications of their projects until closed (or
	// the context ends); entered gets each such project as it waits.
	gates   map[string]chan struct{}
	entered chan string
}

func newFakeVerifier(answers map[string][]chain.Verification) *fakeVerifier {
	return &fakeVerifier{answers: answers, held: make(chan struct{})}
}

func (f *fakeVerifier) Publishes(p string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.answers[p]
	return ok
}

func (f *fakeVerifier) Verify(ctx context.Context, req chain.VerifyRequest) chain.Verification {
	f.mu.Lock()
	n := 0
	for _, a := range f.asked {
		if a.Project == req.Project {
			n++
		}
	}
	f.asked = append(f.asked, req)
	hold := f.hold
	if hold && n == 0 {
		close(f.held)
	}
	answers := f.answers[req.Project]
	gate := f.gates[req.Project]
	f.mu.Unlock()
	if gate != nil {
		f.entered <- req.Project
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	if hold {
		<-ctx.Done()
		return chain.Verification{State: chain.ImageUnknown, Detail: "registry unreachable: " + ctx.Err().Error()}
	}
	return answers[min(n, len(answers)-1)]
}

// askedFor lists the pipelines whose verification project was asked for.
func (f *fakeVerifier) askedFor(project string) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int64
	for _, a := range f.asked {
		if a.Project == project {
			out = append(out, a.PipelineID)
		}
	}
	return out
}

var (
	fresh = chain.Verification{State: chain.ImageFresh, Detail: "built on the current image of every upstream"}
	stale = chain.Verification{State: chain.ImageStale,
		Detail: "built on ruby sha256:0123456789ab, not sha256:ba9876543210 (base annotation)"}
	unknown = chain.Verification{State: chain.ImageUnknown, Detail: "no base annotation, and ruby's current layers are not the image's first"}
)

// verifying makes e's engine verify with v under mode.
func (e *env) verifying(v chain.Verifier, mode chain.VerifyMode) {
	e.t.Helper()
	e.engine = e.newVerifyingEngine(v, mode, 0)
}

func (e *env) newVerifyingEngine(v chain.Verifier, mode chain.VerifyMode, timeout time.Duration) *chain.Engine {
	e.t.Helper()
	en, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full, Now: e.clock.Now,
		Verifier: v, Verify: mode, VerifyTimeout: timeout})
	if err != nil {
		e.t.Fatal(err)
	}
	return en
}

// verify applies every queued verification.
func (e *env) verify() int {
	e.t.Helper()
	n, err := e.engine.VerifyPending(e.ctx)
	if err != nil {
		e.t.Fatalf("VerifyPending: %v", err)
	}
	return n
}

func TestStaleMemberIsRebuiltOnceWithoutCacheThenFresh(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop", "shop>web")
	v := newFakeVerifier(map[string][]chain.Verification{"ruby": {fresh}, "shop": {stale, fresh}})
	e.verifying(v, "") // enforce by default
	id := e.rebuild("ruby")
	e.send()
	e.finish("ruby", "success")
	got := e.wantStates(id, "ruby=verifying shop=waiting web=waiting")
	if got.State != chain.Running {
		t.Errorf("chain %s while ruby is verifying, want running", got.State)
	}
	e.verify()
	e.wantStates(id, "ruby=success shop=pending web=waiting")
	e.send()
	first := e.latest("shop")
	e.finish("shop", "success")
	e.wantStates(id, "ruby=success shop=verifying web=waiting")
	e.verify()
	got = e.wantStates(id, "ruby=success shop=pending web=waiting")
	m := member(got, "shop")
	wantWhy := "stale: " + stale.Detail + "; rebuilding without cache"
	if m.Why != wantWhy || m.Builds != 2 || !m.NoCache || m.Verified != chain.ImageStale {
		t.Errorf("shop after a stale verdict = %+v\nwant why %q, 2 builds, no cache", m, wantWhy)
	}
	e.send()
	rebuilt := e.latest("shop")
	if rebuilt.ID == first.ID {
		t.Fatal("no second pipeline for the stale shop")
	}
	if rebuilt.vars[chain.VarNoCache] != "1" {
		t.Errorf("variables of the rebuild = %v, want %s=1", rebuilt.vars, chain.VarNoCache)
	}
	if _, ok := first.vars[chain.VarNoCache]; ok {
		t.Errorf("variables of the first build = %v: it was not asked without cache", first.vars)
	}
	e.finish("shop", "success")
	e.verify()
	got = e.wantStates(id, "ruby=success shop=success web=pending")
	if m := member(got, "shop"); m.Verified != chain.ImageFresh || m.Why != "" {
		t.Errorf("shop after a fresh rebuild = %+v", m)
	}
	e.send()
	e.finish("web", "success") // web publishes nothing: success at once
	got = e.wantStates(id, "ruby=success shop=success web=success")
	if got.State != chain.Finished {
		t.Errorf("chain %s, want finished", got.State)
	}
	e.wantCounts(map[string]int{"ruby": 1, "shop": 2, "web": 1})
	if asked := v.askedFor("shop"); len(asked) != 2 || asked[0] != first.ID || asked[1] != rebuilt.ID {
		t.Errorf("shop verified for pipelines %v, want %d then %d", asked, first.ID, rebuilt.ID)
	}
	if n := e.verify(); n != 0 {
		t.Errorf("%d verifications left once the chain finished", n)
	}
}

func TestStaleTwiceBlocksDescendantsWithTheDigests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop", "shop>web", "web>cdn")
	v := newFakeVerifier(map[string][]chain.Verification{"shop": {stale, stale, fresh}})
	e.verifying(v, chain.VerifyEnforce)
	id := e.rebuild("shop")
	e.send()
	e.finish("shop", "success")
	e.verify()
	e.send()
	e.finish("shop", "success")
	e.verify()
	got := e.wantStates(id, "cdn=blocked shop=stale web=blocked")
	if got.State != chain.Blocked {
		t.Errorf("chain %s, want blocked", got.State)
	}
	wantBlocked := "blocked: shop was built on ruby sha256:0123456789ab, not sha256:ba9876543210 (base annotation)"
	for _, p := range []string{"web", "cdn"} {
		if m := member(got, p); m.Why != wantBlocked {
			t.Errorf("%s why = %q\nwant %q", p, m.Why, wantBlocked)
		}
	}
	if m := member(got, "shop"); m.Why != "still stale after a rebuild without cache: "+stale.Detail || m.Builds != 2 {
		t.Errorf("shop = %+v", m)
	}
	if n := e.send(); n != 0 {
		t.Errorf("sent %d after the second stale verdict: stale is rebuilt once", n)
	}
	e.wantCounts(map[string]int{"shop": 2, "web": 0})

	// A later success of shop (someone fixed its build) unblocks it once
	// its images are verified fresh.
	e.external("shop", 7777, "success")
	e.external("shop", 7777, "success") // delivered twice: it counted once
	got = e.wantStates(id, "cdn=waiting shop=verifying web=waiting")
	if len(got.Reasons) != 1 {
		t.Errorf("reasons %+v: the success seen again was taken for a new change", got.Reasons)
	}
	e.verify()
	e.wantStates(id, "cdn=waiting shop=success web=pending")
	if asked := v.askedFor("shop"); len(asked) != 3 || asked[2] != 7777 {
		t.Errorf("shop verified for pipelines %v, want the fix 7777 last", asked)
	}
}

func TestUnknownNeverBlocks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		answer  chain.Verification
		hold    bool
		timeout time.Duration
		detail  string
	}{
		{"cannot be judged", unknown, false, 0, unknown.Detail},
		{"no answer in time", chain.Verification{}, true, time.Millisecond, "no verdict within 1ms"},
		{"an answer the engine does not know", chain.Verification{State: "maybe", Detail: "?"}, false, 0, `the verifier answered "maybe": ?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, chain.Full, "ruby>shop", "shop>web")
			v := newFakeVerifier(map[string][]chain.Verification{"shop": {tc.answer}})
			v.hold = tc.hold
			e.engine = e.newVerifyingEngine(v, chain.VerifyEnforce, tc.timeout)
			id := e.rebuild("shop")
			e.send()
			e.finish("shop", "success")
			e.wantStates(id, "shop=verifying web=waiting")
			e.verify()
			got := e.wantStates(id, "shop=success web=pending")
			if m := member(got, "shop"); m.Verified != chain.ImageUnknown || m.VerifyDetail != tc.detail || m.Builds != 1 {
				t.Errorf("shop = %+v, want unknown %q after one build", m, tc.detail)
			}
		})
	}
}

// TestSlowVerificationHoldsBackOnlyItsOwn: a member's verification queued
// while another waits for a slow registry (here the chain root's own,
// report only) is done at once: the member's descendants do not wait for
// an unrelated image's verification (they once waited for the whole batch
// read before, up to images.timeout: BenchmarkVerificationCost's registry
// hanging case). Queued by this engine, it is woken; queued by another
// replica (which applied the webhook), it is found at the next poll.
func TestSlowVerificationHoldsBackOnlyItsOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		replica bool          // shop's success is applied by another engine on the store
		poll    time.Duration // the verifying engine's PollInterval
	}{
		{"queued here", false, time.Hour},
		{"queued by another replica", true, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, chain.Full, "ruby>shop", "shop>web")
			v := newFakeVerifier(map[string][]chain.Verification{"ruby": {fresh}, "shop": {fresh}})
			release := make(chan struct{})
			v.gates, v.entered = map[string]chan struct{}{"ruby": release}, make(chan string, 1)
			leader, err := chain.New(chain.Config{Store: e.store, GitLab: e.gl, Graph: e.store.Graph, Mode: chain.Full,
				Now: e.clock.Now, Verifier: v, Verify: chain.VerifyEnforce, PollInterval: tc.poll})
			if err != nil {
				t.Fatal(err)
			}
			e.engine = leader
			if tc.replica {
				e.verifying(v, chain.VerifyEnforce) // webhooks are applied by another engine
			}
			e.external("ruby", 500, "success") // starts the chain; ruby's images are verified beside it
			cs, err := e.engine.Chains(e.ctx, chain.Filter{})
			if err != nil || len(cs) != 1 {
				t.Fatalf("chains = %v, %v", cs, err)
			}
			id := cs[0].ID
			type result struct {
				n   int
				err error
			}
			done := make(chan result, 1)
			go func() {
				n, err := leader.VerifyPending(e.ctx)
				done <- result{n, err}
			}()
			released := false
			defer func() {
				if !released {
					close(release)
				}
			}()
			<-v.entered // ruby's registry does not answer
			e.send()
			e.finish("shop", "success") // queues shop's verification
			deadline := time.Now().Add(10 * time.Second)
			for states(e.chain(id)) != "ruby=success shop=success web=pending" {
				if time.Now().After(deadline) {
					t.Fatalf("chain %d members %s while ruby's verification is held: want shop verified and web pending, not waiting for ruby's",
						id, states(e.chain(id)))
				}
				time.Sleep(time.Millisecond)
			}
			close(release)
			released = true
			if r := <-done; r.err != nil || r.n != 2 {
				t.Errorf("VerifyPending = %d, %v; want both verifications applied", r.n, r.err)
			}
			if m := member(e.chain(id), "ruby"); m.Verified != chain.ImageFresh {
				t.Errorf("ruby = %+v, want its late verdict recorded", m)
			}
		})
	}
}

// TestVerifyingMemberKeepsTheChainRunning: the last member verifying is
// work ahead, not a chain that ended.
func TestVerifyingMemberKeepsTheChainRunning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop")
	e.verifying(newFakeVerifier(map[string][]chain.Verification{"shop": {fresh}}), chain.VerifyEnforce)
	id := e.rebuild("ruby")
	e.send()
	e.finish("ruby", "success")
	e.send()
	e.finish("shop", "success")
	got := e.wantStates(id, "ruby=success shop=verifying")
	if got.State != chain.Running || got.Ended != nil {
		t.Errorf("chain %s (ended %v) while shop is verifying, want running", got.State, got.Ended)
	}
	e.verify()
	if got := e.wantStates(id, "ruby=success shop=success"); got.State != chain.Finished {
		t.Errorf("chain %s after the verdict, want finished", got.State)
	}
}

func TestCrashWhileVerifyingLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop", "shop>web")
	v := newFakeVerifier(map[string][]chain.Verification{"shop": {stale}})
	v.hold = true
	e.verifying(v, chain.VerifyEnforce)
	id := e.rebuild("shop")
	e.send()
	e.finish("shop", "success")
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.engine.VerifyPending(ctx)
		done <- err
	}()
	<-v.held
	stop() // the process dies while the registry is read
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("VerifyPending after its context ended = %v", err)
	}
	e.wantStates(id, "shop=verifying web=waiting")
	if st, err := e.engine.Stats(e.ctx); err != nil || st.VerifyQueued != 1 {
		t.Errorf("stats after the crash = %+v, %v; want 1 verification queued", st, err)
	}

	// The next process verifies it: stale, so rebuilt without cache.
	e.verifying(newFakeVerifier(map[string][]chain.Verification{"shop": {stale}}), chain.VerifyEnforce)
	if n := e.verify(); n != 1 {
		t.Fatalf("verified %d after the restart, want 1", n)
	}
	e.wantStates(id, "shop=pending web=waiting")
	if st, err := e.engine.Stats(e.ctx); err != nil || st.VerifyQueued != 0 {
		t.Errorf("stats once verified = %+v, %v; want none queued", st, err)
	}
	e.send()
	if e.latest("shop").vars[chain.VarNoCache] != "1" {
		t.Error("the rebuild after the restart is not without cache")
	}
}

func TestReportModeNeverBlocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop", "shop>web")
	v := newFakeVerifier(map[string][]chain.Verification{"shop": {stale}})
	e.verifying(v, chain.VerifyReport)
	id := e.rebuild("shop")
	e.send()
	e.finish("shop", "success")
	e.wantStates(id, "shop=success web=pending")
	e.verify()
	got := e.wantStates(id, "shop=success web=pending")
	if m := member(got, "shop"); m.Verified != chain.ImageStale || m.VerifyDetail != stale.Detail || m.Why != "" || m.NoCache {
		t.Errorf("shop = %+v, want its stale verdict shown and nothing else", m)
	}
	e.send()
	e.wantCounts(map[string]int{"shop": 1, "web": 1})
}

// TestSuccessesOutsideAChainAreVerifiedForTheRecord: a root's own
// pipeline and a project without dependents are verified, and nothing
// waits for the verdict.
func TestSuccessesOutsideAChainAreVerifiedForTheRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop", "lone")
	v := newFakeVerifier(map[string][]chain.Verification{"ruby": {stale}, "lone": {fresh}})
	e.verifying(v, chain.VerifyEnforce)
	e.external("ruby", 500, "success")
	e.external("lone", 501, "success")
	e.external("ruby", 500, "success") // delivered twice
	cs, err := e.engine.Chains(e.ctx, chain.Filter{})
	if err != nil || len(cs) != 1 {
		t.Fatalf("chains = %v, %v", cs, err)
	}
	e.wantStates(cs[0].ID, "ruby=success shop=pending")
	if n := e.verify(); n != 2 {
		t.Errorf("verified %d, want 2 (ruby's and lone's successes)", n)
	}
	got := e.wantStates(cs[0].ID, "ruby=success shop=pending")
	if m := member(got, "ruby"); m.Verified != chain.ImageStale {
		t.Errorf("the root's verdict is not shown: %+v", m)
	}
	if r, l := v.askedFor("ruby"), v.askedFor("lone"); len(r) != 1 || r[0] != 500 || len(l) != 1 || l[0] != 501 {
		t.Errorf("asked for ruby %v and lone %v, want pipeline 500 and 501", r, l)
	}
}

func TestVerifyOffReadsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop")
	v := newFakeVerifier(map[string][]chain.Verification{"ruby": {stale}, "shop": {stale}})
	e.verifying(v, chain.VerifyOff)
	id := e.rebuild("ruby")
	e.send()
	e.finish("ruby", "success")
	e.wantStates(id, "ruby=success shop=pending")
	if n := e.verify(); n != 0 || len(v.asked) != 0 {
		t.Errorf("verified %d, asked %v, with verification off", n, v.asked)
	}
}

// TestMergeResetsAVerifyingMember: a change merged in while a member's
// images are read needs a new build; the late verdict changes nothing.
func TestMergeResetsAVerifyingMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop", "shop>web")
	v := newFakeVerifier(map[string][]chain.Verification{"shop": {stale}})
	e.verifying(v, chain.VerifyEnforce)
	id := e.rebuild("shop")
	e.send()
	e.finish("shop", "success")
	e.wantStates(id, "shop=verifying web=waiting")
	if merged := e.rebuild("ruby"); merged != id {
		t.Fatalf("rebuild of ruby started chain %d, want it merged into %d", merged, id)
	}
	e.wantStates(id, "ruby=pending shop=waiting web=waiting")
	e.verify()
	got := e.wantStates(id, "ruby=pending shop=waiting web=waiting")
	if m := member(got, "shop"); m.NoCache || m.Verified != "" || !strings.HasPrefix(m.Why, "waiting for") {
		t.Errorf("shop after a late verdict = %+v", m)
	}
}

// TestReconcilerUnblocksAStaleMember: the newer success that unblocks a
// stale member is found by the reconciler when its webhook never came;
// the stale pipeline's own success does not count again.
func TestReconcilerUnblocksAStaleMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "ruby>shop", "shop>web")
	v := newFakeVerifier(map[string][]chain.Verification{"shop": {stale, stale, fresh}})
	e.verifying(v, chain.VerifyEnforce)
	id := e.rebuild("shop")
	for range 2 {
		e.send()
		e.finish("shop", "success")
		e.verify()
	}
	e.wantStates(id, "shop=stale web=blocked")
	if _, err := e.engine.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.wantStates(id, "shop=stale web=blocked")

	e.clock.Advance(time.Minute)
	e.gl.mu.Lock()
	fix := e.gl.pipelines[len(e.gl.pipelines)-1]
	fix.ID, fix.Status, fix.Source, fix.vars = fix.ID+100, "success", "push", nil
	fix.CreatedAt, fix.UpdatedAt = e.clock.Now(), e.clock.Now()
	e.gl.pipelines = append(e.gl.pipelines, fix)
	e.gl.mu.Unlock()
	if _, err := e.engine.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.wantStates(id, "shop=verifying web=waiting")
	e.verify()
	e.wantStates(id, "shop=success web=pending")
	if asked := v.askedFor("shop"); len(asked) != 3 || asked[2] != fix.ID {
		t.Errorf("shop verified for pipelines %v, want the fix %d last", asked, fix.ID)
	}
}
