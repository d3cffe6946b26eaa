package e2e_test

import (
	"encoding/json"
	"net/http"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// catchUpRuns returns when the catch-up last finished, from GET
// /api/v1/status (zero before its first run).
func (w *world) catchUpRuns() time.Time {
	resp, err := w.client.Get(w.url + "/api/v1/status")
	if err != nil {
		return time.Time{}
	}
	defer resp.Body.Close()
	var st daemon.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return time.Time{}
	}
	for _, j := range st.Jobs {
		if j.Name == "catch-up" && j.Error == "" {
			return j.FinishedAt
		}
	}
	return time.Time{}
}

// depsd is stopped; a base pipeline succeeds meanwhile (its webhooks fail);
// depsd is started again: the catch-up finds the success and the chain
// runs, each member built once.
func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, waves()...)
	setup := newServeSetup(t, srv)
	first := setup.start(t)
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))
	w.waitUntil("the first catch-up round ran", stepTimeout, func() bool { return !w.catchUpRuns().IsZero() })
	if err := first.signal(t, syscall.SIGTERM, stepTimeout); err != nil {
		t.Fatalf("depsd serve exited with %v on SIGTERM", err)
	}

	id := w.runPipeline(base)
	w.waitUntil("the base pipeline succeeded and its webhook failed", chainTimeout, func() bool {
		d, ok := w.deliveryOf(id, "success")
		return ok && d.State == gitlabtest.DeliveryFailed
	})

	setup.start(t)
	view := w.onlyChain("finished", inState(chain.Finished))
	for _, p := range []string{ruby, tools, app, lint, web} {
		w.pipelineOf(p)
		if m, _ := member(view, p); m.Builds != 1 || m.State != chain.Success {
			t.Errorf("chain member %s = %+v, want success after 1 build", p, m)
		}
	}
	if n := len(w.apiPipelines(base)); n != 0 {
		t.Errorf("depsd created %d pipelines of base, want none", n)
	}
}

// GitLab drops every webhook of the base's pipeline: the next catch-up
// round (every second here) starts the chain, and later rounds do not
// start it again.
func TestCatchUpFindsADroppedWebhook(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, waves()...)
	setup := newServeSetup(t, srv)
	setup.start(t, "--catch-up-interval", "1s")
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))
	w.waitUntil("the first catch-up round ran", stepTimeout, func() bool { return !w.catchUpRuns().IsZero() })

	// pending, running, success: none arrives.
	if err := srv.LoseProjectWebhooks(base, 3); err != nil {
		t.Fatal(err)
	}
	id := w.runPipeline(base)
	w.waitUntil("the base pipeline succeeded", chainTimeout, func() bool {
		p, err := srv.WaitPipeline(t.Context(), id)
		return err == nil && p.Status == "success"
	})
	view := w.onlyChain("finished", inState(chain.Finished))
	if len(view.Reasons) != 1 || view.Reasons[0].PipelineID != id {
		t.Errorf("chain reasons %+v, want the base's pipeline %d", view.Reasons, id)
	}
	// Two more rounds: nothing is redone.
	last := w.catchUpRuns()
	for range 2 {
		w.waitUntil("another catch-up round", stepTimeout, func() bool { return w.catchUpRuns().After(last) })
		last = w.catchUpRuns()
	}
	if cs, err := w.chains(); err != nil || len(cs) != 1 {
		t.Errorf("after more rounds: %d chains, %v; want 1", len(cs), err)
	}
	for _, p := range []string{ruby, tools, app, lint, web} {
		w.pipelineOf(p)
	}
}
