// Package demo runs depsd end to end against a simulated GitLab, in one
// process and with no setup: it seeds a sample instance, lets the daemon
// scan it and install its webhooks, starts a rebuild of the base image, and
// prints the chain as the simulated pipelines run and report back over real
// HTTP webhooks. It is what `depsd demo` runs; with Stay it keeps the
// daemon and its dashboard running afterwards, until interrupted.
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// Options tune the demo.
type Options struct {
	// PipelineTime is how long each simulated pipeline runs. Default 1 s.
	PipelineTime time.Duration
	// StateDir holds the state file. Required (a temporary directory).
	StateDir string
	// Timeout bounds the demo's story (with Stay, not the serving after
	// it). Default 2 minutes.
	Timeout time.Duration
	// Stay keeps depsd serving (its dashboard) after the story, until ctx
	// ends.
	Stay bool
	// Listen is depsd's address; default 127.0.0.1:0 (a free port).
	Listen string
	// Logger receives the daemon's logs. Default: discard.
	Logger *slog.Logger
	// Registry is the host:port of a registry that takes anonymous
	// pushes over plain HTTP (Debian's docker-registry, or
	// podman run -p 127.0.0.1:5000:5000 docker.io/library/registry:2):
	// the simulated pipelines push their images there and the demo shows
	// each member's verification (images.go). Empty: no images, no
	// verification.
	Registry string
	// Seeded, if set, is called with the simulated GitLab once its
	// projects exist, so that a test can count what it records.
	Seeded func(*gitlabtest.Server)
}

// root is the project whose rebuild the demo shows.
const root = "infra/images/base"

// Run runs the demo and writes its story to out. It returns an error if
// the chain does not finish with every member built once.
func Run(ctx context.Context, out io.Writer, opts Options) error {
	if opts.PipelineTime <= 0 {
		opts.PipelineTime = time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if !opts.Stay {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}

	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-demo", RegistryHost: opts.Registry})
	defer srv.Close()
	if err := seed(srv, opts.PipelineTime, opts.Registry); err != nil {
		return err
	}
	if opts.Seeded != nil {
		opts.Seeded(srv)
	}
	fmt.Fprintf(out, "simulated GitLab with %d projects at %s (pipelines take %s)\n", len(sampleProjects()), srv.URL, opts.PipelineTime)

	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Logger: opts.Logger})
	if err != nil {
		return err
	}
	cfg := config.Defaults()
	cfg.GitLab.URL = srv.URL
	cfg.GitLab.Token = srv.Token
	cfg.Scope.Groups = []string{"infra", "apps"}
	cfg.State = filepath.Join(opts.StateDir, "depsd.db")
	cfg.Hooks.Secret = "demo-webhook-secret"
	// Without a registry the demo's projects publish no image: verifying
	// would look registry.example.com up.
	cfg.Images.Verify = config.VerifyOff
	if opts.Registry != "" {
		// Every project but the docs site publishes its image; the base
		// has nothing to be judged against (FROM scratch here).
		cfg.Images.Verify = config.VerifyEnforce
		cfg.Images.Publish = []string{"{registry}/{path}:latest"}
		cfg.Images.Projects = []config.ImagesOverride{{Match: "apps/docs", Publish: []string{}}}
		cfg.Images.InsecureRegistries = []string{opts.Registry}
		if err := prebuildBase(ctx, srv, opts.Registry, cfg.State); err != nil {
			return fmt.Errorf("demo registry %s: %w", opts.Registry, err)
		}
		fmt.Fprintf(out, "pipelines push their images to %s; depsd verifies each member's images after it succeeds\n", opts.Registry)
	}

	listening := make(chan string, 1)
	d, err := daemon.New(ctx, daemon.Options{
		Config: cfg, Listen: opts.Listen, GitLab: gl, Logger: opts.Logger,
		ReconcileInterval: 5 * time.Second, PollInterval: 250 * time.Millisecond, DrainTimeout: 5 * time.Second,
		Listening: func(addr string) { listening <- addr },
	})
	if err != nil {
		return err
	}
	runCtx, stopDaemon := context.WithCancel(ctx)
	defer stopDaemon()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return d.Run(gctx) })
	g.Go(func() error {
		defer stopDaemon()
		// The simulated GitLab goes first: its webhook client's idle
		// connections to the daemon would hold up the daemon's drain.
		defer srv.Close()
		storyCtx, cancel := context.WithTimeout(gctx, opts.Timeout)
		defer cancel()
		if err := story(storyCtx, out, d, gl, srv, listening, cfg); err != nil || !opts.Stay {
			return err
		}
		fmt.Fprintln(out, "\ndepsd keeps serving the dashboard (and the simulated GitLab runs on); press Ctrl-C to stop")
		<-gctx.Done()
		return nil
	})
	return g.Wait()
}

