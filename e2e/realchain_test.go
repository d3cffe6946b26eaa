package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/demo"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/internal/realtest"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/verify"
)

// The real chain (make e2e-real): images really built by buildah in jobs
// that the real GitLab Runner takes from the fake GitLab and runs with
// podman-executor, pushed to Debian's docker-registry, ordered by the
// depsd binary, and judged by the verify package.

// Projects of the real chain: base → ruby → app, and the diamond base →
// left, right → bottom.
const (
	rcBase   = "acme/base"
	rcRuby   = "acme/ruby"
	rcApp    = "acme/app"
	rcLeft   = "acme/left"
	rcRight  = "acme/right"
	rcBottom = "acme/bottom"
)

// realTimeout bounds one whole chain of real builds (six jobs, two at a
// time, on a loaded 2-core machine); a passing run takes a fraction.
const realTimeout = 6 * time.Minute

// Images of the CI machine (.ci/podman.sh, .ci/helper-image.sh,
// .ci/buildah-image.sh), overridable as in podman-executor's tests.
func rcImage(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// rcCIYAML is every project's .gitlab-ci.yml: one include of the build
// component (templates/image-build.yml, in the fake's project
// demo.ComponentProject, as depsd demo --real has it) with the job image,
// the registry over plain HTTP, and inputs (YAML lines). The component
// builds with buildah (layer cache on; without cache and pulling when
// depsd asks, DEPSD_NO_CACHE), pushes :latest on the default branch, and
// prints its script's own time for the overhead figures.
func rcCIYAML(jobImage string, inputs ...string) string {
	return demo.BuildComponentCI(append([]string{"job_image: " + jobImage, "tls_verify: false"}, inputs...)...)
}

// rcContainerfiles are the projects' Containerfiles on registry host reg,
// base's with version v.
func rcContainerfiles(reg, v string) map[string]string {
	img := func(p string) string { return reg + "/" + p + ":latest" }
	return map[string]string{
		rcBase: fmt.Sprintf("FROM %s/ext/busybox:latest\nRUN echo %s > /etc/base-version\n", reg, v),
		rcRuby: fmt.Sprintf("FROM %s\nRUN echo ruby > /etc/ruby-version && cat /etc/base-version\n", img(rcBase)),
		// app's FROM is an ARG whose default depsd reads as its
		// upstream; a job may pass another (RUBY_IMAGE).
		rcApp:   fmt.Sprintf("ARG RUBY_IMAGE=%s\nFROM ${RUBY_IMAGE}\nRUN echo app > /app\n", img(rcRuby)),
		rcLeft:  fmt.Sprintf("FROM %s\nRUN echo left > /left\n", img(rcBase)),
		rcRight: fmt.Sprintf("FROM %s\nRUN echo right > /right\n", img(rcBase)),
		rcBottom: fmt.Sprintf("FROM %s AS right\nFROM %s\nCOPY --from=right /right /right\nRUN cat /left /right > /bottom\n",
			img(rcRight), img(rcLeft)),
	}
}

// rcFrom is each project's upstream through its built stage's FROM (what
// verify judges), and rcAfter every project each one waits for.
var (
	rcFrom  = map[string]string{rcRuby: rcBase, rcApp: rcRuby, rcLeft: rcBase, rcRight: rcBase, rcBottom: rcLeft}
	rcAfter = map[string][]string{rcRuby: {rcBase}, rcApp: {rcRuby}, rcLeft: {rcBase}, rcRight: {rcBase},
		rcBottom: {rcLeft, rcRight}}
	rcDownstream = []string{rcRuby, rcApp, rcLeft, rcRight, rcBottom}
)

// TestRealChain: a change pushed to base rebuilds the chain for real:
// each image built by a real job and pushed, in dependency order, once,
// every member fresh by its image's base annotation, and so on depsd's
// dashboard, with the registry's digests. A second change, with
// depsd serve killed -9 after base's success, ends the same. A job of app
// made to build on ruby's earlier image is judged stale.
func TestRealChain(t *testing.T) {
	rc := startRealChain(t)

	// 1. A change to base: the whole chain, timed.
	first := rc.runChain("v2", nil)
	rc.logFigures(first)
	rc.assertChain(first)
	t.Run("dashboard shows the chain fresh", rc.dashboardAfterChain(first))
	ruby1, left1 := rc.digest(rcRuby), rc.digest(rcLeft)

	// 2. Another change, and depsd serve killed -9 once base succeeded
	// and its downstream pipelines were created.
	var restarted time.Time
	second := rc.runChain("v3", func() {
		rc.w.waitUntil("depsd created ruby's, left's and right's pipelines", realTimeout, func() bool {
			cs, err := rc.w.chains()
			if err != nil || len(cs) < 2 || cs[0].State == chain.Finished {
				return false
			}
			for _, p := range []string{rcRuby, rcLeft, rcRight} {
				if m, ok := member(cs[0], p); !ok || m.PipelineID == 0 {
					return false
				}
			}
			return true
		})
		if err := rc.serve.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
			t.Fatalf("depsd exited cleanly on SIGKILL?")
		}
		restarted = time.Now()
		rc.serve = rc.setup.start(t)
	})
	rc.assertChain(second)
	// The kill fell in the middle: app's and bottom's pipelines were
	// created by the restarted process.
	for _, p := range []string{rcApp, rcBottom} {
		if pl := second.pipelines[p]; !pl.CreatedAt.After(restarted) {
			t.Errorf("%s's pipeline was created at %s, before depsd was restarted at %s: the kill did not fall mid-chain",
				p, pl.CreatedAt.Format("15:04:05.000"), restarted.Format("15:04:05.000"))
		}
	}
	if ruby2 := rc.digest(rcRuby); ruby2 == ruby1 {
		t.Fatalf("ruby's image did not change between the chains (%s): the test cannot tell stale from fresh", ruby1)
	}

	// 3. app built on ruby's earlier image: stale. app's FROM names an
	// ARG: the component passes the image depsd_build_contexts gives for
	// it as that build argument.
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	pl, err := rc.gl.CreatePipeline(ctx, rc.ids[rcApp], "main", gitlab.CreateOptions{
		Variables: map[string]string{"DEPSD_BUILD_CONTEXTS": "RUBY_IMAGE=docker-image://" + rc.reg + "/" + rcRuby + "@" + ruby1}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rc.srv.WaitPipeline(ctx, pl.ID); err != nil || got.Status != "success" {
		t.Fatalf("app's pipeline on ruby@%s: %s %v\n%s", ruby1, got.Status, err, rc.jobLog(pl.ID))
	}
	res := rc.verify(rcApp, ruby1)
	if res.State != verify.StateStale {
		t.Errorf("app built on ruby@%s: verification %s (%s), want stale", ruby1, res.State, res.Detail)
	}
	// depsd verifies that success too (outside a chain, for the record).
	rc.w.waitUntil("depsd's verdict on app built on ruby's earlier image", realTimeout, func() bool {
		state, digest := rc.depsdVerdict(rcApp)
		return state == verify.StateStale && digest == rc.digest(rcApp)
	})

	t.Run("stale rebuilt without cache", rc.staleRebuiltWithoutCache)
	t.Run("a validation build on a candidate", rc.validationOnACandidate(left1))
	t.Run("pinned app moves through its merge request", rc.pinnedThroughMergeRequest)
}

// pinnedThroughMergeRequest: app's Containerfile pins ruby's current image
// by digest (an ARG default), then ruby changes. depsd does not rebuild
// app: it opens a merge request moving the pin to ruby's new, verified
// digest, and nothing else of the file. Merged (by the test, as a reviewer
// would), the merge's own pipeline, a real job building on the moved pin,
// is app's build: its image is fresh, and the chain finishes.
func (rc *realChain) pinnedThroughMergeRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	old := rc.digest(rcRuby)
	pinned := fmt.Sprintf("# ruby moves in review\nARG RUBY_IMAGE=%s/%s:latest@%s\nFROM ${RUBY_IMAGE}\nRUN echo app > /app\n", rc.reg, rcRuby, old)
	// The job builds what the file says (no RUBY_IMAGE variable any more).
	if _, err := rc.srv.SetFile(rcApp, ".gitlab-ci.yml", rcCIYAML(rcImage("DEPSD_BUILDAH_IMAGE", demo.DefaultJobImage))); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.srv.SetFile(rcApp, "Containerfile", pinned); err != nil {
		t.Fatal(err)
	}
	if err := rc.srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	rc.w.waitUntil("depsd read app's pin", realTimeout, func() bool {
		var doc struct {
			Projects []struct {
				Path         string                    `json:"path"`
				UpstreamPins map[string]map[string]any `json:"upstream_pins"`
			} `json:"projects"`
		}
		resp, err := rc.w.client.Get(rc.w.url + "/api/v1/graph")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if json.NewDecoder(resp.Body).Decode(&doc) != nil {
			return false
		}
		for _, p := range doc.Projects {
			if p.Path == rcApp {
				return p.UpstreamPins[rcRuby]["digest"] == old
			}
		}
		return false
	})
	apiBefore := len(rc.w.apiPipelines(rcApp))
	earlier, err := rc.w.chains()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.srv.SetFile(rcRuby, "Containerfile", rcContainerfiles(rc.reg, "")[rcRuby]+"RUN echo pinned-phase > /etc/ruby-pinned\n"); err != nil {
		t.Fatal(err)
	}
	var view chain.ChainView
	rc.w.waitUntil("app waits for its merge request", realTimeout, func() bool {
		cs, err := rc.w.chains()
		if err != nil || len(cs) != len(earlier)+1 {
			return false
		}
		view = cs[0]
		m, ok := member(view, rcApp)
		return ok && m.State == chain.WaitingMerge && m.MergeRequest != ""
	})
	current := rc.digest(rcRuby)
	if current == old {
		t.Fatalf("ruby did not move (%s)", old)
	}
	mrs := rc.srv.MergeRequests(rcApp)
	if len(mrs) != 1 || mrs[0].SourceBranch != "depsd/pins" {
		t.Fatalf("merge requests of app: %+v", mrs)
	}
	if got, want := rc.srv.Files(rcApp, "depsd/pins")["Containerfile"], strings.Replace(pinned, old, current, 1); got != want {
		t.Errorf("app's Containerfile on depsd/pins:\n%q\nwant only the pin moved to %s:\n%q", got, current, want)
	}
	if err := rc.srv.MergeMR(rcApp, mrs[0].IID); err != nil {
		t.Fatal(err)
	}
	merged := rc.srv.MergeRequests(rcApp)[0]
	rc.w.waitUntil("the chain through app's merge finished", realTimeout, func() bool {
		cs, err := rc.w.chains()
		if err != nil || len(cs) != len(earlier)+1 {
			return false
		}
		view = cs[0]
		return view.State == chain.Finished
	})
	if err := rc.srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	m, _ := member(view, rcApp)
	var merge gitlabtest.Pipeline
	for _, p := range rc.srv.Pipelines(rcApp) {
		if p.Ref == "main" && p.SHA == merged.MergeCommitSHA {
			merge = p
		}
	}
	if m.State != chain.Success || m.Builds != 1 || merge.ID == 0 || m.PipelineID != merge.ID || m.Verified != chain.ImageFresh {
		t.Errorf("app = %+v: want built once, by the merge's pipeline %d (%s), its image fresh\n%s", m, merge.ID, merge.Status, rc.jobLog(merge.ID))
	}
	if n := len(rc.w.apiPipelines(rcApp)) - apiBefore; n != 0 {
		t.Errorf("depsd created %d pipelines of app: a pinned member gets a merge request", n)
	}
	if res := rc.verify(rcApp, old); res.State != verify.StateFresh {
		t.Errorf("app after its merge: %s (%s), want fresh on ruby's current image", res.State, res.Detail)
	}
}

// staleRebuiltWithoutCache: app's job uses the base image in its build
// storage instead of pulling (the component's pull: "false", a stale
// cache in the making), then ruby changes. depsd triggers app, which
// builds on ruby's earlier image; depsd judges it stale and rebuilds it
// once without cache, which pulls ruby's current image: fresh.
func (rc *realChain) staleRebuiltWithoutCache(t *testing.T) {
	ruby := rc.digest(rcRuby)
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	if _, err := rc.srv.SetFile(rcApp, ".gitlab-ci.yml", rcCIYAML(rcImage("DEPSD_BUILDAH_IMAGE", demo.DefaultJobImage), `pull: "false"`)); err != nil {
		t.Fatal(err)
	}
	pls := rc.srv.Pipelines(rcApp) // the last: app's push pipeline, on ruby's current image
	if got, err := rc.srv.WaitPipeline(ctx, pls[len(pls)-1].ID); err != nil || got.Status != "success" {
		t.Fatalf("app's push pipeline: %s %v\n%s", got.Status, err, rc.jobLog(got.ID))
	}
	if res := rc.verify(rcApp, ""); res.State != verify.StateFresh {
		t.Fatalf("app built from its build storage before ruby changed: %s (%s), want fresh (ruby's current image is the one it holds)", res.State, res.Detail)
	}
	appBefore := len(rc.srv.Pipelines(rcApp))
	earlier, err := rc.w.chains()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.srv.SetFile(rcRuby, "Containerfile", rcContainerfiles(rc.reg, "")[rcRuby]+"RUN echo changed > /etc/ruby-changed\n"); err != nil {
		t.Fatal(err)
	}
	var view chain.ChainView
	rc.w.waitUntil("the chain of ruby's change finished", realTimeout, func() bool {
		cs, err := rc.w.chains()
		if err != nil || len(cs) != len(earlier)+1 {
			return false
		}
		view = cs[0]
		return cs[0].State == chain.Finished
	})
	if err := rc.srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	apps := rc.srv.Pipelines(rcApp)[appBefore:]
	if len(apps) != 2 {
		t.Fatalf("app: %d pipelines in ruby's chain, want 2 (the stale build, the rebuild without cache)\n%s", len(apps), rc.w.dump())
	}
	if apps[0].Variables["DEPSD_NO_CACHE"] != "" || apps[1].Variables["DEPSD_NO_CACHE"] != "1" {
		t.Errorf("app's pipelines have DEPSD_NO_CACHE %q then %q, want none then 1",
			apps[0].Variables["DEPSD_NO_CACHE"], apps[1].Variables["DEPSD_NO_CACHE"])
	}
	if m, ok := member(view, rcApp); !ok || m.State != chain.Success || m.Builds != 2 || m.Verified != chain.ImageFresh {
		t.Errorf("depsd's chain member app = %+v, want success after 2 builds, its images fresh", m)
	}
	if res := rc.verify(rcApp, ruby); res.State != verify.StateFresh {
		t.Errorf("app after the rebuild without cache: %s (%s), want fresh", res.State, res.Detail)
	}
}

// validationOnACandidate: a validation build of bottom (FROM left:latest,
// a literal image) on an earlier image of left, as depsd asks for one
// (variables DEPSD_VALIDATE, DEPSD_BUILD_CONTEXTS with buildah's
// --build-context form, DEPSD_VALIDATE_TAG): the job builds on that image
// and pushes the validation tag only; bottom's :latest is untouched.
func (rc *realChain) validationOnACandidate(candidate string) func(t *testing.T) {
	return func(t *testing.T) {
		latest := rc.digest(rcBottom)
		ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
		defer cancel()
		left := rc.ref(rcLeft)
		pl, err := rc.gl.CreatePipeline(ctx, rc.ids[rcBottom], "main", gitlab.CreateOptions{Variables: map[string]string{
			"DEPSD_VALIDATE": "1", "DEPSD_VALIDATE_TAG": "depsd-validate-e2e",
			"DEPSD_BUILD_CONTEXTS": left + "=docker-image://" + rc.reg + "/" + rcLeft + "@" + candidate}})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := rc.srv.WaitPipeline(ctx, pl.ID); err != nil || got.Status != "success" {
			t.Fatalf("bottom's validation pipeline: %s %v\n%s", got.Status, err, rc.jobLog(pl.ID))
		}
		if d := rc.digest(rcBottom); d != latest {
			t.Errorf("bottom:latest moved from %s to %s: a validation build published", latest, d)
		}
		img := rc.reg + "/" + rcBottom + ":depsd-validate-e2e"
		res := rc.v.Verify(ctx, verify.Request{Image: img, Platform: rcPlatform(),
			Upstreams: []verify.Upstream{{Image: left, Earlier: []string{candidate}}}})
		if res.State != verify.StateStale {
			t.Errorf("%s: %s (%s), want stale: built on left@%s, the candidate, not left's current image", img, res.State, res.Detail, candidate)
		}
		if rc.digest(rcLeft) == candidate {
			t.Fatalf("left's current image is the candidate %s: the test cannot tell them apart", candidate)
		}
	}
}

// realChain is the whole set-up: registry, fake GitLab with real jobs, the
// real runner with podman-executor, and depsd serve.
type realChain struct {
	t     *testing.T
	reg   string // the registry's host:port
	srv   *gitlabtest.Server
	gl    *gitlab.Client
	ids   map[string]int64
	setup *serveSetup
	serve *serveProc
	w     *world
	v     *verify.Verifier
	rdr   *registry.Client
}

// realSetup is what a real chain needs of the machine: the podman
// service, the real runner, and the job and seed images.
type realSetup struct {
	podmanURL, runner, jobImage, seedImage string
}

// realPrerequisites finds them, skipping the test where they may be
// missing and failing it where they are expected (internal/realtest).
func realPrerequisites(t *testing.T) realSetup {
	t.Helper()
	host := os.Getenv("CONTAINER_HOST")
	if host == "" {
		if _, err := os.Stat("/tmp/depsd-ci/podman/podman.sock"); err == nil {
			host = "unix:///tmp/depsd-ci/podman/podman.sock"
		}
	}
	realtest.Require(t, realtest.Podman, host != "", `no podman service: eval "$(.ci/podman.sh start)"`)
	_, err := os.Stat("/dev/fuse")
	realtest.Require(t, realtest.Podman, err == nil, "no /dev/fuse for buildah in jobs")
	runnerBin := os.Getenv("DEPSD_GITLAB_RUNNER")
	_, err = os.Stat(runnerBin)
	realtest.Require(t, realtest.GitLabRunner, runnerBin != "" && err == nil,
		"set DEPSD_GITLAB_RUNNER (../shared/tools/gitlab-runner/install.sh DIR prints it)")
	s := realSetup{podmanURL: host, runner: runnerBin,
		jobImage:  rcImage("DEPSD_BUILDAH_IMAGE", demo.DefaultJobImage),
		seedImage: rcImage("DEPSD_TEST_IMAGE", demo.DefaultSeedImage)}
	for _, img := range []string{s.jobImage, s.seedImage} {
		err := podman(host, "image", "exists", img).Run()
		realtest.Require(t, realtest.Podman, err == nil,
			fmt.Sprintf("image %s missing (.ci/podman.sh start, .ci/buildah-image.sh): %v", img, err))
	}
	// The job clones its sources itself (demo.StartRunner): its image
	// needs git, which .ci/buildah-image.sh installs since the real chain.
	if out, err := podman(host, "run", "--rm", "--entrypoint", "git", s.jobImage, "--version").CombinedOutput(); err != nil {
		t.Fatalf("job image %s has no git (%v: %s): remove it and run .ci/buildah-image.sh again", s.jobImage, err, out)
	}
	return s
}

var executorBin struct {
	once sync.Once
	path string
	err  error
}

// buildExecutor builds podman-executor from its module, with its tags,
// once for the suite (removed with the depsd binary's directory).
func buildExecutor(t *testing.T) string {
	t.Helper()
	executorBin.once.Do(func() {
		// Not beside depsd, where depsd demo --real would find it (see
		// TestDemoRealSaysWhatIsMissing).
		dir := filepath.Join(filepath.Dir(depsdBinary(t)), "executor")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			executorBin.err = err
			return
		}
		executorBin.path = filepath.Join(dir, "podman-executor")
		build := exec.Command("go", "build", "-tags", "remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp",
			"-o", executorBin.path, "./cmd/podman-executor")
		build.Dir = filepath.Join("..", "podman-executor")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			executorBin.err = fmt.Errorf("build podman-executor: %v\n%s", err, out)
		}
	})
	if executorBin.err != nil {
		t.Fatal(executorBin.err)
	}
	return executorBin.path
}

