package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
)

// Validations before the merge (docs/validation.md) with the real depsd
// binary, the fake GitLab and a real registry its simulated builds push
// to: base → {ruby, python}, ruby → app, python → pytools, and legacy
// (FROM base) whose pipelines take only the action id input.
const (
	python  = "acme/python"
	pytools = "acme/pytools"
	legacy  = "acme/legacy"

	// valCI reads what a validation hands over: depsd may validate the
	// project with pipeline variables.
	valCI = "build:\n  script:\n    - build --validate \"$DEPSD_VALIDATE\" --contexts \"$DEPSD_BUILD_CONTEXTS\" --tag \"$DEPSD_VALIDATE_TAG\"\n"
	// legacyCI declares only the action id, in a project that refuses
	// pipeline variables: it cannot validate.
	legacyCI = "spec:\n  inputs:\n    depsd_action_id:\n      default: \"\"\n---\nbuild:\n  script: [make]\n"
)

// valFleet is the instance of a validation test.
type valFleet struct {
	t     *testing.T
	srv   *gitlabtest.Server
	host  string
	reg   *registry.Client
	setup *serveSetup
	w     *world
}

// newValFleet builds the fleet with base released (its image the others
// are built on), premerge on base at depth, and starts depsd, talking to
// GitLab through proxy(srv) when proxy is not nil. Dependents' pipelines
// run for `dependents` (0: manual, the test ends them).
func newValFleet(t *testing.T, depth string, dependents time.Duration, proxy func(*gitlabtest.Server) string) (*valFleet, *serveProc) {
	t.Helper()
	host := registrytest.Start(t)
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-e2e", RegistryHost: host})
	t.Cleanup(srv.Close)
	img := func(p string) string { return host + "/" + p + ":latest" }
	from := map[string]string{base: "", ruby: img(base), python: img(base), app: img(ruby), pytools: img(python), legacy: img(base)}
	for _, p := range []string{base, ruby, python, app, pytools, legacy} {
		cf, ci := "FROM scratch\n", valCI
		if from[p] != "" {
			cf = "FROM " + from[p] + "\n"
		}
		if p == legacy {
			ci = legacyCI
		}
		if _, err := srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"Containerfile": cf, ".gitlab-ci.yml": ci}}); err != nil {
			t.Fatal(err)
		}
		// Everyone who sees base sees its dependents: the note names them.
		if err := srv.SetVisibility(p, "internal"); err != nil {
			t.Fatal(err)
		}
		b := gitlabtest.Behavior{Duration: dependents, Outcome: "success"}
		if p == base {
			b = gitlabtest.Behavior{Duration: 200 * time.Millisecond, Outcome: "success", OnMergeRequest: true}
		}
		if err := srv.SetPipelineBehavior(p, b); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetImages(p, gitlabtest.Images{Refs: []string{img(p)}, From: from[p], Annotate: from[p] != ""}); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.SetCISettings(legacy, gitlabtest.RestrictedCISettings(gitlabtest.RoleMaintainer)); err != nil {
		t.Fatal(err)
	}
	// base's release, before depsd looks: no chain follows it.
	if _, err := srv.RunPipeline(base, "", "push"); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	setup := newServeSetup(t, srv)
	if proxy != nil {
		setup.gitlabURL = proxy(srv)
	}
	setup.configure(t, "gitlab:\n  requests_per_minute: 60000\n  commit_status_interval: 1s\nimages:\n  verify: enforce\n  insecure_registries: [\""+host+"\"]\n"+
		"hooks:\n  url: http://"+setup.listen+"/hooks/gitlab\n"+
		"premerge:\n  - projects: ["+base+"]\n    depth: "+depth+"\n")
	first := setup.start(t)
	f := &valFleet{t: t, srv: srv, host: host, reg: registry.New(registry.Options{Insecure: []string{host}}), setup: setup, w: setup.world(t)}
	f.w.syncHooks(newClient(t, srv))
	return f, first
}