// story is what the demo tells once the daemon runs.
func story(ctx context.Context, out io.Writer, d *daemon.Daemon, gl *gitlab.Client, srv *gitlabtest.Server, listening <-chan string, cfg config.Config) error {
	var addr string
	select {
	case addr = <-listening:
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintf(out, "depsd serve listening on http://%s (scan done)\n", addr)
	fmt.Fprintf(out, "dashboard: http://%s/\n", addr)

	rep, err := d.SyncHooks(ctx, "http://"+addr+"/hooks/gitlab")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "webhooks installed on %d projects\n", rep.Count(gitlab.HookCreated))

	graph, err := d.Graph(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nrebuilding %s; depsd will build, in waves:\n", root)
	for i, wave := range chain.RebuildPlan(graph, root) {
		fmt.Fprintf(out, "  wave %d: %s\n", i, strings.Join(wave, ", "))
	}
	fmt.Fprintln(out)

	engine := d.Engine()
	start := time.Now()
	id, err := engine.Rebuild(ctx, root, chain.Reason{Kind: chain.ReasonRebuild, Detail: "depsd demo"})
	if err != nil {
		return err
	}
	view, err := follow(ctx, out, engine, id, start)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	// What GitLab recorded, not what the engine believes: the pipelines
	// created through the API for this chain, per project.
	created := createdPipelines(srv, id)
	printFinal(out, view, created, graphOrder(chain.RebuildPlan(graph, root)))
	if view.State != chain.Finished {
		return fmt.Errorf("chain %d ended %s", id, view.State)
	}
	rebuilt := 0 // members rebuilt without cache after a stale verdict
	for _, m := range view.Members {
		want := 1
		if m.NoCache {
			want, rebuilt = 2, rebuilt+1
		}
		if created[m.Project] != want {
			return fmt.Errorf("GitLab recorded %d pipelines of %s for chain %d, want %d", created[m.Project], m.Project, id, want)
		}
	}
	if extra := len(created) - len(view.Members); extra > 0 {
		return fmt.Errorf("GitLab recorded pipelines for %d projects outside chain %d", extra, id)
	}
	once := "each built exactly once"
	if rebuilt > 0 {
		once = fmt.Sprintf("each built once and %d once more, without cache, as its images were stale", rebuilt)
	}
	fmt.Fprintf(out, "\nchain %d finished in %s: %d projects, %s (as GitLab recorded), in dependency order\n",
		id, time.Since(start).Round(100*time.Millisecond), len(view.Members), once)
	return nil
}

// createdPipelines counts, per project, the pipelines the fake GitLab
// recorded as created through the API for chain id.
func createdPipelines(srv *gitlabtest.Server, id int64) map[string]int {
	n := map[string]int{}
	for _, p := range srv.Projects() {
		for _, pl := range srv.Pipelines(p) {
			if pl.Source == "api" && pl.Variables[chain.VarChainID] == strconv.FormatInt(id, 10) {
				n[p]++
			}
		}
	}
	return n
}

// follow prints every member state change until the chain ends, and the
// verdict on a member's images when depsd verifies them (with a registry).
func follow(ctx context.Context, out io.Writer, engine *chain.Engine, id int64, start time.Time) (chain.ChainView, error) {
	return followWith(ctx, out, engine, id, start, nil)
}

// followWith is follow, with what onSuccess returns for a member that
// succeeded added to its line (the real demo's digest and verification).
func followWith(ctx context.Context, out io.Writer, engine *chain.Engine, id int64, start time.Time, onSuccess func(project string) string) (chain.ChainView, error) {
	type seenAs struct {
		state    chain.MemberState
		pipeline int64
		noCache  bool
		verified chain.ImageState
	}
	seen := map[string]seenAs{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		view, err := engine.Chain(ctx, id)
		if err != nil {
			return view, err
		}
		for _, m := range view.Members {
			was := seen[m.Project]
			now := seenAs{m.State, m.PipelineID, m.NoCache, m.Verified}
			seen[m.Project] = now
			at := fmt.Sprintf("+%.1fs", time.Since(start).Seconds())
			if m.Verified != was.verified && m.Verified != "" {
				v := "images " + string(m.Verified)
				if m.Verified != chain.ImageFresh {
					v += ": " + m.VerifyDetail
				}
				fmt.Fprintf(out, "  %7s  %-20s %-9s  %s\n", at, m.Project, "verified", v)
			}
			if now.state == was.state && now.pipeline == was.pipeline && now.noCache == was.noCache {
				continue
			}
			line := fmt.Sprintf("  %7s  %-20s %-9s", at, m.Project, m.State)
			switch {
			case m.State == chain.Pending && m.NoCache, m.State == chain.Stale:
				line += "  " + m.Why // why it is rebuilt, or why it stopped
			case m.PipelineID != 0 && m.State != chain.Waiting:
				line += fmt.Sprintf("  pipeline %d", m.PipelineID)
			case m.Why != "":
				line += "  " + m.Why
			}
			if m.NoCache && m.State != chain.Pending {
				line += " (without cache: DEPSD_NO_CACHE=1)"
			}
			if m.State == chain.Success && onSuccess != nil {
				line += onSuccess(m.Project)
			}
			fmt.Fprintln(out, strings.TrimRight(line, " "))
		}
		if view.State != chain.Running {
			return view, nil
		}
		select {
		case <-ctx.Done():
			return view, errors.Join(ctx.Err(), fmt.Errorf("chain %d still %s", id, view.State))
		case <-tick.C:
		}
	}
}

// graphOrder ranks projects by wave, so tables read in build order.
func graphOrder(waves [][]string) map[string]int {
	rank := map[string]int{}
	for _, w := range waves {
		for _, p := range w {
			rank[p] = len(rank)
		}
	}
	return rank
}

// printFinal prints the chain's members in build order with what GitLab
// recorded, and the verdict on their images once one has one.
func printFinal(out io.Writer, v chain.ChainView, created map[string]int, rank map[string]int) {
	verified := slices.ContainsFunc(v.Members, func(m chain.MemberView) bool { return m.Verified != "" })
	fmt.Fprintf(out, "chain %d: %s\n", v.ID, v.State)
	members := slices.Clone(v.Members)
	slices.SortStableFunc(members, func(a, b chain.MemberView) int { return rank[a.Project] - rank[b.Project] })
	for _, m := range members {
		ups := "-"
		if len(m.Upstreams) > 0 {
			ups = strings.Join(m.Upstreams, ", ")
		}
		if verified {
			fmt.Fprintf(out, "  %-20s %-8s images %-8s pipeline %-4d created on GitLab: %d  after %s\n", m.Project, m.State, cmp.Or(string(m.Verified), "-"), m.PipelineID, created[m.Project], ups)
			continue
		}
		fmt.Fprintf(out, "  %-20s %-8s pipeline %-4d created on GitLab: %d  after %s\n", m.Project, m.State, m.PipelineID, created[m.Project], ups)
	}
}
