package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"gitlab.com/depsd/depsd/dashboard"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

// newScheduler builds the cron schedules, the maintenance job and the image
// watcher. It fails, naming the entry, on a bad cron expression, an unknown
// timezone or a project the scan did not find in scope.
func (d *Daemon) newScheduler() (*scheduler.Scheduler, error) {
	cfg := d.opts.Config.Scheduler
	graph, _ := d.state.graph(context.Background())
	if err := cfg.Validate(graph.Has); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	s, err := scheduler.New(scheduler.Options{
		Config: cfg, InScope: graph.Has, Store: d.store, Rebuilder: d.engine,
		Images:   func(ctx context.Context) ([]scheduler.ImageUser, error) { return ImageUsers(ctx, d.store) },
		Resolver: registry.New(d.registryOptions()),
		Clock:    d.opts.SchedulerClock,
		Logger:   d.log.With("component", "scheduler"),
		Owner:    d.opts.ReplicaID,
		Observe: func(f scheduler.Fired) {
			outcome := "ok"
			if f.Err != nil {
				outcome = "error"
			}
			d.metrics.fires.WithLabelValues(string(f.Kind), outcome).Inc()
			if job := firedJob(f.Kind); job != "" {
				d.recordJob(context.Background(), job, f.Started, f.Err)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := s.AddJob("rescan", cfg.RescanSpec(), d.maintenance); err != nil {
		return nil, fmt.Errorf("rescan schedule: %w", err)
	}
	return s, nil
}

// maintenance is the periodic job an operator would otherwise put in a
// systemd timer: an incremental scan, expired sign-in sessions pruned,
// then hooks sync so disabled or drifted hooks are repaired.
func (d *Daemon) maintenance(ctx context.Context) error {
	res, err := d.scan(ctx)
	if err != nil {
		return fmt.Errorf("rescan: %w", err)
	}
	d.log.Info("maintenance scan done", "projects", res.Projects, "warnings", res.Warnings, "requests", res.Requests, "duration", res.Duration)
	if d.signin != nil {
		if n, err := d.signin.PruneSessions(ctx); err != nil {
			d.log.Warn("expired sessions not pruned", "err", err)
		} else if n > 0 {
			d.log.Info("expired sessions pruned", "sessions", n)
		}
	}
	hooks := d.opts.Config.Hooks
	if hooks.URL == "" {
		d.log.Info("no hooks.url configured: hooks are not repaired")
		return nil
	}
	rep, err := d.syncHooks(ctx, false)
	if note := rep.UnsignedNote(); note != "" {
		d.log.Warn("webhooks not signed", "unsigned", rep.Unsigned(), "note", note)
	}
	if n := rep.Changed(); n > 0 {
		d.log.Warn("hooks repaired", "changed", n, "reenabled", rep.Count(gitlab.HookReenabled), "created", rep.Count(gitlab.HookCreated),
			"still_disabled", rep.Count(gitlab.HookStillDisabled))
	}
	return err
}

// syncHooks gives every project in scope depsd's hook (dryRun: only
// looks), and stores what it found for the dashboard's health page of
// every replica.
func (d *Daemon) syncHooks(ctx context.Context, dryRun bool) (gitlab.HookReport, error) {
	return d.syncHooksTo(ctx, d.opts.Config.Hooks.URL, dryRun)
}

// SyncHooks gives every project in scope a hook to url, with the secrets
// and signing token this daemon checks, as its maintenance does for
// hooks.url (the demo, whose address is known only once it listens).
func (d *Daemon) SyncHooks(ctx context.Context, url string) (gitlab.HookReport, error) {
	return d.syncHooksTo(ctx, url, false)
}

func (d *Daemon) syncHooksTo(ctx context.Context, url string, dryRun bool) (gitlab.HookReport, error) {
	cfg := d.opts.Config
	hooks := cfg.Hooks
	hooks.URL = url
	projects, err := d.gitlab.ListProjects(ctx, cfg.GitLabScope())
	if err != nil {
		return gitlab.HookReport{}, fmt.Errorf("hooks sync: %w", err)
	}
	spec := gitlab.HookSpec{URL: hooks.URL, SigningToken: firstToken(d.signingTokens), Groups: cfg.HookGroups()}
	if err := HookSecrets(ctx, cfg, d.store, &spec); err != nil {
		return gitlab.HookReport{}, fmt.Errorf("hooks sync: %w", err)
	}
	rep, err := d.gitlab.SyncHooks(ctx, projects, spec, dryRun)
	checked := store.HookCheck{URL: hooks.URL, CheckedAt: d.opts.Now(), Report: rep}
	if err != nil {
		checked.Err = err.Error()
	}
	if err == nil && !dryRun && spec.SecretsPending {
		if serr := HookSecretsSynced(ctx, cfg, d.store, d.opts.Now()); serr != nil {
			d.log.Warn("record the hooks' secrets", "err", serr)
		} else {
			d.sharedSecret.Store(cfg.Hooks.SecretMode == webhook.SecretShared)
			d.log.Info("every hook carries its own secret now: the shared secret is no longer accepted", "mode", cfg.Hooks.SecretMode)
		}
	}
	if serr := d.store.SaveHookCheck(ctx, checked); serr != nil && ctx.Err() == nil {
		d.log.Warn("store the webhook check", "err", serr)
	}
	return rep, err
}

// hookStatus is the last webhook check as stored, for the health page.
func (d *Daemon) hookStatus(ctx context.Context) dashboard.HookStatus {
	url := d.opts.Config.Hooks.URL
	c, ok, err := d.store.HookCheck(ctx)
	switch {
	case err != nil:
		return dashboard.HookStatus{URL: url, Err: err.Error()}
	case !ok || c.URL != url:
		// None yet, or made for another hooks.url: its states are not
		// those of depsd's hooks now.
		return dashboard.HookStatus{URL: url}
	}
	return dashboard.HookStatus{URL: c.URL, CheckedAt: c.CheckedAt, Report: c.Report, Err: c.Err}
}

// checkHooksAtStart looks at the projects' hooks once at the start of a
// leader's term (changing nothing), so that the health page knows their
// state before the first maintenance run repairs them. Only the leader
// looks: replicas would multiply the requests.
func (d *Daemon) checkHooksAtStart(ctx context.Context) {
	if d.opts.Config.Hooks.URL == "" {
		return
	}
	if _, err := d.syncHooks(ctx, true); err != nil && ctx.Err() == nil {
		d.log.Warn("webhook check at start failed", "err", err)
	}
}

// ImageUsers maps the external images the stored projects use to those
// projects (for image watching and `depsd schedules`).
func ImageUsers(ctx context.Context, st *store.Store) ([]scheduler.ImageUser, error) {
	projects, err := st.Projects(ctx)
	if err != nil {
		return nil, err
	}
	byPath := make(map[string][]deps.Dependency, len(projects))
	for _, p := range projects {
		byPath[p.Path] = p.Dependencies
	}
	return scheduler.ExternalImages(byPath), nil
}

// ListSchedules lists every configured schedule with its state, for
// `depsd schedules`; it needs only the store.
func ListSchedules(ctx context.Context, cfg scheduler.Config, st *store.Store, log *slog.Logger) ([]scheduler.Entry, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := scheduler.New(scheduler.Options{
		Config: cfg, Store: st, Logger: log,
		Images: func(ctx context.Context) ([]scheduler.ImageUser, error) { return ImageUsers(ctx, st) },
	})
	if err != nil {
		return nil, err
	}
	if err := s.AddJob("rescan", cfg.RescanSpec(), func(context.Context) error { return errors.New("not run by the CLI") }); err != nil {
		return nil, err
	}
	return s.List(ctx)
}

// firedJob names the background job a scheduler fire belongs to in
// `depsd status`.
func firedJob(k scheduler.Kind) string {
	switch k {
	case scheduler.KindRebuild:
		return jobSchedules
	case scheduler.KindJob:
		return jobMaintenance
	case scheduler.KindWatch:
		return jobImageWatch
	}
	return ""
}