// openMR opens a merge request of base that changes its Containerfile
// and returns its iid and the digest of the candidate its pipeline
// pushed.
func (f *valFleet) openMR() (int64, string) {
	f.t.Helper()
	if err := f.srv.CreateBranch(base, "slim"); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.srv.SetFileOn(base, "slim", "Containerfile", "FROM scratch\n# without ruby's libraries\n"); err != nil {
		f.t.Fatal(err)
	}
	iid, err := f.srv.OpenMR(base, "slim", "main", "Slim the base image")
	if err != nil {
		f.t.Fatal(err)
	}
	return iid, f.candidate(iid, 1)
}

// candidate waits for the n-th candidate of merge request iid and
// returns its digest.
func (f *valFleet) candidate(iid int64, n int) string {
	f.t.Helper()
	tag := fmt.Sprintf("%s/%s:mr-%d", f.host, base, iid)
	var digests []string
	f.w.waitUntil(fmt.Sprintf("candidate %d of !%d pushed", n, iid), stepTimeout, func() bool {
		digests = nil
		for _, p := range f.srv.PublishedImages() {
			if p.Ref == tag {
				digests = append(digests, p.Digest)
			}
		}
		return len(digests) >= n
	})
	return digests[n-1]
}

// validations are the validation pipelines depsd created in project.
func (f *valFleet) validations(project string) []gitlabtest.Pipeline {
	return slices.DeleteFunc(f.srv.Pipelines(project), func(p gitlabtest.Pipeline) bool {
		return p.Source != "api" || p.Variables[chain.VarValidate] != "1"
	})
}

// waitValidations waits until project has n validation pipelines and
// returns them.
func (f *valFleet) waitValidations(project string, n int) []gitlabtest.Pipeline {
	f.t.Helper()
	f.w.waitUntil(fmt.Sprintf("%d validation pipelines of %s", n, project), stepTimeout, func() bool { return len(f.validations(project)) >= n })
	return f.validations(project)
}

// mrPipelines are merge request iid's pipelines, oldest first.
func (f *valFleet) mrPipelines(iid int64) []gitlabtest.Pipeline {
	return slices.DeleteFunc(f.srv.Pipelines(base), func(p gitlabtest.Pipeline) bool { return p.MergeRequestIID != iid })
}

// status is depsd/dependents on the newest pipeline of merge request iid.
func (f *valFleet) status(iid int64) gitlabtest.CommitStatus {
	ps := f.mrPipelines(iid)
	if len(ps) == 0 {
		return gitlabtest.CommitStatus{}
	}
	pl := ps[len(ps)-1]
	var out gitlabtest.CommitStatus
	for _, s := range f.srv.Statuses(base, pl.SHA) {
		if s.Name == chain.ValidationStatusName && s.PipelineID == pl.ID {
			out = s
		}
	}
	return out
}

// waitStatus waits for depsd/dependents to be want on the newest
// pipeline of iid.
func (f *valFleet) waitStatus(iid int64, want string) gitlabtest.CommitStatus {
	f.t.Helper()
	f.w.waitUntil("depsd/dependents "+want, chainTimeout, func() bool { return f.status(iid).Status == want })
	return f.status(iid)
}

// note is depsd's note on merge request iid and how many depsd wrote.
func (f *valFleet) note(iid int64) (string, int) {
	for _, mr := range f.srv.MergeRequests(base) {
		if mr.IID != iid {
			continue
		}
		body, n := "", 0
		for _, nt := range mr.Notes {
			if strings.HasPrefix(nt.Body, "<!-- depsd: validation of !") {
				body, n = nt.Body, n+1
			}
		}
		return body, n
	}
	return "", 0
}

// waitNote waits until depsd's note says every string of want.
func (f *valFleet) waitNote(iid int64, want ...string) string {
	f.t.Helper()
	var body string
	ok := eventually(chainTimeout, func() bool {
		body, _ = f.note(iid)
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	})
	if !ok {
		v := f.view(iid)
		f.t.Fatalf("the note does not say %q:\n%s\nvalidation: note %d, error %q, result %s %s\n%s", want, body, v.NoteID, v.Error, v.Result, v.Summary, f.w.dump())
	}
	return body
}

// view is GET /api/v1/validations' newest validation of iid.
func (f *valFleet) view(iid int64) chain.ValidationView {
	f.t.Helper()
	resp, err := f.w.client.Get(f.w.url + "/api/v1/validations")
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Validations []chain.ValidationView }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		f.t.Fatal(err)
	}
	for _, v := range body.Validations {
		if v.Project == base && v.IID == iid {
			return v
		}
	}
	return chain.ValidationView{}
}

