package e2e_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// Project paths of the instances below. They are in scopeGroup.
const (
	base  = "acme/base"
	ruby  = "acme/ruby"
	app   = "acme/app"
	projA = "acme/a"
	projB = "acme/b"
	projC = "acme/c"
)

// linear is base → ruby → app.
func linear() []proj {
	return []proj{{path: base}, {path: ruby, from: []string{base}}, {path: app, from: []string{ruby}}}
}

// diamond is base → {a, b} → c, with a much slower than b, so that "c after
// both" and "c after the first of them" are far apart.
func diamond(aScript ...string) []proj {
	return []proj{
		{path: base},
		{path: projA, from: []string{base}, duration: 500 * time.Millisecond, script: aScript},
		{path: projB, from: []string{base}, duration: 100 * time.Millisecond},
		{path: projC, from: []string{projA, projB}},
	}
}

// notBefore fails when pipeline later was created before earlier first
// finished: depsd must trigger a project only after its upstream
// succeeded. A root's pipeline runs again, and finishes anew, while the
// chain's commit status on it does (docs/chains.md): its first success,
// as its webhook told it, is when it finished.
func (w *world) notBefore(later, earlier gitlabtest.Pipeline, laterPath, earlierPath string) {
	w.t.Helper()
	finished := earlier.FinishedAt
	if d, ok := w.firstDelivery(earlier.ID, "success"); ok && d.QueuedAt.Before(finished) {
		finished = d.QueuedAt
	}
	if finished.IsZero() || later.CreatedAt.Before(finished) {
		w.t.Errorf("%s pipeline %d was created at %s, before %s pipeline %d finished (%s)\n%s",
			laterPath, later.ID, later.CreatedAt.Format("15:04:05.000"), earlierPath, earlier.ID,
			finished.Format("15:04:05.000"), w.dump())
	}
}

// A success of base that depsd did not create starts a chain; depsd creates
// ruby's pipeline, then app's after ruby succeeded, each once, tagged with
// the chain, the upstream and the action that caused it.
func TestLinearChain(t *testing.T) {
	t.Parallel()
	w := startDaemon(t, newGitLab(t, linear()...), daemonConfig{})

	rootID := w.runPipeline(base)
	view := w.onlyChain("finished", inState(chain.Finished))
	w.quiet()

	if !slices.Equal(view.Roots, []string{base}) {
		t.Errorf("chain roots = %v, want [%s]", view.Roots, base)
	}
	if got := w.srv.Pipelines(base); len(got) != 1 || got[0].ID != rootID {
		t.Errorf("base has %d pipelines, want only the developer's %d\n%s", len(got), rootID, w.dump())
	}
	rootPl := w.srv.Pipelines(base)[0]
	rubyPl, appPl := w.pipelineOf(ruby), w.pipelineOf(app)
	chainID := strconv.FormatInt(view.ID, 10)
	for _, tc := range []struct {
		path     string
		pl       gitlabtest.Pipeline
		upstream string
	}{{ruby, rubyPl, base}, {app, appPl, ruby}} {
		if tc.pl.Status != "success" {
			t.Errorf("%s pipeline %d is %s, want success", tc.path, tc.pl.ID, tc.pl.Status)
		}
		if tc.pl.Ref != "main" {
			t.Errorf("%s pipeline %d runs on %q, want the default branch main", tc.path, tc.pl.ID, tc.pl.Ref)
		}
		vars := tc.pl.Variables
		if vars["DEPSD_CHAIN_ID"] != chainID || vars["DEPSD_UPSTREAM"] != tc.upstream || vars["DEPSD_ACTION_ID"] == "" {
			t.Errorf("%s pipeline variables = %v, want DEPSD_CHAIN_ID=%s DEPSD_UPSTREAM=%s and a DEPSD_ACTION_ID",
				tc.path, vars, chainID, tc.upstream)
		}
		m, ok := member(view, tc.path)
		if !ok || m.State != chain.Success || m.Builds != 1 || m.PipelineID != tc.pl.ID {
			t.Errorf("chain member %s = %+v, want success, 1 build, pipeline %d", tc.path, m, tc.pl.ID)
		}
	}
	if rubyPl.Variables["DEPSD_ACTION_ID"] == appPl.Variables["DEPSD_ACTION_ID"] {
		t.Errorf("ruby and app share the action id %s", appPl.Variables["DEPSD_ACTION_ID"])
	}
	w.notBefore(rubyPl, rootPl, ruby, base)
	w.notBefore(appPl, rubyPl, app, ruby)
}