func startRealChain(t *testing.T) *realChain {
	t.Helper()
	rs := realPrerequisites(t)
	host, runnerBin, jobImage, seedImage := rs.podmanURL, rs.runner, rs.jobImage, rs.seedImage
	reg := registrytest.Start(t)
	// The external seed: base is FROM it.
	if out, err := podman(host, "push", "--tls-verify=false", seedImage, "docker://"+reg+"/ext/busybox:latest").CombinedOutput(); err != nil {
		t.Fatalf("push the seed image: %v\n%s", err, out)
	}

	rc := &realChain{t: t, reg: reg, ids: map[string]int64{}}
	rc.rdr = registry.New(registry.Options{Insecure: []string{reg}})
	rc.v = verify.New(rc.rdr, verify.Options{})
	runnerToken := "glrt-" + randHex(t, 9) + "-e2e-real"
	rc.srv = gitlabtest.New(gitlabtest.Options{Token: "glpat-e2e", RegistryHost: reg, RunnerToken: runnerToken})
	t.Cleanup(rc.srv.Close)
	if err := demo.AddBuildComponent(rc.srv); err != nil {
		t.Fatal(err)
	}
	files := rcContainerfiles(reg, "v1")
	for _, p := range append([]string{rcBase}, rcDownstream...) {
		id, err := rc.srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{
			"Containerfile": files[p], ".gitlab-ci.yml": rcCIYAML(jobImage)}})
		if err != nil {
			t.Fatal(err)
		}
		rc.ids[p] = id
		if err := rc.srv.SetPipelineBehavior(p, gitlabtest.Behavior{Jobs: true, OnPush: true}); err != nil {
			t.Fatal(err)
		}
	}
	rc.gl = newClient(t, rc.srv)
	startRunner(t, host, runnerBin, rc.srv.URL, runnerToken, jobImage)

	rc.setup = newServeSetup(t, rc.srv)
	// depsd verifies every member's image in this registry (enforce, the
	// default a user gets; a registry on 127.0.0.1 over plain HTTP is read
	// only when listed in insecure_registries), leaves such as app
	// included: they publish :latest, which no downstream names.
	rc.setup.configure(t, "gitlab:\n  requests_per_minute: 60000\nimages:\n  verify: enforce\n  publish: [\"{registry}/{path}:latest\"]\n  insecure_registries: [\""+reg+"\"]\n")
	rc.serve = rc.setup.start(t)
	rc.w = rc.setup.world(t)
	rc.w.syncHooks(rc.gl)
	return rc
}

