package dashboard_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/internal/browsertest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scheduler"
)

// updateScreenshots rewrites docs/screenshots/*.png from the browser tests
// (also with DEPSD_UPDATE_SCREENSHOTS=1).
var updateScreenshots = flag.Bool("update-screenshots", false, "write the dashboard screenshots under docs/screenshots")

// Bounded waits; a passing run takes a fraction of them, also under -race.
const (
	pageTimeout  = browsertest.PageTimeout
	startTimeout = 3 * time.Minute
)

const registry = gitlabtest.DefaultRegistryHost + "/"

// sample is the instance the pages are checked against: the demo's image
// chains (a diamond through the tools, a .gitlab-deps upstream, external
// base images) plus a project that depends on nothing of them.
var sample = []gitlabtest.Project{
	{Path: "acme/images/base", Files: map[string]string{"Containerfile": "ARG DEBIAN=bookworm-slim\nFROM debian:${DEBIAN}\nRUN apt-get update\n"}},
	{Path: "acme/images/ruby", Files: map[string]string{"Containerfile": "FROM " + registry + "acme/images/base:latest\nRUN apt-get install -y ruby\n"}},
	{Path: "acme/apps/shop", Files: map[string]string{"Containerfile": "FROM " + registry + "acme/images/ruby:latest AS build\nRUN bundle install\nFROM build\n"}},
	{Path: "acme/tools/lint", Files: map[string]string{"Containerfile": "FROM " + registry + "acme/images/base:latest\n"}},
	{Path: "acme/tools/scan", Files: map[string]string{"Dockerfile": "FROM " + registry + "acme/images/base:latest\n"}},
	{Path: "acme/tools/ci", Files: map[string]string{"Containerfile": "FROM " + registry + "acme/tools/lint:latest\nCOPY --from=" + registry + "acme/tools/scan:latest /usr/bin/scan /usr/bin/scan\n"}},
	{Path: "acme/apps/docs", Files: map[string]string{".gitlab-deps": "# rebuilt whenever the shop changes\nacme/apps/shop\n"}},
	{Path: "acme/apps/legacy", Files: map[string]string{"Containerfile": "FROM alpine:${VERSION}\n"}},
	{Path: "acme/misc/left", Files: map[string]string{".gitlab-deps": "acme/misc/right\n"}},
	{Path: "acme/misc/right", Files: map[string]string{".gitlab-deps": "acme/misc/left\n"}},
}

// history is how long earlier successful pipelines took, in minutes.
var history = map[string][]int{
	"acme/images/base": {6, 7, 6}, "acme/images/ruby": {9, 11, 10}, "acme/apps/shop": {14, 12, 13},
	"acme/tools/lint": {3, 3, 4}, "acme/tools/scan": {5, 4, 5},
}

// served is depsd serve (in process) over a fake GitLab.
type served struct {
	srv    *gitlabtest.Server
	url    string
	engine *chain.Engine
	state  string // the state file
}

// hookStates are how the sample's webhooks are set up before depsd
// starts: one missing, one disabled by GitLab, one failing (temporarily
// disabled); the others fine.
var hookStates = map[string]string{"acme/misc/right": "missing", "acme/apps/docs": "disabled", "acme/misc/left": "failing"}