// In the diamond base → {a, b} → c, c is built once, after both a and b
// succeeded, although b succeeds long before a.
func TestDiamondBuildsJoinOnce(t *testing.T) {
	t.Parallel()
	w := startDaemon(t, newGitLab(t, diamond()...), daemonConfig{})

	w.runPipeline(base)
	view := w.onlyChain("finished", inState(chain.Finished))
	w.quiet()

	aPl, bPl, cPl := w.pipelineOf(projA), w.pipelineOf(projB), w.pipelineOf(projC)
	if !bPl.FinishedAt.Before(aPl.FinishedAt) {
		t.Fatalf("test setup: b (%s) should finish before a (%s)", bPl.FinishedAt, aPl.FinishedAt)
	}
	w.notBefore(cPl, aPl, projC, projA)
	w.notBefore(cPl, bPl, projC, projB)
	if got := cPl.Variables["DEPSD_UPSTREAM"]; got != projA+","+projB {
		t.Errorf("c's DEPSD_UPSTREAM = %q, want %q", got, projA+","+projB)
	}
	if m, _ := member(view, projC); m.Builds != 1 {
		t.Errorf("chain says c was built %d times, want 1\n%s", m.Builds, w.dump())
	}
}

// A failed member blocks its descendants, and the chain says why; a later
// successful pipeline of that member (a retry, a new push) resumes the
// chain, which builds the blocked descendant once. No second chain starts.
func TestFailureBlocksDescendantsUntilRetrySucceeds(t *testing.T) {
	t.Parallel()
	w := startDaemon(t, newGitLab(t, diamond("failed")...), daemonConfig{})

	w.runPipeline(base)
	blocked := w.onlyChain("blocked", inState(chain.Blocked))
	w.quiet()
	if m, _ := member(blocked, projA); m.State != chain.Failed {
		t.Errorf("member a = %+v, want failed", m)
	}
	if m, _ := member(blocked, projB); m.State != chain.Success {
		t.Errorf("member b = %+v, want success", m)
	}
	if m, _ := member(blocked, projC); m.State != chain.MemberBlocked || !strings.Contains(m.Why, projA) {
		t.Errorf("member c = %+v, want blocked with a reason naming %s\n%s", m, projA, w.dump())
	}
	if n := len(w.srv.Pipelines(projC)); n != 0 {
		t.Fatalf("c has %d pipelines while a failed, want none\n%s", n, w.dump())
	}

	retryID := w.runPipeline(projA)
	view := w.onlyChain("finished", inState(chain.Finished))
	w.quiet()
	if view.ID != blocked.ID {
		t.Errorf("the chain that finished is %d, want the blocked chain %d", view.ID, blocked.ID)
	}
	cPl := w.pipelineOf(projC)
	var retry gitlabtest.Pipeline
	for _, p := range w.srv.Pipelines(projA) {
		if p.ID == retryID {
			retry = p
		}
	}
	w.notBefore(cPl, retry, projC, projA+" (retry)")
	if n := len(w.apiPipelines(projA)); n != 1 {
		t.Errorf("depsd created %d pipelines of a, want 1 (the retry was the developer's)", n)
	}
}

// A resent delivery (GitLab's "Resend request": same Idempotency-Key) is
// answered 2xx and creates nothing.
func TestDuplicateDeliveryCreatesNothing(t *testing.T) {
	t.Parallel()
	w := startDaemon(t, newGitLab(t, linear()...), daemonConfig{})

	rootID := w.runPipeline(base)
	w.onlyChain("finished", inState(chain.Finished))
	w.quiet()
	before := map[string]int{}
	for _, p := range w.srv.Projects() {
		before[p] = len(w.srv.Pipelines(p))
	}

	// The success that started the chain, and the one that moved it on.
	var resent []int64
	for _, pl := range []int64{rootID, w.pipelineOf(ruby).ID} {
		d, ok := w.deliveryOf(pl, "success")
		if !ok || d.State != gitlabtest.DeliveryDelivered {
			t.Fatalf("no delivered success webhook of pipeline %d\n%s", pl, w.dump())
		}
		id, err := w.srv.Resend(d.ID)
		if err != nil {
			t.Fatal(err)
		}
		resent = append(resent, id)
	}
	w.waitUntil("the resent deliveries were answered", stepTimeout, func() bool {
		ds := w.srv.Deliveries()
		for _, id := range resent {
			if ds[id-1].State == gitlabtest.DeliveryQueued || ds[id-1].State == gitlabtest.DeliverySending {
				return false
			}
		}
		return true
	})
	for _, id := range resent {
		if d := w.srv.Deliveries()[id-1]; d.State != gitlabtest.DeliveryDelivered {
			t.Errorf("resent delivery %d: %s %d %s, want a 2xx answer", id, d.State, d.StatusCode, d.Err)
		}
	}
	w.quiet()

	for _, p := range w.srv.Projects() {
		if n := len(w.srv.Pipelines(p)); n != before[p] {
			t.Errorf("%s has %d pipelines after the resends, %d before\n%s", p, n, before[p], w.dump())
		}
	}
	if cs, _ := w.chains(); len(cs) != 1 {
		t.Errorf("%d chains after the resends, want still 1\n%s", len(cs), w.dump())
	}
	// Recognized as duplicates by the Idempotency-Key, not merely found
	// harmless further on.
	if n := w.metric(`depsd_webhook_events_total{kind="pipeline",outcome="duplicate"}`); n != float64(len(resent)) {
		t.Errorf("depsd counted %v duplicate deliveries, want %d", n, len(resent))
	}
}