// tagExists says whether image (host/path:tag) is in the registry.
func (f *valFleet) tagExists(image string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	_, err := f.reg.Digest(ctx, image)
	return err == nil
}

// noRelease checks that no release chain started and depsd built no
// release of anyone: a candidate is never a release.
func (f *valFleet) noRelease() {
	f.t.Helper()
	cs, err := f.w.chains()
	if err != nil || len(cs) != 0 {
		f.t.Errorf("release chains %+v, %v: a candidate is never a release", cs, err)
	}
	for _, p := range []string{ruby, python, app, pytools, legacy} {
		for _, pl := range f.w.apiPipelines(p) {
			if pl.Variables[chain.VarValidate] != "1" {
				f.t.Errorf("%s: depsd created pipeline %d that is no validation: %+v", p, pl.ID, pl.Variables)
			}
		}
	}
}

// TestValidationWhoseDependentsAllBuild: a merge request of base at depth
// 1: ruby and python are built once each on its candidate, on their
// default branch, publishing nothing; legacy, whose pipelines take only
// the action id, is "cannot validate" with the snippet, not failed. The
// status goes success, the note is complete, no release chain starts;
// merging the merge request deletes its candidate tag on the registry.
func TestValidationWhoseDependentsAllBuild(t *testing.T) {
	t.Parallel()
	f, _ := newValFleet(t, "1", 200*time.Millisecond, nil)
	iid, cand := f.openMR()
	st := f.waitStatus(iid, "success")
	if !strings.Contains(st.Description, "2 of 3 dependents built") || !strings.Contains(st.TargetURL, "/validations/") {
		t.Errorf("status %+v: want 2 of 3 built, linking the validation's page", st)
	}
	body := f.waitNote(iid, "every dependent builds", ruby+" | built", python+" | built", legacy+" | cannot validate", "depsd_build_contexts", cand)
	if _, n := f.note(iid); n != 1 {
		t.Errorf("%d notes by depsd, want 1:\n%s", n, body)
	}
	for _, p := range []string{ruby, python} {
		ps := f.validations(p)
		if len(ps) != 1 {
			t.Fatalf("%s: %d validation pipelines, want 1\n%s", p, len(ps), f.w.dump())
		}
		want := f.host + "/" + base + ":latest=docker-image://" + f.host + "/" + base + "@" + cand
		if got := ps[0].Variables[chain.VarBuildContexts]; got != want || ps[0].Ref != "main" {
			t.Errorf("%s built on %q at %s, want %q on main", p, got, ps[0].Ref, want)
		}
		for _, pub := range f.srv.PublishedImages() {
			if pub.PipelineID == ps[0].ID {
				t.Errorf("the validation of %s published %s", p, pub.Ref)
			}
		}
	}
	for _, p := range []string{app, pytools, legacy} {
		if n := len(f.srv.Pipelines(p)); n != 0 {
			t.Errorf("%s: %d pipelines at depth 1 (legacy cannot validate)", p, n)
		}
	}
	v := f.view(iid)
	if v.Chain == nil || v.Result != chain.CommitSuccess {
		t.Fatalf("validation %+v", v)
	}
	if m, _ := member(*v.Chain, legacy); m.State != chain.MemberSkipped || !strings.Contains(m.Why, "cannot validate") {
		t.Errorf("legacy %s: %s", m.State, m.Why)
	}
	f.noRelease()

	candTag := fmt.Sprintf("%s/%s:mr-%d", f.host, base, iid)
	if !f.tagExists(candTag) {
		t.Fatalf("no candidate %s", candTag)
	}
	if err := f.srv.MergeMR(base, iid); err != nil {
		t.Fatal(err)
	}
	f.w.waitUntil("the candidate's tag deleted", chainTimeout, func() bool { return !f.tagExists(candTag) })
	if !f.tagExists(f.host + "/" + base + ":latest") {
		t.Error("base's release tag was deleted with the candidate")
	}
}

