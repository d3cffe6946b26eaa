package e2e_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// The fleet of docs/chains.md ("Release tags and maintenance branches"):
// base is released by tags and kept on a bookworm branch; ruby follows
// base's releases on main and base's bookworm on its own bookworm; app is
// built FROM ruby.
func newFleet(t *testing.T) *gitlabtest.Server {
	t.Helper()
	const reg = gitlabtest.DefaultRegistryHost
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-e2e"})
	t.Cleanup(srv.Close)
	for path, cf := range map[string]string{
		base: "FROM debian:trixie-slim\n",
		ruby: "FROM " + reg + "/" + base + ":3\n",
		app:  "FROM " + reg + "/" + ruby + ":latest\n",
	} {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": cf}}); err != nil {
			t.Fatal(err)
		}
		if err := srv.SetPipelineBehavior(path, gitlabtest.Behavior{Duration: 400 * time.Millisecond, Outcome: "success", OnTag: true}); err != nil {
			t.Fatal(err)
		}
	}
	for path, cf := range map[string]string{
		base: "FROM debian:bookworm-slim\n",
		ruby: "FROM " + reg + "/" + base + ":bookworm\n",
	} {
		if err := srv.CreateBranch(path, "bookworm"); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.SetFileOn(path, "bookworm", "Containerfile", cf); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.CreateTag(base, "v3.2.1", "main"); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitIdle(t.Context()); err != nil { // the release's own pipeline, before depsd looks
		t.Fatal(err)
	}
	return srv
}

// A release tag of base starts a chain of what the releases publish
// (ruby, on main, then app), across a SIGKILL of depsd serve in its
// middle; a fix on base's maintenance branch rebuilds ruby's maintenance
// branch alone; each member is built once, on its own ref.
func TestReleaseTagAndMaintenanceBranchAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	srv := newFleet(t)
	setup := newServeSetup(t, srv)
	setup.configure(t, `gitlab:
  requests_per_minute: 60000
images:
  verify: "off"
refs:
  - projects: [acme/base, acme/ruby]
    branches: [bookworm]
    tags: "v*"
`)
	first := setup.start(t)
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))

	// The graph of nodes, as GET /api/v1/graph gives it.
	for node, want := range map[string][]string{
		base + "@tags":     {ruby},
		base + "@bookworm": {ruby + "@bookworm"},
		ruby:               {app},
		base:               {},
	} {
		if got := w.downstream(node); !slices.Equal(got, want) {
			t.Errorf("downstream of %s = %q, want %q\n%s", node, got, want, w.dump())
		}
	}

	// The release of base 3.2.2.
	if err := srv.CreateTag(base, "v3.2.2", "main"); err != nil {
		t.Fatal(err)
	}
	w.onlyChain("building ruby", func(c chain.ChainView) bool {
		m, ok := member(c, ruby)
		return len(c.Roots) == 1 && c.Roots[0] == base+"@tags" && ok && m.PipelineID != 0
	})
	if err := first.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatalf("depsd exited cleanly on SIGKILL?")
	}
	setup.start(t)
	view := w.onlyChain("finished", inState(chain.Finished))
	for _, p := range []string{ruby, app} {
		if m, _ := member(view, p); m.Builds != 1 || m.State != chain.Success {
			t.Errorf("chain member %s = %+v, want success after 1 build", p, m)
		}
	}
	if pl := w.pipelineOf(ruby); pl.Ref != "main" {
		t.Errorf("ruby built on %s, want main", pl.Ref)
	}
	w.pipelineOf(app)
	if n := len(w.apiPipelines(base)); n != 0 {
		t.Errorf("depsd created %d pipelines of base, want none (its release started the chain)", n)
	}

	// A fix on base's bookworm branch.
	if _, err := srv.SetFileOn(base, "bookworm", "README", "openssl fix\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.RunPipeline(base, "bookworm", "push"); err != nil {
		t.Fatal(err)
	}
	w.waitUntil("ruby@bookworm built", chainTimeout, func() bool {
		cs, err := w.chains()
		if err != nil {
			return false
		}
		for _, c := range cs {
			if len(c.Roots) == 1 && c.Roots[0] == base+"@bookworm" && c.State == chain.Finished {
				m, ok := member(c, ruby+"@bookworm")
				return ok && m.State == chain.Success
			}
		}
		return false
	})
	ps := w.apiPipelines(ruby)
	if len(ps) != 2 || ps[1].Ref != "bookworm" {
		t.Errorf("ruby's pipelines %+v: want main's then bookworm's", ps)
	}
	if n := len(w.apiPipelines(app)); n != 1 {
		t.Errorf("app built %d times, want once: bookworm is not its base\n%s", n, w.dump())
	}
}