// startRunner runs `gitlab-runner run` (two concurrent jobs) with
// podman-executor, built here from its module, as its custom executor
// (demo.StartRunner, as depsd demo --real does), until the test ends.
func startRunner(t *testing.T, host, runnerBin, url, token, jobImage string) {
	t.Helper()
	driver := buildExecutor(t)
	dir := t.TempDir()
	logs := &syncBuffer{}
	stop, err := demo.StartRunner(demo.RunnerOptions{Dir: filepath.Join(dir, "runner"), Runner: runnerBin, Executor: driver,
		PodmanURL: host, JobImage: jobImage, URL: url, Token: token, Log: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("gitlab-runner log:\n%s", logs.tail(80))
		}
	})
}

func podman(host string, args ...string) *exec.Cmd {
	return exec.Command("podman", append([]string{"--url", host}, args...)...)
}

func randHex(t *testing.T, n int) string {
	b := make([]byte, (n+1)/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)[:n]
}

// chainRun is one chain started by a change pushed to base.
type chainRun struct {
	pushedAt  time.Time
	pipelines map[string]gitlabtest.Pipeline // the run's one pipeline per project
	view      chain.ChainView
}

// runChain pushes base's Containerfile at version v and waits until
// depsd's chain finished; during, if set, runs once base succeeded.
func (rc *realChain) runChain(v string, during func()) chainRun {
	t := rc.t
	t.Helper()
	before := map[string]int{}
	for _, p := range append([]string{rcBase}, rcDownstream...) {
		before[p] = len(rc.srv.Pipelines(p))
	}
	earlier, err := rc.w.chains()
	if err != nil {
		t.Fatal(err)
	}
	run := chainRun{pushedAt: time.Now(), pipelines: map[string]gitlabtest.Pipeline{}}
	if _, err := rc.srv.SetFile(rcBase, "Containerfile", rcContainerfiles(rc.reg, v)[rcBase]); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during()
	}
	rc.w.waitUntil("the chain of base "+v+" finished", realTimeout, func() bool {
		rc.failFast(before)
		cs, err := rc.w.chains()
		if err != nil || len(cs) != len(earlier)+1 {
			return false
		}
		run.view = cs[0]
		return cs[0].State == chain.Finished
	})
	// base's pipeline runs while the chain's commit status on it does
	// (docs/chains.md): it ends once depsd posted the chain's success, at
	// most one status interval (5 s) after the chain finished.
	rc.w.waitUntil("base's pipeline ends with the chain's status", stepTimeout, func() bool {
		ps := rc.srv.Pipelines(rcBase)
		return len(ps) > before[rcBase] && ps[len(ps)-1].Status == "success"
	})
	// The last webhooks and the runner are done once GitLab is idle.
	rc.w.waitUntil("GitLab is idle", stepTimeout, func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return rc.srv.WaitIdle(ctx) == nil
	})
	for p, n := range before {
		ps := rc.srv.Pipelines(p)[n:]
		if len(ps) != 1 {
			t.Errorf("%s: %d pipelines in the chain of base %s, want 1\n%s", p, len(ps), v, rc.w.dump())
			continue
		}
		run.pipelines[p] = ps[0]
	}
	if t.Failed() {
		t.FailNow()
	}
	return run
}