// holdPipelineCreates starts a proxy in front of srv that holds back
// GitLab's answer to every pipeline creation, after GitLab made it, until
// release is called: a depsd killed meanwhile created pipelines without
// recording them. It returns the proxy's URL and how many answers it
// holds.
func holdPipelineCreates(t *testing.T, srv *gitlabtest.Server) (proxyURL string, release func(), held func() int) {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	var (
		once sync.Once
		mu   sync.Mutex
		n    int
	)
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pipeline") {
			mu.Lock()
			n++
			mu.Unlock()
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	return proxy.URL, release, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestValidationThatBreaksRubyAcrossSIGKILL: at depth all, base's change
// breaks ruby's build. depsd is killed -9 after GitLab created ruby's and
// python's validation pipelines but before it recorded them; restarted,
// it adopts them (one pipeline each). ruby fails, python is built and its
// validation image feeds pytools, nothing below ruby (app) is built; the
// status is failed, the note names ruby and links its pipeline; closing
// the merge request deletes the candidate and python's validation tag on
// the registry.
func TestValidationThatBreaksRubyAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	// depsd's pipeline creations pass through a proxy holding GitLab's
	// answers back.
	var (
		release func()
		held    func() int
	)
	f, first := newValFleet(t, "all", 0, func(srv *gitlabtest.Server) string {
		u, r, h := holdPipelineCreates(t, srv)
		release, held = r, h
		return u
	})
	iid, cand := f.openMR()
	f.srv.BreakBuildOn(ruby, cand)
	f.w.waitUntil("GitLab created ruby's and python's validation pipelines", stepTimeout, func() bool {
		return len(f.validations(ruby)) == 1 && len(f.validations(python)) == 1 && held() >= 2
	})
	if err := first.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatal("depsd exited cleanly on SIGKILL?")
	}
	release()
	second := f.setup.start(t)
	t.Cleanup(func() {
		if t.Failed() && !second.exited() {
			// Where it stands: its goroutines (SIGQUIT).
			second.signal(t, syscall.SIGQUIT, 5*time.Second)
			t.Logf("depsd's goroutines:\n%s", second.logs.tail(3000))
		}
	})
	// Adopted: the validation shows both pipelines GitLab made, and no
	// second one was created.
	f.w.waitUntil("the restarted depsd adopted both pipelines", chainTimeout, func() bool {
		v := f.view(iid)
		if v.Chain == nil {
			return false
		}
		r, _ := member(*v.Chain, ruby)
		p, _ := member(*v.Chain, python)
		return r.PipelineID == f.validations(ruby)[0].ID && p.PipelineID == f.validations(python)[0].ID
	})
	time.Sleep(time.Second) // a few reconcile intervals: a second create would show
	for _, p := range []string{ruby, python} {
		if n := len(f.validations(p)); n != 1 {
			t.Fatalf("%s: %d validation pipelines after the restart, want 1\n%s", p, n, f.w.dump())
		}
	}
	rubyPl, pyPl := f.validations(ruby)[0], f.validations(python)[0]
	if pyPl.Variables[chain.VarValidateTag] == "" {
		t.Errorf("python, which pytools builds on, pushes no validation image: %+v", pyPl.Variables)
	}
	for _, pl := range []gitlabtest.Pipeline{rubyPl, pyPl} {
		if err := f.srv.SetPipelineStatus(pl.ID, "success"); err != nil { // ruby's build breaks on the candidate
			t.Fatal(err)
		}
	}
	toolsPl := f.waitValidations(pytools, 1)[0]
	pyImage := f.host + "/" + python + ":" + pyPl.Variables[chain.VarValidateTag]
	if got := toolsPl.Variables[chain.VarBuildContexts]; !strings.Contains(got, "docker-image://"+f.host+"/"+python+"@sha256:") {
		t.Errorf("pytools built on %q, want python's validation image", got)
	}
	if err := f.srv.SetPipelineStatus(toolsPl.ID, "success"); err != nil {
		t.Fatal(err)
	}
	st := f.waitStatus(iid, "failed")
	if !strings.Contains(st.Description, "failed: "+ruby) {
		t.Errorf("status %+v: want failed naming ruby", st)
	}
	rubyURL := fmt.Sprintf("%s/%s/-/pipelines/%d", f.srv.URL, ruby, rubyPl.ID)
	f.waitNote(iid, "**failed**", ruby+" | **failed** | [#"+fmt.Sprint(rubyPl.ID)+"]("+rubyURL+")", app+" | blocked", pytools+" | built")
	if n := len(f.srv.Pipelines(app)); n != 0 {
		t.Errorf("app, below ruby, got %d pipelines", n)
	}
	for _, p := range []string{ruby, python, pytools} {
		if n := len(f.validations(p)); n != 1 {
			t.Errorf("%s: %d validation pipelines, want 1", p, n)
		}
	}
	f.noRelease()

	candTag := fmt.Sprintf("%s/%s:mr-%d", f.host, base, iid)
	if !f.tagExists(candTag) || !f.tagExists(pyImage) {
		t.Fatalf("candidate %s or python's validation image %s missing before the close", candTag, pyImage)
	}
	if err := f.srv.CloseMR(base, iid); err != nil {
		t.Fatal(err)
	}
	f.w.waitUntil("the candidate's and the validation images' tags deleted", chainTimeout, func() bool {
		return !f.tagExists(candTag) && !f.tagExists(pyImage)
	})
	if !f.tagExists(f.host + "/" + base + ":latest") {
		t.Error("base's release tag was deleted")
	}
}