// serve seeds a fake GitLab with projects (pipelines are driven by the
// test: they stay "created" until SetPipelineStatus), installs depsd's
// webhooks as hookStates says, runs depsd serve on it with scope group acme,
// and stops both when the test ends.
func serve(t testing.TB, projects []gitlabtest.Project, past map[string][]int, hooks map[string]string, sched scheduler.Config) *served {
	t.Helper()
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-ui"})
	t.Cleanup(srv.Close)
	day := time.Now().Add(-24 * time.Hour)
	for _, p := range projects {
		if _, err := srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
		for i, m := range past[p.Path] {
			start := day.Add(time.Duration(i) * time.Hour)
			if _, err := srv.AddPastPipeline(p.Path, "", "push", "success", start, start.Add(time.Duration(m)*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return serveOn(t, srv, projects, hooks, sched)
}

// serveOn is serve on a fake GitLab the test seeded itself with projects.
func serveOn(t testing.TB, srv *gitlabtest.Server, projects []gitlabtest.Project, hooks map[string]string, sched scheduler.Config) *served {
	t.Helper()
	return serveWith(t, srv, projects, hooks, sched, nil)
}

// serveWith is serveOn with mod changing the configuration once depsd's
// address (addr, host:port) is chosen.
func serveWith(t testing.TB, srv *gitlabtest.Server, projects []gitlabtest.Project, hooks map[string]string, sched scheduler.Config,
	mod func(cfg *config.Config, addr string)) *served {
	t.Helper()
	// depsd's address is chosen first, so that its hooks exist before it
	// starts and it finds them in their states.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const secret = "ui-webhook-secret"
	hookURL := "http://" + addr + "/hooks/gitlab"
	if hooks != nil {
		for _, p := range projects {
			state := hooks[p.Path]
			if state == "missing" {
				continue
			}
			id, err := srv.AddHook(p.Path, gitlabtest.Hook{URL: hookURL, Token: secret, Events: []string{"pipeline_events", "push_events"}, EnableSSLVerification: true})
			if err != nil {
				t.Fatal(err)
			}
			switch state {
			case "disabled":
				err = srv.DisableHook(p.Path, id, time.Time{})
			case "failing":
				err = srv.DisableHook(p.Path, id, time.Now().Add(time.Hour))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Concurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.GitLab.URL, cfg.GitLab.Token = srv.URL, srv.Token
	cfg.GitLab.Concurrency = 16
	cfg.Scope.Groups = []string{"acme"}
	cfg.State = filepath.Join(t.TempDir(), "depsd.db")
	cfg.Hooks.Secret = secret
	cfg.Scheduler = sched
	// The watched images are on a registry on 127.0.0.1: listed, as an
	// operator would.
	for _, w := range sched.Watch {
		host, _, _ := strings.Cut(w.Image, "/")
		cfg.Images.InsecureRegistries = append(cfg.Images.InsecureRegistries, host)
	}
	// A fake whose images are pushed to a real registry on 127.0.0.1:
	// listed too, and its images verified.
	if h := srv.RegistryHost(); h != gitlabtest.DefaultRegistryHost {
		cfg.Images.InsecureRegistries = append(cfg.Images.InsecureRegistries, h)
	}
	if hooks != nil {
		cfg.Hooks.URL = hookURL
	}
	if mod != nil {
		mod(&cfg, addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.New(ctx, daemon.Options{
		Config: cfg, Listen: addr, GitLab: gl, Logger: slog.New(slog.DiscardHandler),
		// Past net/http's 5 s grace for a connection that sent no request
		// yet: Chromium opens such connections ahead of need, and the
		// drain waits for them that long.
		ReconcileInterval: time.Minute, PollInterval: 100 * time.Millisecond, DrainTimeout: 10 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	s := &served{srv: srv, url: "http://" + addr, engine: d.Engine(), state: cfg.State}
	// Ready once the scan is loaded.
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case err := <-done:
			done <- err // for the clean-up, which waits for it
			t.Fatalf("daemon ended before it was ready: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not ready after %s", startTimeout)
		}
	}
}

// browser is the shared headless Chromium (internal/browsertest) under
// the short names these tests use.
type browser struct {
	*browsertest.Browser
	ctx context.Context // the tab's, for chromedp actions
}

// newBrowser starts a fresh headless Chromium for the test.
func newBrowser(t testing.TB) *browser {
	t.Helper()
	b := browsertest.New(t)
	return &browser{Browser: b, ctx: b.Context()}
}

func (b *browser) errors() []string                        { return b.Errors() }
func (b *browser) open(t testing.TB, url string)           { t.Helper(); b.Open(t, url) }
func (b *browser) waitFor(t testing.TB, what, pred string) { t.Helper(); b.WaitFor(t, what, pred) }
func eval[T any](t testing.TB, b *browser, expr string) T {
	t.Helper()
	return browsertest.Eval[T](t, b.Browser, expr)
}

// screenshot writes the visible page (with full, the whole page) to
// docs/screenshots/name.png when screenshots are being updated
// (-update-screenshots or DEPSD_UPDATE_SCREENSHOTS).
func (b *browser) screenshot(t testing.TB, name string, full ...bool) {
	t.Helper()
	if !*updateScreenshots && !browsertest.UpdateScreenshots() {
		return
	}
	b.Screenshot(t, filepath.Join("..", "docs", "screenshots", name+".png"), len(full) > 0 && full[0])
}

// projectsPictured lists the data-project names of the graph picture.
const projectsPictured = `Array.from(document.querySelectorAll("figure.graph svg [data-project]")).map(e => e.dataset.project).sort()`

// memberState is the state the open page shows for a chain member.
func memberState(project string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-member=%q]') || {dataset: {}}).dataset.state`, project)
}

func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	// A nightly rebuild of the base, and a vendor image from a real local
	// registry that the legacy app is rebuilt after.
	reg := registrytest.Start(t)
	vendor := reg + "/vendor/runtime:2"
	registrytest.Push(t, vendor)
	s := serve(t, sample, history, hookStates, scheduler.Config{
		Schedules: []scheduler.ScheduleSpec{{Project: "acme/images/base", Cron: "0 3 * * *", Timezone: "Europe/Zurich"}},
		Watch:     []scheduler.WatchSpec{{Image: vendor, Projects: []string{"acme/apps/legacy"}}},
	})
	base := "acme/images/base"

	// History: a chain that finished, and one blocked by a failure.
	finished := s.rebuild(t, "acme/tools/ci")
	s.drive(t, "acme/tools/ci", "running", "success")
	s.waitChain(t, finished, chain.Finished)
	blocked := s.rebuild(t, "acme/apps/legacy")
	s.drive(t, "acme/apps/legacy", "failed")
	s.waitChain(t, blocked, chain.Blocked)

	// A chain runs while the pages are looked at: base's pipeline is
	// driven by hand, the others wait for it.
	id, err := s.engine.Rebuild(context.Background(), base, chain.Reason{Kind: chain.ReasonRebuild, Detail: "browser test"})
	if err != nil {
		t.Fatal(err)
	}
	pipeline := waitPipeline(t, s, base)
	if err := s.srv.SetPipelineStatus(pipeline, "running"); err != nil {
		t.Fatal(err)
	}

	t.Run("running member turns success without a reload", func(t *testing.T) {
		b.open(t, fmt.Sprintf("%s/chains/%d", s.url, id))
		b.waitFor(t, "base shown running", memberState(base)+` === "running"`)
		b.screenshot(t, "chain")
		eval[bool](t, b, `(window.depsdNotReloaded = true)`)
		if err := s.srv.SetPipelineStatus(pipeline, "success"); err != nil {
			t.Fatal(err)
		}
		b.waitFor(t, "base shown success", memberState(base)+` === "success"`)
		b.waitFor(t, "ruby triggered", memberState("acme/images/ruby")+` === "triggered"`)
		if !eval[bool](t, b, `window.depsdNotReloaded === true`) {
			t.Error("the page was reloaded to show the change")
		}
		if text := eval[string](t, b, `document.querySelector('tr[data-member="acme/images/base"] .member-state').textContent`); !strings.Contains(text, "✓") {
			t.Errorf("success is told by colour only: %q", text)
		}
	})

	t.Run("chains page lists the running chain first", func(t *testing.T) {
		b.open(t, s.url+"/")
		active := eval[[]string](t, b, `Array.from(document.querySelectorAll("#active-chains section.chain")).map(e => e.id)`)
		if want := []string{fmt.Sprintf("chain-%d", id), fmt.Sprintf("chain-%d", blocked)}; !slices.Equal(active, want) {
			t.Errorf("active chains shown %v, want %v (running first)", active, want)
		}
		if text := eval[string](t, b, fmt.Sprintf(`document.querySelector("#chain-%d").textContent`, blocked)); !strings.Contains(text, "✗ failed") || !strings.Contains(text, "failed") {
			t.Errorf("the blocked chain does not say what failed: %q", text)
		}
		history := eval[string](t, b, `document.querySelector("table.history").textContent`)
		if !strings.Contains(history, "acme/tools/ci") || !strings.Contains(history, "✓ finished") {
			t.Errorf("history: %q", history)
		}
		b.screenshot(t, "chains", true)
	})

	t.Run("graph page shows every project", func(t *testing.T) {
		b.open(t, s.url+"/graph")
		got := eval[[]string](t, b, projectsPictured)
		var want []string
		for _, p := range sample {
			want = append(want, p.Path)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("graph shows %v, want %v", got, want)
		}
		images := eval[[]string](t, b, `Array.from(document.querySelectorAll("figure.graph svg [data-image]")).map(e => e.dataset.image).sort()`)
		if !slices.Contains(images, "docker.io/library/debian:bookworm-slim") {
			t.Errorf("external base images: %v", images)
		}
		cycle := eval[[]string](t, b, `Array.from(document.querySelectorAll("figure.graph svg .dg-cycle[data-project]")).map(e => e.textContent).sort()`)
		if !slices.Equal(cycle, []string{"acme/misc/left: on a dependency cycle, never rebuilt by a chain↻ acme/misc/left", "acme/misc/right: on a dependency cycle, never rebuilt by a chain↻ acme/misc/right"}) {
			t.Errorf("cycle marks: %q", cycle)
		}
		b.screenshot(t, "graph")
	})

	t.Run("focus view of a base shows exactly its downstreams", func(t *testing.T) {
		b.open(t, s.url+"/graph?focus="+base)
		got := eval[[]string](t, b, projectsPictured)
		want := []string{"acme/apps/docs", "acme/apps/shop", base, "acme/images/ruby", "acme/tools/ci", "acme/tools/lint", "acme/tools/scan"}
		if !slices.Equal(got, want) {
			t.Errorf("focus on %s shows %v, want %v", base, got, want)
		}
		listed := eval[[]string](t, b, `Array.from(document.querySelectorAll("#downstream-list a")).map(a => a.textContent)`)
		if !slices.Equal(listed, slices.DeleteFunc(slices.Clone(want), func(p string) bool { return p == base })) {
			t.Errorf("downstream list: %v", listed)
		}
		b.screenshot(t, "graph-focus")
	})

	t.Run("keyboard reaches the picture's projects", func(t *testing.T) {
		b.open(t, s.url+"/graph")
		// Tab until a project of the picture has the focus.
		for range 40 {
			ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
			err := chromedp.Do(ctx, chromedp.KeyEvent("\t"))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if eval[bool](t, b, `!!document.activeElement.closest("svg [data-project]")`) {
				return
			}
		}
		t.Error("no project of the graph picture can be reached with Tab")
	})

	t.Run("project page shows files, warnings and the estimate", func(t *testing.T) {
		b.open(t, s.url+"/projects/"+base)
		est := eval[string](t, b, `document.querySelector("#estimate").textContent`)
		// base 6 → ruby 10 → shop 13 = 29m; docs and ci have no history.
		for _, want := range []string{"7 projects in 4 waves", "29m00s", "acme/images/base → acme/images/ruby → acme/apps/shop"} {
			if !strings.Contains(est, want) {
				t.Errorf("estimate %q lacks %q", est, want)
			}
		}
		if n := eval[int](t, b, `document.querySelectorAll("table.file tr.marked").length`); n != 1 {
			t.Errorf("%d marked lines in base's Containerfile, want 1 (the FROM)", n)
		}
		b.screenshot(t, "project")
		b.open(t, s.url+"/projects/acme/apps/legacy")
		if warn := eval[string](t, b, `document.querySelector("#warn-h").parentElement.textContent`); !strings.Contains(warn, "VERSION") {
			t.Errorf("legacy's unresolved ARG is not shown: %q", warn)
		}
	})

	t.Run("health page", func(t *testing.T) {
		b.open(t, s.url+"/health")
		if text := eval[string](t, b, `document.querySelector("main").textContent`); !strings.Contains(text, "Last scan") || !strings.Contains(text, "10 (") {
			t.Errorf("health page: %q", text)
		}
		// depsd looks at the hooks once at start; wait for that look.
		for try := 0; !eval[bool](t, b, `document.querySelector("main").textContent.includes("Checked")`); try++ {
			if try == 100 {
				t.Fatal("the webhook check at start never showed")
			}
			time.Sleep(100 * time.Millisecond)
			b.open(t, s.url+"/health")
		}
		rows := eval[map[string]string](t, b, `Object.fromEntries(Array.from(document.querySelectorAll("table.hooks tbody tr")).map(r => [r.querySelector("th").textContent, r.querySelector(".state").textContent]))`)
		for _, p := range sample {
			want := "✓ ok"
			switch hookStates[p.Path] {
			case "missing":
				want = "∅ missing"
			case "disabled":
				want = "✗ disabled"
			case "failing":
				want = "! failing"
			}
			if rows[p.Path] != want {
				t.Errorf("hook of %s shown %q, want %q", p.Path, rows[p.Path], want)
			}
		}
		replicas := eval[string](t, b, `document.querySelector("#replicas-h").parentElement.textContent`)
		if !strings.Contains(replicas, "★ the leader") || !strings.Contains(replicas, "Leader: ") {
			t.Errorf("replicas: %q", replicas)
		}
		watch := eval[string](t, b, `document.querySelector("#watch-h").parentElement.textContent`)
		if !strings.Contains(watch, vendor) || !strings.Contains(watch, "acme/apps/legacy") {
			t.Errorf("watched images: %q", watch)
		}
		sched := eval[string](t, b, `document.querySelector("#sched-h").parentElement.textContent`)
		if !strings.Contains(sched, "0 3 * * *") || !strings.Contains(sched, "Europe/Zurich") {
			t.Errorf("schedules: %q", sched)
		}
		b.screenshot(t, "health", true)
	})

	t.Run("a missing project is a clear 404", func(t *testing.T) {
		b.open(t, s.url+"/projects/acme/nope")
		if text := eval[string](t, b, `document.querySelector("main").textContent`); !strings.Contains(text, "acme/nope is not in the scanned graph") {
			t.Errorf("404 page: %q", text)
		}
	})

	// Every page loaded above, and the live updates, ran without an error
	// on the console. The 404 page's own status is the one expected error.
	var unexpected []string
	for _, e := range b.errors() {
		if !strings.Contains(e, "/projects/acme/nope") {
			unexpected = append(unexpected, e)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(unexpected, "\n"))
	}
}

// rebuild starts a chain at project, as `depsd rebuild` does.
func (s *served) rebuild(t testing.TB, project string) int64 {
	t.Helper()
	id, err := s.engine.Rebuild(context.Background(), project, chain.Reason{Kind: chain.ReasonRebuild, Detail: "browser test"})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// drive moves the pipeline depsd created for project through statuses.
func (s *served) drive(t testing.TB, project string, statuses ...string) {
	t.Helper()
	id := waitPipeline(t, s, project)
	for _, st := range statuses {
		if err := s.srv.SetPipelineStatus(id, st); err != nil {
			t.Fatal(err)
		}
	}
}

// waitChain waits until chain id is in state.
func (s *served) waitChain(t testing.TB, id int64, state chain.State) {
	t.Helper()
	deadline := time.Now().Add(pageTimeout)
	for {
		c, err := s.engine.Chain(context.Background(), id)
		if err == nil && c.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chain %d not %s within %s: %+v, %v", id, state, pageTimeout, c, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPipeline waits for depsd to create a pipeline of project.
func waitPipeline(t testing.TB, s *served, project string) int64 {
	t.Helper()
	deadline := time.Now().Add(pageTimeout)
	for time.Now().Before(deadline) {
		for _, p := range s.srv.Pipelines(project) {
			if p.Source == "api" {
				return p.ID
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("depsd created no pipeline of %s within %s", project, pageTimeout)
	return 0
}