// A Pipeline Hook with a wrong or missing X-Gitlab-Token is refused with
// 401, does not echo the token, and triggers nothing; the same body with
// the right token would have started a chain.
func TestForgedTokenIsRefused(t *testing.T) {
	t.Parallel()
	w := startDaemon(t, newGitLab(t, linear()...), daemonConfig{})

	// Take a real success payload of base without letting it reach depsd:
	// the fake logs lost deliveries with their body.
	if err := w.srv.LoseProjectWebhooks(base, 1000); err != nil {
		t.Fatal(err)
	}
	rootID := w.runPipeline(base)
	var payload []byte
	w.waitUntil("base's success webhook was produced (and lost)", stepTimeout, func() bool {
		d, ok := w.deliveryOf(rootID, "success")
		payload = d.Payload
		return ok && d.State == gitlabtest.DeliveryLost
	})

	for _, token := range []string{"forged-token-0123", ""} {
		code, body := w.postHook(payload, token)
		if code != http.StatusUnauthorized {
			t.Errorf("token %q: answered %d %s, want 401", token, code, body)
		}
		if token != "" && strings.Contains(body, token) {
			t.Errorf("the 401 answer echoes the token: %s", body)
		}
	}
	w.quiet()
	for _, p := range w.srv.Projects() {
		if n := len(w.apiPipelines(p)); n != 0 {
			t.Errorf("%s: depsd created %d pipelines after forged webhooks, want none\n%s", p, n, w.dump())
		}
	}
	if cs, err := w.chains(); err != nil || len(cs) != 0 {
		t.Errorf("chains after forged webhooks: %d (%v), want none\n%s", len(cs), err, w.dump())
	}

	// The control: the very same body, signed, starts the chain.
	if code, body := w.postHook(payload, secret); code != http.StatusOK {
		t.Fatalf("the genuine webhook was answered %d %s", code, body)
	}
	w.waitUntil("ruby was triggered by the genuine webhook", chainTimeout, func() bool { return len(w.apiPipelines(ruby)) == 1 })
}

// When every webhook of ruby is lost, the reconciler sees ruby's pipeline
// succeed and the chain goes on to app.
func TestReconcilerCatchesMissedWebhook(t *testing.T) {
	t.Parallel()
	w := startDaemon(t, newGitLab(t, linear()...), daemonConfig{reconcile: 300 * time.Millisecond})
	if err := w.srv.LoseProjectWebhooks(ruby, 1000); err != nil {
		t.Fatal(err)
	}

	w.runPipeline(base)
	w.onlyChain("finished", inState(chain.Finished))
	w.quiet()
	rubyPl := w.pipelineOf(ruby)
	w.notBefore(w.pipelineOf(app), rubyPl, app, ruby)
	for _, d := range w.srv.Deliveries() {
		if d.PipelineID == rubyPl.ID && d.State != gitlabtest.DeliveryLost {
			t.Fatalf("test setup: a webhook of ruby's pipeline reached depsd: %+v", d)
		}
	}
}

