package e2e_test

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// The crash test's instance: four waves below an outside root.
//
//	base → ruby → app → web
//	base → tools → lint
const (
	tools = "acme/tools"
	lint  = "acme/lint"
	web   = "acme/web"
)

func waves() []proj {
	const d = 400 * time.Millisecond
	return []proj{
		{path: base, duration: d},
		{path: ruby, from: []string{base}, duration: d},
		{path: tools, from: []string{base}, duration: d},
		{path: app, from: []string{ruby}, duration: d},
		{path: lint, from: []string{tools}, duration: d},
		{path: web, from: []string{app}, duration: d},
	}
}

// The real depsd process is SIGKILLed in the middle of a chain, and the
// webhooks GitLab sends while it is down fail. A new process on the same
// state file and address catches up through the reconciler, and the chain
// finishes with every member built exactly once.
func TestServeSurvivesSIGKILLMidChain(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, waves()...)
	setup := newServeSetup(t, srv)
	first := setup.start(t)
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))

	w.runPipeline(base)
	// Kill once depsd has recorded the pipelines of the second wave, so
	// that no action is claimed-but-unrecorded at that moment (that window
	// is the chain package's outbox tests' business).
	w.onlyChain("building ruby and tools", func(c chain.ChainView) bool {
		for _, p := range []string{ruby, tools} {
			m, ok := member(c, p)
			if !ok || m.PipelineID == 0 || (m.State != chain.Triggered && m.State != chain.MemberRunning) {
				return false
			}
		}
		return true
	})
	if err := first.signal(t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		t.Fatalf("depsd exited cleanly on SIGKILL?")
	}

	// While depsd is down, ruby and tools finish and GitLab fails to
	// deliver their success (or, had it disabled the failing hook by then,
	// sends nothing at all).
	w.waitUntil("ruby and tools finished while depsd was down", chainTimeout, func() bool {
		for _, p := range []string{ruby, tools} {
			ps := w.apiPipelines(p)
			if len(ps) != 1 || ps[0].FinishedAt.IsZero() {
				return false
			}
			if d, ok := w.deliveryOf(ps[0].ID, "success"); ok && d.State != gitlabtest.DeliveryFailed {
				return false
			}
		}
		return true
	})

	failed := 0
	for _, d := range srv.Deliveries() {
		if d.State == gitlabtest.DeliveryFailed {
			failed++
		}
	}
	if failed == 0 {
		t.Fatalf("test setup: no webhook failed while depsd was down\n%s", w.dump())
	}

	setup.start(t)
	view := w.onlyChain("finished", inState(chain.Finished))

	if n := len(w.apiPipelines(base)); n != 0 {
		t.Errorf("depsd created %d pipelines of the root base, want none (the developer's started the chain)\n%s", n, w.dump())
	}
	for _, p := range []string{ruby, tools, app, lint, web} {
		w.pipelineOf(p)
		if m, _ := member(view, p); m.Builds != 1 || m.State != chain.Success {
			t.Errorf("chain member %s = %+v, want success after 1 build", p, m)
		}
	}
	w.notBefore(w.pipelineOf(app), w.pipelineOf(ruby), app, ruby)
	w.notBefore(w.pipelineOf(lint), w.pipelineOf(tools), lint, tools)
	w.notBefore(w.pipelineOf(web), w.pipelineOf(app), web, app)
	// The last webhooks reach the restarted depsd; a late look finds no
	// extra pipeline either.
	w.waitUntil("GitLab is idle", stepTimeout, func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return srv.WaitIdle(ctx) == nil
	})
	for _, p := range []string{ruby, tools, app, lint, web} {
		w.pipelineOf(p)
	}
}

// SIGTERM makes depsd serve drain and exit 0 within seconds, also in the
// middle of a chain.
func TestServeExitsCleanlyOnSIGTERM(t *testing.T) {
	t.Parallel()
	srv := newGitLab(t, linear()...)
	setup := newServeSetup(t, srv)
	p := setup.start(t)
	w := setup.world(t)
	w.syncHooks(newClient(t, srv))

	w.runPipeline(base)
	w.waitUntil("ruby was triggered", chainTimeout, func() bool { return len(w.apiPipelines(ruby)) == 1 })
	if err := p.signal(t, syscall.SIGTERM, 5*time.Second); err != nil {
		t.Fatalf("depsd serve exited with %v (code %d) on SIGTERM, want 0\n%s", err, exitCode(err), setup.logs.tail(40))
	}
}

// `depsd demo` runs the whole story with no setup and says every project
// was built exactly once.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, depsdBinary(t), "demo", "--pipeline-time", "100ms")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("depsd demo: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "each built exactly once") {
		t.Errorf("depsd demo did not report every project built once:\n%s", out)
	}
}
