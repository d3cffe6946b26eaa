package e2e_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// heldCreates starts a proxy in front of srv that never answers a create
// of project projectID that GitLab accepted (the pipeline exists, depsd
// never learns its id) until the caller goes away; everything else passes.
func heldCreates(t *testing.T, srv *gitlabtest.Server, projectID int64) string {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/v4/projects/" + strconv.FormatInt(projectID, 10) + "/pipeline"
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		if r.Method == http.MethodPost && r.URL.Path == path && resp.StatusCode == http.StatusCreated {
			<-r.Context().Done()
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	return proxy.URL
}

// A chain through a project that refuses pipeline variables and declares
// no input: depsd learns it from GitLab's refusals, creates the pipeline
// bare, and is SIGKILLed after GitLab created it and before depsd learned
// its id. The restarted process adopts that pipeline instead of creating
// another: every member is built once, and the chain finishes.
func TestServeSIGKILLBetweenCreateAndRecordInRestrictedProject(t *testing.T) {
	t.Parallel()
	const d = 300 * time.Millisecond
	srv := newGitLab(t,
		proj{path: base, duration: d},
		proj{path: ruby, from: []string{base}, duration: d},
		proj{path: app, from: []string{ruby}, duration: d},
		proj{path: web, from: []string{app}, duration: d},
	)
	if err := srv.SetCISettings(app, gitlabtest.RestrictedCISettings(gitlabtest.RoleDeveloper)); err != nil {
		t.Fatal(err)
	}
	info, ok := srv.Project(app)
	if !ok {
		t.Fatal("no app project")
	}
	setup := newServeSetup(t, srv)
	setup.gitlabURL = heldCreates(t, srv, info.ID)
	first := setup.start(t)
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))

	w.runPipeline(base)
	w.waitUntil("GitLab created app's pipeline, its answer held back", chainTimeout, func() bool {
		return len(w.apiPipelines(app)) == 1
	})
	if err := first.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatalf("depsd exited cleanly on SIGKILL?")
	}
	setup.gitlabURL = ""
	setup.start(t)
	view := w.onlyChain("finished", inState(chain.Finished))
	for _, p := range []string{ruby, app, web} {
		if n := len(w.apiPipelines(p)); n != 1 {
			t.Errorf("%d pipelines of %s, want 1\n%s", n, p, w.dump())
		}
		if m, _ := member(view, p); m.Builds != 1 || m.State != chain.Success {
			t.Errorf("chain member %s = %+v, want success after 1 build", p, m)
		}
	}
	if ps := w.apiPipelines(app); len(ps) == 1 && len(ps[0].Variables) != 0 {
		t.Errorf("app's pipeline has variables %v; the project refuses them", ps[0].Variables)
	}
	if !strings.Contains(setup.logs.String(), "adopted pipeline created by an earlier attempt") {
		t.Errorf("the restarted depsd did not adopt app's pipeline\n%s", setup.logs.tail(40))
	}
	w.notBefore(w.pipelineOf(web), w.pipelineOf(app), web, app)
	// The webhooks that come late make no extra pipeline either.
	w.waitUntil("GitLab is idle", stepTimeout, func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return srv.WaitIdle(ctx) == nil
	})
	for _, p := range []string{ruby, app, web} {
		w.pipelineOf(p)
	}
}