// A project outside depsd's scope whose hook points at depsd (someone set
// it up by hand) is ignored: its success is answered 2xx, so GitLab keeps
// the hook enabled, and nothing is built, not even its in-scope dependent.
func TestOutOfScopeProjectIsIgnored(t *testing.T) {
	t.Parallel()
	const lib = "other/lib"
	srv := newGitLab(t, proj{path: lib}, proj{path: app, from: []string{lib}}, proj{path: base}, proj{path: ruby, from: []string{base}})
	w := startDaemon(t, srv, daemonConfig{})
	if hooks := srv.Hooks(lib); len(hooks) != 0 {
		t.Fatalf("test setup: hooks sync touched the out-of-scope %s: %+v", lib, hooks)
	}
	if _, err := srv.AddHook(lib, gitlabtest.Hook{URL: w.hookURL(), Token: secret, Events: []string{"pipeline_events", "push_events"}}); err != nil {
		t.Fatal(err)
	}

	id := w.runPipeline(lib)
	var d gitlabtest.Delivery
	w.waitUntil("lib's success webhook was answered", stepTimeout, func() bool {
		var ok bool
		d, ok = w.deliveryOf(id, "success")
		return ok && d.State != gitlabtest.DeliveryQueued && d.State != gitlabtest.DeliverySending
	})
	if d.State != gitlabtest.DeliveryDelivered || d.StatusCode/100 != 2 {
		t.Errorf("lib's success webhook: %s %d %s, want a 2xx answer", d.State, d.StatusCode, d.Err)
	}
	w.quiet()
	for _, p := range srv.Projects() {
		if n := len(w.apiPipelines(p)); n != 0 {
			t.Errorf("%s: depsd created %d pipelines for an out-of-scope success\n%s", p, n, w.dump())
		}
	}
	if cs, err := w.chains(); err != nil || len(cs) != 0 {
		t.Errorf("chains: %d (%v), want none\n%s", len(cs), err, w.dump())
	}
	if h := srv.Hooks(lib); len(h) != 1 || h[0].AlertStatus != "executable" {
		t.Errorf("lib's hook after the event: %+v, want it still executable", h)
	}
}

// In first-level mode (the original gitlab-deps) every success triggers the
// direct dependents: c is built after a and again after b. In full mode the
// same change builds c once.
func TestFirstLevelModeTriggersOnEverySuccess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode   chain.Mode
		builds int
	}{{chain.FirstLevel, 2}, {chain.Full, 1}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			w := startDaemon(t, newGitLab(t, diamond()...), daemonConfig{mode: tc.mode})

			w.runPipeline(base)
			w.waitUntil("c was built "+strconv.Itoa(tc.builds)+" times", chainTimeout, func() bool {
				ps := w.apiPipelines(projC)
				return len(ps) == tc.builds && !slices.ContainsFunc(ps, func(p gitlabtest.Pipeline) bool { return p.FinishedAt.IsZero() })
			})
			w.quiet()

			for _, p := range []string{projA, projB} {
				w.pipelineOf(p) // exactly once in either mode
			}
			cs := w.apiPipelines(projC)
			if len(cs) != tc.builds {
				t.Fatalf("c was built %d times in %s mode, want %d\n%s", len(cs), tc.mode, tc.builds, w.dump())
			}
			var ups []string
			for _, p := range cs {
				ups = append(ups, p.Variables["DEPSD_UPSTREAM"])
			}
			slices.Sort(ups)
			want := []string{projA, projB} // one build per success, each naming its trigger
			if tc.mode == chain.Full {
				want = []string{projA + "," + projB}
			}
			if !slices.Equal(ups, want) {
				t.Errorf("c's DEPSD_UPSTREAM values = %q, want %q", ups, want)
			}
		})
	}
}

// depsd may record the answer to its create-pipeline call after the
// pipeline already failed and said so by webhook (GitLab answered late, or
// the worker stalled). That stale "created" must not undo the failure: the
// descendants stay blocked, and a later success of the project resumes the
// chain.
func TestLateCreateAnswerDoesNotReviveFailedMember(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, proj{path: base},
		proj{path: ruby, from: []string{base}, duration: 100 * time.Millisecond, script: []string{"failed"}},
		proj{path: app, from: []string{ruby}})
	w := startDaemon(t, srv, daemonConfig{apiURL: slowCreates(t, srv, time.Second)})

	w.runPipeline(base)
	w.waitUntil("ruby's failure was delivered before its create call was answered", chainTimeout, func() bool {
		ps := w.apiPipelines(ruby)
		if len(ps) != 1 {
			return false
		}
		d, ok := w.deliveryOf(ps[0].ID, "failed")
		return ok && d.State == gitlabtest.DeliveryDelivered
	})
	w.quiet() // the late answer is recorded too
	cs, err := w.chains()
	if err != nil || len(cs) != 1 {
		t.Fatalf("chains: %d (%v), want 1\n%s", len(cs), err, w.dump())
	}
	rubyM, _ := member(cs[0], ruby)
	appM, _ := member(cs[0], app)
	if rubyM.State != chain.Failed || appM.State != chain.MemberBlocked {
		t.Errorf("after ruby's pipeline failed: ruby is %s (%q), app is %s (%q); want ruby failed and app blocked\n%s",
			rubyM.State, rubyM.Why, appM.State, appM.Why, w.dump())
	}

	w.runPipeline(ruby) // a new pipeline that succeeds, as a fix pushed by a developer
	w.waitUntil("app was triggered after ruby's new pipeline succeeded", stepTimeout, func() bool {
		return len(w.apiPipelines(app)) == 1
	})
}

