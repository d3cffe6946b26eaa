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
	// The demo's projects publish no image to a registry yet
	// (docs/verification.md): verifying would look registry.example.com up.
	cfg.Images.Verify = config.VerifyOff

	var images *imageChecker
	if opts.Registry != "" {
		if images, err = newImageChecker(ctx, srv, opts.Registry, cfg.State); err != nil {
			return err
		}
		defer images.Close()
		if err := images.prebuild(ctx); err != nil {
			return fmt.Errorf("demo registry %s: %w", opts.Registry, err)
		}
		fmt.Fprintf(out, "pipelines push their images to %s; each member's images are verified after it succeeds\n", opts.Registry)
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
		if err := story(storyCtx, out, d, gl, srv, images, listening, cfg); err != nil || !opts.Stay {
			return err
		}
		fmt.Fprintln(out, "\ndepsd keeps serving the dashboard (and the simulated GitLab runs on); press Ctrl-C to stop")
		<-gctx.Done()
		return nil
	})
	return g.Wait()
}

// story is what the demo tells once the daemon runs.
func story(ctx context.Context, out io.Writer, d *daemon.Daemon, gl *gitlab.Client, srv *gitlabtest.Server, images *imageChecker, listening <-chan string, cfg config.Config) error {
	var addr string
	select {
	case addr = <-listening:
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintf(out, "depsd serve listening on http://%s (scan done)\n", addr)
	fmt.Fprintf(out, "dashboard: http://%s/\n", addr)

	projects, err := gl.ListProjects(ctx, gitlab.Scope{Groups: cfg.Scope.Groups})
	if err != nil {
		return err
	}
	rep, err := gl.SyncHooks(ctx, projects, gitlab.HookSpec{URL: "http://" + addr + "/hooks/gitlab", SecretToken: cfg.Hooks.Secret}, false)
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
	verdicts := map[string]string{}
	var verified func(ctx context.Context, project string, pipelineID int64) (string, error)
	if images != nil {
		verified = func(ctx context.Context, project string, pipelineID int64) (string, error) {
			r, ok, err := images.check(ctx, project, pipelineID)
			if err != nil || !ok {
				return "", err
			}
			verdicts[project] = string(r.Result.State)
			return verdict(r), nil
		}
	}
	view, err := follow(ctx, out, engine, id, start, verified)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	// What GitLab recorded, not what the engine believes: the pipelines
	// created through the API for this chain, per project.
	created := createdPipelines(srv, id)
	printFinal(out, view, created, graphOrder(chain.RebuildPlan(graph, root)), verdicts)
	if view.State != chain.Finished {
		return fmt.Errorf("chain %d ended %s", id, view.State)
	}
	for _, m := range view.Members {
		if created[m.Project] != 1 {
			return fmt.Errorf("GitLab recorded %d pipelines of %s for chain %d, want 1", created[m.Project], m.Project, id)
		}
	}
	if extra := len(created) - len(view.Members); extra > 0 {
		return fmt.Errorf("GitLab recorded pipelines for %d projects outside chain %d", extra, id)
	}
	fmt.Fprintf(out, "\nchain %d finished in %s: %d projects, each built exactly once (as GitLab recorded), in dependency order\n",
		id, time.Since(start).Round(100*time.Millisecond), len(view.Members))
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

// follow prints every member state change until the chain ends, and,
// when verified is set, the verdict on a member's images once it succeeds.
func follow(ctx context.Context, out io.Writer, engine *chain.Engine, id int64, start time.Time,
	verified func(ctx context.Context, project string, pipelineID int64) (string, error)) (chain.ChainView, error) {
	seen := map[string]chain.MemberState{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		view, err := engine.Chain(ctx, id)
		if err != nil {
			return view, err
		}
		for _, m := range view.Members {
			if seen[m.Project] == m.State {
				continue
			}
			seen[m.Project] = m.State
			line := fmt.Sprintf("  %7s  %-20s %-9s", fmt.Sprintf("+%.1fs", time.Since(start).Seconds()), m.Project, m.State)
			switch {
			case m.PipelineID != 0 && m.State != chain.Waiting:
				line += fmt.Sprintf("  pipeline %d", m.PipelineID)
			case m.Why != "":
				line += "  " + m.Why
			}
			fmt.Fprintln(out, strings.TrimRight(line, " "))
			if verified != nil && m.State == chain.Success {
				v, err := verified(ctx, m.Project, m.PipelineID)
				if err != nil {
					return view, err
				}
				if v != "" {
					fmt.Fprintf(out, "  %7s  %-20s %-9s  %s\n", fmt.Sprintf("+%.1fs", time.Since(start).Seconds()), m.Project, "verified", v)
				}
			}
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
// recorded, and with a registry the verdict on their images.
func printFinal(out io.Writer, v chain.ChainView, created map[string]int, rank map[string]int, verdicts map[string]string) {
	fmt.Fprintf(out, "chain %d: %s\n", v.ID, v.State)
	members := slices.Clone(v.Members)
	slices.SortStableFunc(members, func(a, b chain.MemberView) int { return rank[a.Project] - rank[b.Project] })
	for _, m := range members {
		ups := "-"
		if len(m.Upstreams) > 0 {
			ups = strings.Join(m.Upstreams, ", ")
		}
		if len(verdicts) > 0 {
			fmt.Fprintf(out, "  %-20s %-8s images %-8s pipeline %-4d created on GitLab: %d  after %s\n", m.Project, m.State, cmp.Or(verdicts[m.Project], "-"), m.PipelineID, created[m.Project], ups)
			continue
		}
		fmt.Fprintf(out, "  %-20s %-8s pipeline %-4d created on GitLab: %d  after %s\n", m.Project, m.State, m.PipelineID, created[m.Project], ups)
	}
}