// TestValidationStartsOverOnANewPush: a push to the merge request while
// its validation runs cancels the validation's pipelines on GitLab and
// validates the new commit's candidate; the status of the new head goes
// success once its dependents build.
func TestValidationStartsOverOnANewPush(t *testing.T) {
	t.Parallel()
	f, _ := newValFleet(t, "1", 0, nil)
	iid, first := f.openMR()
	old := map[string]gitlabtest.Pipeline{}
	for _, p := range []string{ruby, python} {
		old[p] = f.waitValidations(p, 1)[0]
		if err := f.srv.SetPipelineStatus(old[p].ID, "running"); err != nil {
			t.Fatal(err)
		}
	}
	f.waitStatus(iid, "running")
	oldView := f.view(iid)
	if _, err := f.srv.PushToMR(base, iid, "Containerfile", "FROM scratch\n# slimmer still\n"); err != nil {
		t.Fatal(err)
	}
	second := f.candidate(iid, 2)
	if second == first {
		t.Fatal("the new push's candidate is the same image")
	}
	for _, p := range []string{ruby, python} {
		f.w.waitUntil(p+"'s old validation pipeline canceled", chainTimeout, func() bool {
			for _, pl := range f.srv.Pipelines(p) {
				if pl.ID == old[p].ID {
					return pl.Status == "canceled"
				}
			}
			return false
		})
		ps := f.waitValidations(p, 2)
		if got := ps[1].Variables[chain.VarBuildContexts]; !strings.HasSuffix(got, "@"+second) {
			t.Errorf("%s's new validation built on %q, want the new candidate %s", p, got, second)
		}
		if err := f.srv.SetPipelineStatus(ps[1].ID, "success"); err != nil {
			t.Fatal(err)
		}
	}
	f.waitStatus(iid, "success")
	f.waitNote(iid, "every dependent builds", second)
	v := f.view(iid)
	if v.Chain == nil || oldView.Chain == nil || v.Chain.ID == oldView.Chain.ID || !slices.Contains(v.Chains, oldView.Chain.ID) {
		t.Fatalf("validations %+v, want a new one after %d", v.Chains, oldView.Chain.ID)
	}
	resp, err := f.w.client.Get(fmt.Sprintf("%s/api/v1/validations/%d", f.w.url, oldView.Chain.ID))
	if err != nil {
		t.Fatal(err)
	}
	var was chain.ValidationView
	err = json.NewDecoder(resp.Body).Decode(&was)
	resp.Body.Close()
	if err != nil || was.Chain == nil || was.Chain.State != chain.ChainCanceled || was.Chain.Validation.Canceled == "" {
		t.Errorf("the first validation: %+v, %v; want canceled, saying why", was.Chain, err)
	}
	for _, p := range []string{ruby, python} {
		if n := len(f.validations(p)); n != 2 {
			t.Errorf("%s: %d validation pipelines, want 2 (one per candidate)", p, n)
		}
	}
}
