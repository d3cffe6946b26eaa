package chain_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/storetest"
)

// glEnv runs the engine against the fake GitLab over HTTP, through the real
// client, so error classification is GitLab's.
type glEnv struct {
	t      *testing.T
	ctx    context.Context
	srv    *gitlabtest.Server
	client *gitlab.Client
	store  *store.Store
	path   string
	engine *chain.Engine
	clock  *clock
	keys   int
	cfg    chain.Config // the engines' options besides store, GitLab, graph and clock
}

// newGitLabEnv builds projects g/<name> from "up>down" edges; names listed
// in empty get an empty repository (creating a pipeline: "Reference not found").
func newGitLabEnv(t *testing.T, empty []string, edges ...string) *glEnv {
	t.Helper()
	return newGitLabEnvWith(t, glOptions{empty: empty}, edges...)
}

// glOptions vary newGitLabEnvWith's world.
type glOptions struct {
	empty []string // projects with an empty repository
	// sharedClock: the fake GitLab stamps its times with the engine's
	// clock (else the wall clock), so that a test moving the clock moves
	// GitLab's created_at too.
	sharedClock bool
	cfg         chain.Config // the engines' Mode, SendConcurrency, ...
	// visibility is every project's, on GitLab and as scanned ("": the
	// fake's default, private, and none recorded).
	visibility string
}

