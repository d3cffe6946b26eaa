package e2e_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
)

// holdMRCreates starts a proxy in front of srv that holds back GitLab's
// answer to every merge request creation, after GitLab made it, until
// release is called: a depsd killed meanwhile opened the merge request
// without recording it. It returns the proxy's URL.
func holdMRCreates(t *testing.T, srv *gitlabtest.Server) (proxyURL string, release func()) {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/merge_requests") {
			select {
			case <-held:
			case <-r.Context().Done():
			}
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	return proxy.URL, release
}

// TestPinnedMemberThroughItsMergeRequestAcrossSIGKILL: base → ruby → app →
// web on a real registry, app pinning ruby by digest in an ARG default.
// The real depsd process is killed -9 twice: once after GitLab opened the
// merge request moving app's pin but before depsd recorded it, and once
// after the merge request was merged (by the test, as a reviewer would)
// and before the merge's pipeline ran, which succeeds while depsd is down.
// Restarted each time, depsd adopts the branch and merge request its
// earlier run made (one commit, one merge request), takes the merge's
// pipeline as app's build, and the chain finishes with ruby and web built
// once by depsd, app built once by the merge, never by depsd.
func TestPinnedMemberThroughItsMergeRequestAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	host := registrytest.Start(t)
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-e2e", RegistryHost: host})
	t.Cleanup(srv.Close)
	img := func(path string) string { return host + "/" + path + ":latest" }
	old := registrytest.Push(t, img(ruby)) // ruby's image before the chain: app's pin
	appFile := "# built on ruby, pinned for review\nARG RUBY=" + img(ruby) + "@" + old + "\nFROM ${RUBY}\nRUN make\n"
	for _, p := range []struct {
		path, file string
		images     gitlabtest.Images
	}{
		{base, "FROM scratch\n", gitlabtest.Images{Refs: []string{img(base)}}},
		{ruby, "FROM " + img(base) + "\n", gitlabtest.Images{Refs: []string{img(ruby)}, From: img(base), Annotate: true}},
		{app, appFile, gitlabtest.Images{Refs: []string{img(app)}, From: img(ruby), Annotate: true}},
		{web, "FROM " + img(app) + "\n", gitlabtest.Images{Refs: []string{img(web)}, From: img(app), Annotate: true}},
	} {
		if _, err := srv.AddProject(gitlabtest.Project{Path: p.path, Files: map[string]string{"Containerfile": p.file}}); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetPipelineBehavior(p.path, gitlabtest.Behavior{Duration: 200 * time.Millisecond, Outcome: "success", OnPush: p.path == app}); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetImages(p.path, p.images); err != nil {
			t.Fatal(err)
		}
	}
	proxy, release := holdMRCreates(t, srv)
	setup := newServeSetup(t, srv)
	setup.gitlabURL = proxy
	setup.configure(t, "gitlab:\n  requests_per_minute: 60000\nimages:\n  verify: enforce\n  insecure_registries: [\""+host+"\"]\n")
	first := setup.start(t)
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))

	w.runPipeline(base)
	w.waitUntil("GitLab opened app's merge request", chainTimeout, func() bool { return len(srv.MergeRequests(app)) == 1 })
	if err := first.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatalf("depsd exited cleanly on SIGKILL?")
	}
	release()

	second := setup.start(t)
	view := w.onlyChain("waiting for app's merge request", func(c chain.ChainView) bool {
		m, ok := member(c, app)
		return ok && m.State == chain.WaitingMerge && m.MergeRequest != ""
	})
	mrs := srv.MergeRequests(app)
	if len(mrs) != 1 || mrs[0].SourceBranch != "depsd/pins" || mrs[0].TargetBranch != "main" || mrs[0].State != "opened" {
		t.Fatalf("merge requests of app after the restart: %+v\n%s", mrs, w.dump())
	}
	if m, _ := member(view, app); !strings.HasSuffix(m.MergeRequest, "/merge_requests/1") {
		t.Errorf("app's merge request %q, want the one GitLab opened (!1)", m.MergeRequest)
	}
	current := ""
	for _, p := range srv.PublishedImages() {
		if p.Project == ruby {
			current = p.Digest
		}
	}
	wantFile := strings.Replace(appFile, old, current, 1)
	if got := srv.Files(app, "depsd/pins")["Containerfile"]; current == "" || got != wantFile {
		t.Errorf("app's Containerfile on depsd/pins:\n%q\nwant only the pin moved to ruby's new %s:\n%q", got, current, wantFile)
	}
	if got := srv.Files(app, "main")["Containerfile"]; got != appFile {
		t.Errorf("app's main changed:\n%q", got)
	}
	// One commit on depsd/pins (each push runs a pipeline there): the
	// resend found the branch holding the file and committed nothing.
	branch := slices.DeleteFunc(srv.Pipelines(app), func(p gitlabtest.Pipeline) bool { return p.Ref != "depsd/pins" })
	if len(branch) != 1 {
		t.Errorf("%d pushes to depsd/pins, want 1\n%s", len(branch), w.dump())
	}
	if n := len(w.apiPipelines(app)); n != 0 {
		t.Fatalf("depsd created %d pipelines of app: a pinned member gets a merge request, not a build", n)
	}

	// Killed again; meanwhile the merge request is merged and the merge's
	// pipeline succeeds, its webhooks failing.
	if err := second.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatalf("depsd exited cleanly on SIGKILL?")
	}
	if err := srv.MergeMR(app, mrs[0].IID); err != nil {
		t.Fatal(err)
	}
	merged := srv.MergeRequests(app)[0]
	var merge gitlabtest.Pipeline
	w.waitUntil("the merge's pipeline succeeded while depsd was down", chainTimeout, func() bool {
		for _, p := range srv.Pipelines(app) {
			if p.Ref == "main" && p.SHA == merged.MergeCommitSHA {
				merge = p
			}
		}
		return merge.Status == "success"
	})

	setup.start(t)
	view = w.onlyChain("finished", inState(chain.Finished))
	for _, p := range []string{ruby, web} {
		w.pipelineOf(p)
		if m, _ := member(view, p); m.Builds != 1 || m.State != chain.Success {
			t.Errorf("chain member %s = %+v, want success after 1 build", p, m)
		}
	}
	if m, _ := member(view, app); m.State != chain.Success || m.Builds != 1 || m.PipelineID != merge.ID || m.Verified != chain.ImageFresh {
		t.Errorf("app = %+v: want built once, by the merge's pipeline %d, its image fresh", m, merge.ID)
	}
	if n := len(w.apiPipelines(app)); n != 0 {
		t.Errorf("depsd created %d pipelines of app", n)
	}
	if n := len(srv.MergeRequests(app)); n != 1 {
		t.Errorf("%d merge requests of app, want 1", n)
	}
	w.notBefore(w.pipelineOf(web), merge, web, app)
	// What depsd wrote, listed with the chain: the commit and the merge
	// request, each once.
	resp, err := w.client.Get(w.url + "/api/v1/chains/" + strconv.FormatInt(view.ID, 10))
	if err != nil {
		t.Fatal(err)
	}
	var full chain.ChainView
	err = json.NewDecoder(resp.Body).Decode(&full)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, wr := range full.Writes {
		kinds = append(kinds, wr.Kind)
	}
	if strings.Join(kinds, ",") != "commit,merge-request" {
		t.Errorf("writes of the chain: %+v, want one commit and one merge request", full.Writes)
	}
	if last := full.Writes[len(full.Writes)-1]; !regexp.MustCompile(`merge request !1\b`).MatchString(last.Detail) || last.URL == "" {
		t.Errorf("last write %+v", last)
	}
}