// failFast stops the test at the first failed pipeline since before (the
// counts of pipelines per project), with its job's log.
func (rc *realChain) failFast(before map[string]int) {
	rc.t.Helper()
	for p, n := range before {
		for _, pl := range rc.srv.Pipelines(p)[n:] {
			if pl.Status == "failed" || pl.Status == "canceled" {
				rc.t.Fatalf("%s: pipeline %d %s\n%s\n%s", p, pl.ID, pl.Status, rc.jobLog(pl.ID), rc.w.dump())
			}
		}
	}
}

// assertChain checks what a user would look for after a chain: every
// pipeline succeeded, each started after its upstreams succeeded, depsd's
// chain shows each member built once, and every image is fresh on its
// upstream's current image.
func (rc *realChain) assertChain(run chainRun) {
	t := rc.t
	t.Helper()
	for p, pl := range run.pipelines {
		if pl.Status != "success" {
			t.Errorf("%s: pipeline %d %s, want success\n%s", p, pl.ID, pl.Status, rc.jobLog(pl.ID))
		}
	}
	if pl := run.pipelines[rcBase]; pl.Source != "push" {
		t.Errorf("base's pipeline has source %s, want push (the change, not depsd)", pl.Source)
	}
	for _, p := range rcDownstream {
		pl := run.pipelines[p]
		if pl.Source != "api" {
			t.Errorf("%s's pipeline has source %s, want api (created by depsd)", p, pl.Source)
		}
		for _, up := range rcAfter[p] {
			rc.w.notBefore(pl, run.pipelines[up], p, up)
		}
		if m, ok := member(run.view, p); !ok || m.State != chain.Success || m.Builds != 1 {
			t.Errorf("depsd's chain member %s = %+v, want success after 1 build", p, m)
		}
		if !strings.Contains(rc.jobLog(pl.ID), "Writing manifest") {
			t.Errorf("%s's job did not push an image:\n%s", p, rc.jobLog(pl.ID))
		}
	}
	for _, p := range rcDownstream {
		// depsd's own verdict, as its chain and its API show it: the
		// member's images fresh, and the freshness row of the image the
		// registry holds now.
		if m, _ := member(run.view, p); m.Verified != chain.ImageFresh {
			t.Errorf("depsd's verdict on %s in the chain: %q (%s), want fresh", p, m.Verified, m.VerifyDetail)
		}
		if state, digest := rc.depsdVerdict(p); state != verify.StateFresh || digest != rc.digest(p) {
			t.Errorf("depsd freshness of %s: %s on %s, want fresh on the registry's %s", p, state, digest, rc.digest(p))
		}
		// The test's own judgement, from the registry, as a cross-check.
		res := rc.verify(p, "")
		if res.State != verify.StateFresh {
			t.Errorf("%s: verification %s (%s), want fresh on %s's current image", p, res.State, res.Detail, rcFrom[p])
		}
	}
	res := rc.v.Verify(context.Background(), verify.Request{Image: rc.ref(rcBase), Platform: rcPlatform(),
		Upstreams: []verify.Upstream{{Image: rc.reg + "/ext/busybox:latest"}}})
	if res.State != verify.StateFresh {
		t.Errorf("base: verification %s (%s), want fresh on the seed", res.State, res.Detail)
	}
}