// Signed webhooks under hooks.signing: required: the fake, as GitLab 19.0,
// signs base's success with the signing token hooks sync installed, and the
// chain runs; the same body without a signature, with the right secret,
// is refused with 401 and the signing token shows nowhere.
func TestSignedWebhooksUnderRequired(t *testing.T) {
	t.Parallel()
	const token = "whsec_ZTJlLXNpZ25pbmcta2V5LW9mLTMyLWJ5dGVzLWxvbmc="
	w := startDaemon(t, newGitLab(t, linear()...), daemonConfig{signing: "required", signingToken: token})
	for _, p := range []string{base, ruby, app} {
		if h := w.srv.Hooks(p); len(h) != 1 || h[0].SigningToken != token {
			t.Fatalf("test setup: %s has no signing token: %+v", p, h)
		}
	}
	rootID := w.runPipeline(base)
	w.onlyChain("finished", inState(chain.Finished))
	d, ok := w.deliveryOf(rootID, "success")
	if !ok || d.State != gitlabtest.DeliveryDelivered {
		t.Fatalf("base's success delivery: %+v", d)
	}
	if n := w.metric(`depsd_webhook_events_total{kind="pipeline",outcome="unauthorized"}`); n != 0 {
		t.Fatalf("%v signed deliveries refused\n%s", n, w.dump())
	}

	code, body := w.postHook(d.Payload, secret)
	if code != http.StatusUnauthorized || !strings.Contains(body, "unsigned") {
		t.Errorf("unsigned delivery under required: %d %s", code, body)
	}
	if logs := w.logs.String(); strings.Contains(logs, token[len("whsec_"):]) || strings.Contains(body, token[len("whsec_"):]) {
		t.Error("the signing token shows in depsd's logs or answer")
	}
}

// During a switch to group hooks a project has both depsd's project hook
// and the group's: GitLab delivers every event twice, with different
// Idempotency-Keys (each hook runs on its own). depsd counts each
// pipeline's status once: one chain, one pipeline per downstream project,
// also when the group hook's copies arrive after the chain finished (held
// back here until then).
func TestProjectAndGroupHookDeliverTwiceAndTriggerOnce(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, linear()...)
	w := startDaemon(t, srv, daemonConfig{})
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	held := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		req, _ := http.NewRequest(http.MethodPost, w.hookURL(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := w.client.Do(req)
		if err != nil {
			rw.WriteHeader(http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		rw.WriteHeader(resp.StatusCode)
	}))
	t.Cleanup(held.Close)
	t.Cleanup(open)
	srv.SetPremium(true)
	if _, err := srv.AddGroupHook(scopeGroup, gitlabtest.Hook{URL: held.URL, Token: secret,
		Events: []string{"pipeline_events", "push_events"}, EnableSSLVerification: true}); err != nil {
		t.Fatal(err)
	}

	rootID := w.runPipeline(base)
	w.onlyChain("finished", inState(chain.Finished))
	open()
	w.waitUntil("every delivery was made", chainTimeout, func() bool {
		for _, d := range srv.Deliveries() {
			if d.State == gitlabtest.DeliveryQueued || d.State == gitlabtest.DeliverySending {
				return false
			}
		}
		return true
	})
	w.quiet()
	keys := map[string]bool{}
	for _, d := range srv.Deliveries() {
		if d.PipelineID == rootID && d.PipelineStatus == "success" {
			keys[d.IdempotencyKey] = true
			if d.State != gitlabtest.DeliveryDelivered {
				t.Errorf("delivery %d: %s %d", d.ID, d.State, d.StatusCode)
			}
		}
	}
	if len(keys) != 2 {
		t.Fatalf("test setup: base's success was delivered with %d keys, want 2\n%s", len(keys), w.dump())
	}
	for _, p := range []string{ruby, app} {
		if got := len(w.apiPipelines(p)); got != 1 {
			t.Errorf("%s: %d pipelines, want 1\n%s", p, got, w.dump())
		}
	}
	if cs, err := w.chains(); err != nil || len(cs) != 1 {
		t.Errorf("%d chains (%v), want 1\n%s", len(cs), err, w.dump())
	}
}