// newGitLabEnvWith is newGitLabEnv with options.
func newGitLabEnvWith(t *testing.T, o glOptions, edges ...string) *glEnv {
	t.Helper()
	clk := &clock{t: time.Now().UTC()}
	var srvOpts gitlabtest.Options
	if o.sharedClock {
		srvOpts.Now = clk.Now
	}
	srv := gitlabtest.New(srvOpts)
	empty := o.empty
	t.Cleanup(srv.Close)
	client, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	path := storetest.State(t)
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ups := map[string][]string{}
	var names []string
	add := func(n string) {
		for _, x := range names {
			if x == n {
				return
			}
		}
		names = append(names, n)
	}
	for _, ed := range edges {
		up, down, _ := strings.Cut(ed, ">")
		add("g/" + up)
		add("g/" + down)
		ups["g/"+down] = append(ups["g/"+down], "g/"+up)
	}
	var projects []scan.Project
	for _, n := range names {
		isEmpty := false
		for _, x := range empty {
			isEmpty = isEmpty || "g/"+x == n
		}
		id, err := srv.AddProject(gitlabtest.Project{Path: n, EmptyRepo: isEmpty, Files: map[string]string{"README": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		p := scan.Project{ID: id, Path: n, DefaultBranch: "main", Visibility: o.visibility}
		if o.visibility != "" {
			if err := srv.SetVisibility(n, o.visibility); err != nil {
				t.Fatal(err)
			}
		}
		for _, u := range ups[n] {
			p.Dependencies = append(p.Dependencies, deps.Dependency{Kind: deps.KindGitLabDeps, Ref: u, Project: u})
		}
		projects = append(projects, p)
	}
	if err := s.ApplyScan(t.Context(), projects, scan.Meta{StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	g := &glEnv{t: t, ctx: t.Context(), srv: srv, client: client, store: s, path: path, clock: clk, cfg: o.cfg}
	g.engine = g.newEngine(s)
	return g
}

func (g *glEnv) newEngine(s *store.Store) *chain.Engine {
	cfg := g.cfg
	cfg.Store, cfg.GitLab, cfg.Graph, cfg.Now = s, g.client, s.Graph, g.clock.Now
	if cfg.Statuses != nil && cfg.Statuses.GitLab == nil {
		st := *cfg.Statuses
		st.GitLab = g.client
		cfg.Statuses = &st
	}
	en, err := chain.New(cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	return en
}

func (g *glEnv) send() int {
	g.t.Helper()
	n, err := g.engine.SendPending(g.ctx)
	if err != nil {
		g.t.Fatal(err)
	}
	return n
}

// end moves project's newest pipeline to status and delivers the event.
func (g *glEnv) end(project, status string) {
	g.t.Helper()
	ps := g.srv.Pipelines(project)
	if len(ps) == 0 {
		g.t.Fatalf("no pipeline for %s", project)
	}
	p := ps[len(ps)-1]
	if err := g.srv.SetPipelineStatus(p.ID, status); err != nil {
		g.t.Fatal(err)
	}
	g.keys++
	ev := chain.PipelineEvent{ProjectID: p.ProjectID, Project: project, PipelineID: p.ID, Status: status, Ref: p.Ref,
		Source: p.Source, Variables: p.Variables}
	if _, err := g.engine.RecordEvent(g.ctx, "k"+strings.Repeat("x", g.keys), chain.Event{Pipeline: &ev}); err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.engine.ProcessInbox(g.ctx); err != nil {
		g.t.Fatal(err)
	}
}

func (g *glEnv) states(id int64) chain.ChainView {
	g.t.Helper()
	v, err := g.engine.Chain(g.ctx, id)
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func TestOverHTTP(t *testing.T) {
	t.Parallel()
	t.Run("linear chain", func(t *testing.T) {
		g := newGitLabEnv(t, nil, "base>app")
		id, err := g.engine.Rebuild(g.ctx, "g/base", chain.Reason{})
		if err != nil {
			t.Fatal(err)
		}
		g.send()
		g.end("g/base", "success")
		g.send()
		g.end("g/app", "success")
		v := g.states(id)
		if v.State != chain.Finished || states(v) != "g/app=success g/base=success" {
			t.Fatalf("chain = %s: %s", v.State, states(v))
		}
		ps := g.srv.Pipelines("g/app")
		if len(ps) != 1 || ps[0].Source != "api" || ps[0].Variables[chain.VarUpstream] != "g/base" ||
			ps[0].Variables[chain.VarChainID] != "1" || ps[0].Variables[chain.VarActionID] == "" {
			t.Errorf("app pipelines = %+v", ps)
		}
	})
	t.Run("permanent errors fail the member and block", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			setup func(*glEnv)
			empty []string
			want  string
		}{
			{"403 archived", func(g *glEnv) { g.srv.ArchiveProject("g/app", true) }, nil, "403"},
			{"400 reference not found", func(*glEnv) {}, []string{"app"}, "Reference not found"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := newGitLabEnv(t, tc.empty, "base>app", "app>leaf")
				tc.setup(g)
				id, _ := g.engine.Rebuild(g.ctx, "g/base", chain.Reason{})
				g.send()
				g.end("g/base", "success")
				g.send()
				v := g.states(id)
				if states(v) != "g/app=failed g/base=success g/leaf=blocked" || v.State != chain.Blocked {
					t.Fatalf("chain %s: %s", v.State, states(v))
				}
				if why := member(v, "g/app").Why; !strings.Contains(why, "create pipeline") || !strings.Contains(why, tc.want) {
					t.Errorf("app why = %q", why)
				}
				if why := member(v, "g/leaf").Why; why != "blocked: g/app failed" {
					t.Errorf("leaf why = %q", why)
				}
			})
		}
	})
	t.Run("5xx and throttling are retried", func(t *testing.T) {
		g := newGitLabEnv(t, nil, "base>app")
		g.srv.Fail(gitlabtest.Fault{Endpoint: "POST /projects/:id/pipeline", Status: http.StatusServiceUnavailable})
		id, _ := g.engine.Rebuild(g.ctx, "g/base", chain.Reason{})
		if n := g.send(); n != 0 {
			t.Fatalf("sent %d through a 503", n)
		}
		if why := member(g.states(id), "g/base").Why; !strings.Contains(why, "503") {
			t.Errorf("base why = %q", why)
		}
		g.clock.Advance(10 * time.Second)
		if n := g.send(); n != 1 {
			t.Fatalf("sent %d after the backoff, want 1", n)
		}
		if n := len(g.srv.Pipelines("g/base")); n != 1 {
			t.Errorf("%d pipelines of base, want 1", n)
		}
		// The retry looked for the pipeline first (the 503 could have hidden a creation).
		if g.srv.Requests("GET /projects/:id/pipelines") == 0 {
			t.Error("retry did not look for an existing pipeline")
		}
	})
	t.Run("crash after create is adopted after restart", func(t *testing.T) {
		g := newGitLabEnv(t, nil, "base>app")
		id, _ := g.engine.Rebuild(g.ctx, "g/base", chain.Reason{})
		crashCtx, crash := context.WithCancel(g.ctx)
		chain.SetSendHook(g.engine, func(a chain.Action) {
			// The worker's request reaches GitLab; then the process dies.
			if _, err := g.client.CreatePipeline(senderCtx(g.ctx), a.ProjectID, a.Ref, gitlab.CreateOptions{Variables: a.Variables(a.ChainID)}); err != nil {
				t.Error(err)
			}
			crash()
		})
		if _, err := g.engine.SendPending(crashCtx); err == nil {
			t.Fatal("SendPending survived the crash")
		}
		if n := len(g.srv.Pipelines("g/base")); n != 1 {
			t.Fatalf("%d pipelines before restart", n)
		}
		s2, err := store.Open(g.ctx, g.path)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		g.engine = g.newEngine(s2)
		g.clock.Advance(6 * time.Minute) // the dead worker's lease
		if n := g.send(); n != 1 {
			t.Fatalf("sent %d after restart, want 1 (adopted)", n)
		}
		if n := len(g.srv.Pipelines("g/base")); n != 1 {
			t.Fatalf("%d pipelines of base after restart, want 1", n)
		}
		v := g.states(id)
		if m := member(v, "g/base"); m.State != chain.Triggered || m.PipelineID != g.srv.Pipelines("g/base")[0].ID {
			t.Errorf("base = %+v", m)
		}
	})
	t.Run("reconciler finds a success whose webhook was lost", func(t *testing.T) {
		g := newGitLabEnv(t, nil, "base>app")
		id, _ := g.engine.Rebuild(g.ctx, "g/base", chain.Reason{})
		g.send()
		p := g.srv.Pipelines("g/base")[0]
		if err := g.srv.SetPipelineStatus(p.ID, "success"); err != nil { // no hook registered: nothing is delivered
			t.Fatal(err)
		}
		if n, err := g.engine.Reconcile(g.ctx); n != 1 || err != nil {
			t.Fatalf("Reconcile = %d, %v", n, err)
		}
		g.send()
		if v := g.states(id); states(v) != "g/app=triggered g/base=success" {
			t.Errorf("chain: %s", states(v))
		}
	})
}

// senderCtx is the context of a request a send hook makes in the sender's
// place: urgent, as the sender's own (the outbox holds the client's normal
// requests while it sends).
func senderCtx(ctx context.Context) context.Context {
	return gitlab.WithPriority(ctx, gitlab.PriorityUrgent)
}