func rcPlatform() deps.Platform { return deps.Platform{OS: "linux", Architecture: runtime.GOARCH} }

func (rc *realChain) ref(p string) string { return rc.reg + "/" + p + ":latest" }

// verify judges p's image against its FROM upstream's current image;
// earlier, if set, is a digest that upstream had before.
func (rc *realChain) verify(p, earlier string) verify.Result {
	up := verify.Upstream{Image: rc.ref(rcFrom[p])}
	if earlier != "" {
		up.Earlier = []string{earlier}
	}
	return rc.v.Verify(context.Background(), verify.Request{Image: rc.ref(p), Platform: rcPlatform(), Upstreams: []verify.Upstream{up}})
}

// depsdVerdict is what depsd's API (GET /api/v1/freshness) says of p's
// image: its state and the digest it judged; empty when it has none.
func (rc *realChain) depsdVerdict(p string) (verify.State, string) {
	rc.t.Helper()
	resp, err := rc.w.client.Get(rc.w.url + "/api/v1/freshness?project=" + url.QueryEscape(p))
	if err != nil {
		rc.t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep struct {
		Images []verify.Row `json:"images"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != http.StatusOK {
		rc.t.Fatalf("GET /api/v1/freshness?project=%s: %d, %v", p, resp.StatusCode, err)
	}
	for _, r := range rep.Images {
		if r.Image == rc.ref(p) {
			return r.State, r.Digest
		}
	}
	return "", ""
}

// digest is the current manifest digest of p's image.
func (rc *realChain) digest(p string) string {
	rc.t.Helper()
	m, err := rc.rdr.Manifest(context.Background(), rc.ref(p))
	if err != nil {
		rc.t.Fatalf("read %s: %v", rc.ref(p), err)
	}
	return m.Digest
}

// jobLog is the trace of a pipeline's jobs.
func (rc *realChain) jobLog(pipelineID int64) string {
	var b strings.Builder
	for _, j := range rc.srv.Jobs(pipelineID) {
		fmt.Fprintf(&b, "-- job %d %s (%s, exit %d %s)\n%s\n", j.ID, j.Name, j.Status, j.ExitCode, j.FailureReason, j.Trace)
	}
	return b.String()
}

// scriptMS is the component's line of its script's own time.
var scriptMS = regexp.MustCompile(`image-build: build and push took (\d+) ms`)

// logFigures prints the chain's wall time (to the end of app, of bottom)
// and, per job, the script's own time (build and push) against the rest:
// depsd's trigger after the upstream's success, the runner's pick-up, and
// the job's set-up and tear-down.
func (rc *realChain) logFigures(run chainRun) {
	t := rc.t
	var b bytes.Buffer
	// A pipeline's first success, as its webhook told it: base's runs
	// again, and finishes anew, while the chain's commit status on it does.
	finished := func(p string) time.Time {
		pl := run.pipelines[p]
		f := pl.FinishedAt
		if d, ok := rc.w.firstDelivery(pl.ID, "success"); ok && d.QueuedAt.Before(f) {
			f = d.QueuedAt
		}
		return f
	}
	end := func(p string) time.Duration { return finished(p).Sub(run.pushedAt) }
	fmt.Fprintf(&b, "real chain on %d CPUs: chain of 3 (base → ruby → app) %.1f s, diamond (base → left, right → bottom) %.1f s\n",
		runtime.NumCPU(), end(rcApp).Seconds(), end(rcBottom).Seconds())
	fmt.Fprintf(&b, "%-12s %9s %9s %9s %9s %9s\n", "project", "trigger", "pick-up", "job", "script", "overhead")
	for _, p := range append([]string{rcBase}, rcDownstream...) {
		pl := run.pipelines[p]
		trigger := time.Duration(0)
		if p != rcBase {
			last := time.Time{}
			for _, up := range rcAfter[p] {
				if f := finished(up); f.After(last) {
					last = f
				}
			}
			trigger = pl.CreatedAt.Sub(last)
		}
		pickup := pl.StartedAt.Sub(pl.CreatedAt)
		job := finished(p).Sub(pl.StartedAt)
		script := time.Duration(-1)
		if m := scriptMS.FindStringSubmatch(rc.jobLog(pl.ID)); m != nil {
			ms, _ := strconv.Atoi(m[1])
			script = time.Duration(ms) * time.Millisecond
		}
		fmt.Fprintf(&b, "%-12s %8.2fs %8.2fs %8.2fs %8.2fs %8.2fs\n", p, trigger.Seconds(), pickup.Seconds(), job.Seconds(),
			script.Seconds(), (trigger + pickup + job - script).Seconds())
	}
	t.Log("\n" + b.String())
	if f := os.Getenv("DEPSD_E2E_REAL_FIGURES"); f != "" {
		if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// depsd demo --real on a machine without what it needs says what is
// missing and how to get it, and fails, instead of starting half of it.
func TestDemoRealSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, depsdBinary(t), "demo", "--real")
	cmd.Dir = t.TempDir()
	// No podman service, and nothing on PATH: an empty directory.
	cmd.Env = []string{"PATH=" + t.TempDir(), "HOME=" + cmd.Dir}
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 1 {
		t.Errorf("depsd demo --real without prerequisites: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"missing podman: apt-get install podman", "missing a podman API service",
		"missing docker-registry: apt-get install docker-registry", "missing gitlab-runner", "missing podman-executor: make build"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// depsd demo --real builds the demo's chain for real (registry and runner
// started for it, stopped after) and prints, as each member succeeds, its
// image's digest, and depsd's verification of it: all six fresh.
func TestDemoReal(t *testing.T) {
	rs := realPrerequisites(t)
	ctx, cancel := context.WithTimeout(context.Background(), realTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, depsdBinary(t), "demo", "--real", "--podman-url", rs.podmanURL, "--runner", rs.runner,
		"--executor", buildExecutor(t), "--job-image", rs.jobImage)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("depsd demo --real: %v\n%s", err, out)
	}
	for _, p := range []string{"base", "ruby", "app", "left", "right", "bottom"} {
		built := regexp.MustCompile(`demo/` + p + `\s+success\s+pipeline \d+\s+sha256:[0-9a-f]{12}`)
		// bottom too: built FROM left, judged against left only (its
		// COPY --from=right stage's image is not its base).
		verified := regexp.MustCompile(`demo/` + p + `\s+verified\s+images fresh`)
		if !built.Match(out) || !verified.Match(out) {
			t.Errorf("no lines show demo/%s built with its digest and verified fresh by depsd:\n%s", p, out)
		}
	}
	if !strings.Contains(string(out), "6 images built by real jobs") {
		t.Errorf("depsd demo --real did not report the chain:\n%s", out)
	}
}
