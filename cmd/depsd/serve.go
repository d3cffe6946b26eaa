package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/daemon"
)

// runServe implements `depsd serve`: the webhook receiver, chain engine and
// HTTP API until SIGTERM.
func runServe(ctx context.Context, args []string, stderr io.Writer) int {
	c := newCommand("serve", "serve [--listen ADDR] [--ui-listen ADDR] [--mode chain|first-level] [flags]", stderr, true)
	listen := c.fs.String("listen", "127.0.0.1:8080", "HTTP address: POST /hooks/gitlab, /healthz, /readyz, and (without --ui-listen) the dashboard, /metrics, /api/v1/...")
	uiListen := c.fs.String("ui-listen", "", "separate HTTP address for the dashboard, /metrics and /api/v1/... (keeps them off the address GitLab reaches)")
	c.addModeFlag()
	c.fs.StringVar(&c.secretFile, "webhook-secret-file", "", "file holding the X-Gitlab-Token secret (default $DEPSD_WEBHOOK_SECRET_FILE, hooks.secret_file, or $DEPSD_WEBHOOK_SECRET)")
	reconcile := c.fs.Duration("reconcile-interval", time.Minute, "how often the status of pipelines depsd created is polled, in case a webhook never arrives")
	expiry := c.fs.Duration("chain-expiry", 7*24*time.Hour, "a chain still unfinished after this long expires")
	if code, ok := c.parse(args); !ok {
		return code
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, "serve", err)
	}
	log := c.logger(stderr)
	gl, err := newScopedGitLab(cfg, log)
	if err != nil {
		return fail(stderr, "serve", err)
	}
	d, err := daemon.New(ctx, daemon.Options{
		Config: cfg, GitLab: gl, Listen: *listen, UIListen: *uiListen, Mode: engineMode(cfg), ReconcileInterval: *reconcile, ChainExpiry: *expiry, Logger: log,
	})
	if err != nil {
		return fail(stderr, "serve", err)
	}
	if err := d.Run(ctx); err != nil {
		return fail(stderr, "serve", err)
	}
	return exitOK
}

// runRebuild implements `depsd rebuild PROJECT [--dry-run]`: start a chain
// at PROJECT. The chain lives in the state file, so a running daemon
// advances it; the first pipeline is created right away when GitLab is
// configured.
func runRebuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("rebuild", "rebuild [--dry-run] PROJECT", stderr, true)
	dryRun := c.fs.Bool("dry-run", false, "print the waves that would be built, change nothing")
	c.addModeFlag()
	if code, ok := c.parse(args); !ok {
		return code
	}
	if c.fs.NArg() != 1 {
		c.fs.Usage()
		return exitUsage
	}
	project := c.fs.Arg(0)
	st, g, code := openProjectGraph(ctx, c, stderr, "rebuild", project)
	if st == nil {
		return code
	}
	defer st.Close()
	if *dryRun {
		return dryRunRebuild(ctx, c, st, g, project, stdout, stderr)
	}
	cfg, _ := c.load()
	log := c.logger(stderr)
	ecfg := chain.Config{Store: st, Graph: st.Graph, Logger: log, Mode: engineMode(cfg)}
	gl, glErr := newGitLab(cfg, log)
	if glErr == nil {
		ecfg.GitLab = gl
	}
	engine, err := chain.New(ecfg)
	if err != nil {
		return fail(stderr, "rebuild", err)
	}
	id, err := engine.Rebuild(ctx, project, chain.Reason{Kind: chain.ReasonRebuild, Detail: "depsd rebuild"})
	if err != nil {
		return fail(stderr, "rebuild", err)
	}
	fmt.Fprintf(stdout, "chain %d started at %s\n", id, project)
	if glErr != nil {
		fmt.Fprintf(stdout, "GitLab is not configured here (%v): a running depsd serve on %s creates the pipelines\n", glErr, cfg.State)
		return exitOK
	}
	if _, err := engine.SendPending(ctx); err != nil {
		return fail(stderr, "rebuild", err)
	}
	view, err := engine.Chain(ctx, id)
	if err != nil {
		return fail(stderr, "rebuild", err)
	}
	for _, m := range view.Members {
		if m.PipelineID != 0 {
			fmt.Fprintf(stdout, "%s: pipeline %d %s\n", m.Project, m.PipelineID, m.PipelineURL)
		} else if m.State == chain.Failed {
			fmt.Fprintf(stdout, "%s: failed: %s\n", m.Project, m.Why)
		}
	}
	fmt.Fprintln(stdout, "depsd serve triggers the rest as their upstreams succeed; follow it with: depsd chains", id)
	return exitOK
}
