// Package daemon wires and runs `depsd serve`: the store, the GitLab
// client, the chain engine with its inbox, outbox and reconciler, the
// webhook receiver and the HTTP API, all owned by one errgroup. On SIGTERM
// (the context ending) it refuses new requests, lets those in flight finish
// within the drain timeout, and stops the workers; what was recorded but not
// yet processed is picked up at the next start.
//
// What it holds: wiring and lifecycle of `depsd serve`
// (after a scan it reloads the graph, the project ids and the instance's
// registry hosts — which, with the operator's lists, are the only
// registries the verifier and the image watcher read,
// `daemon/registries.go` — and, while verification is on, what each
// project publishes from `store.VerifyProjects` (`verify.Published`),
// neither reading files nor parsing Containerfiles; `main` sets a 128 MiB
// soft memory limit unless `GOMEMLIMIT` is set): HTTP API, dashboard
// listener, metrics (the state gauges the alerts watch are read from the
// store every 5 s: chains by state, the longest blocked, queues, replicas,
// hooks by state, `depsd_store_up`; `depsd_leader` and the GitLab counters
// at scrape), leader election (the leader also listens for verifications
// other replicas queue, `watchVerifyQueue`, and sends the chains' commit
// statuses), shutdown
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/signin"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

// Options configure a daemon.
type Options struct {
	Config config.Config
	// Listen is the HTTP address (default 127.0.0.1:8080). Port 0 picks a
	// free one; Listening reports it.
	Listen string
	// Mode is chain.Full (default) or chain.FirstLevel.
	Mode              chain.Mode
	ReconcileInterval time.Duration // default 1 min
	ChainExpiry       time.Duration // default 7 days
	// PollInterval is how often the workers look for work written by
	// another process (`depsd rebuild`). Default 5 s.
	PollInterval time.Duration
	// DrainTimeout bounds the graceful shutdown. Default 15 s.
	DrainTimeout time.Duration
	// CatchUpInterval is how often the leader reads the pipelines of the
	// projects with something downstream for successes whose webhook never
	// came (and once at the start of its term). Default 5 min.
	CatchUpInterval time.Duration
	// ReplicaID names this process among the replicas sharing the store
	// (status, leader lease, logs). Default: host name and listen port (see
	// defaultReplicaID).
	ReplicaID string
	// LeaderLease is how long the leader's lease, and each process's
	// liveness lease, last without renewal: a dead leader is replaced
	// within two of these; a process stops its pipeline creations a third
	// of one before its liveness lease could lapse. Default 15 s.
	LeaderLease time.Duration
	// Listening, if set, receives the bound address once the server
	// accepts connections.
	Listening func(addr string)
	// UIListen, if set, is a second address serving the dashboard, the
	// API and the metrics, which Listen then no longer serves (it keeps
	// the webhook and the health checks). UIListening receives its bound
	// address.
	UIListen    string
	UIListening func(addr string)
	// GitLab is the API client (the command builds it from Config; tests
	// and the demo point it at the fake). Required.
	GitLab *gitlab.Client
	// SchedulerClock drives the schedules and the image watcher; nil is
	// the system clock (tests advance a fake one).
	SchedulerClock scheduler.Clock
	Logger         *slog.Logger
	Now            func() time.Time
}

// Daemon is a running `depsd serve`. Build it with New, run it with Run.
type Daemon struct {
	opts   Options
	log    *slog.Logger
	store  *store.Store
	gitlab *gitlab.Client
	// glVersion is GitLab's version, read at start (readGitLabVersion).
	glVersion atomic.Pointer[gitlab.Version]
	engine    *chain.Engine
	// recorder writes the webhook handler's events (group commit); Run
	// owns its goroutine, which outlives the HTTP server's drain.
	recorder *chain.Recorder
	metrics  *metrics
	state    *graphState
	// rescanRequests holds a rescan the leader is asked for
	// (requestRescan); buffered by one.
	rescanRequests chan struct{}
	server         *http.Server
	ui             *http.Server // nil unless Options.UIListen is set
	// scanning serialises the daemon's scans (start, maintenance, pushes):
	// the store would refuse an older one finishing after a newer one, and
	// the work would be wasted.
	scanning sync.Mutex
	elector  *elector
	// incarnation is this process: the replica id and a random suffix. It
	// signs the outbox claims, and its liveness lease is renewed while the
	// process runs (see liveness).
	incarnation string
	alive       *liveness
	// outbox is the work run while the liveness lease safely holds:
	// engine.RunOutbox (tests watch it).
	outbox func(context.Context) error
	// signingTokens verify signed deliveries; the first is installed on
	// the hooks (SigningTokens).
	signingTokens []string
	// registries are the registries the verifier and the image watcher
	// read (registries.go).
	registries *registryPolicy
	// signin signs people in to the dashboard and the API (nil: ui.auth
	// none).
	signin *signin.Service
	// sharedSecret: hooks may still carry the shared webhook secret
	// (hooks.secret_mode: per-project, before a hooks sync gave each its
	// own; hooksecrets.go). Read from the store at start and with the
	// state metrics, set by this process's syncs.
	sharedSecret atomic.Bool
}

// New opens the store and builds the pieces; nothing runs yet.
func New(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:8080"
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 15 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ReconcileInterval <= 0 {
		opts.ReconcileInterval = time.Minute
	}
	if opts.CatchUpInterval <= 0 {
		opts.CatchUpInterval = 5 * time.Minute
	}
	if opts.LeaderLease <= 0 {
		opts.LeaderLease = 15 * time.Second
	}
	if opts.ReplicaID == "" {
		opts.ReplicaID = defaultReplicaID(opts.Listen)
	}
	opts.Logger = opts.Logger.With("replica", opts.ReplicaID)
	cfg := opts.Config
	if opts.Mode == "" {
		opts.Mode = cfg.ChainMode()
	}
	if cfg.Hooks.Secret == "" {
		return nil, errors.New("no webhook secret: depsd serve refuses to accept unauthenticated webhooks (set DEPSD_WEBHOOK_SECRET, --webhook-secret-file or hooks.secret_file)")
	}
	if err := cfg.RequireScope(); err != nil {
		return nil, err
	}
	if opts.GitLab == nil {
		return nil, errors.New("daemon: no GitLab client")
	}
	d := &Daemon{opts: opts, log: opts.Logger, metrics: newMetrics(opts.Config.Metrics.ProjectLabelsOn()), gitlab: opts.GitLab, rescanRequests: make(chan struct{}, 1)}
	st, err := store.Open(ctx, cfg.State)
	if err != nil {
		return nil, err
	}
	d.store = st
	d.state = newGraphState()
	d.registries = newRegistryPolicy(cfg)
	d.state.registriesChanged = d.registries.registriesChanged
	iv, err := d.newImageVerifier()
	if err != nil {
		st.Close()
		return nil, err
	}
	d.incarnation = newIncarnation(opts.ReplicaID)
	// The lease is held by this process, not by its replica id: two
	// processes given the same id (a copied --replica-id) must not both
	// take themselves for the holder and lead at once.
	d.elector = &elector{st: st, id: d.incarnation, ttl: opts.LeaderLease, now: opts.Now,
		log: opts.Logger.With("component", "leader")}
	d.alive = &liveness{st: st, replica: opts.ReplicaID, holder: d.incarnation, ttl: opts.LeaderLease,
		clock: wallClock{opts.Now}, log: opts.Logger.With("component", "liveness")}
	d.engine, err = chain.New(chain.Config{
		Owner: d.incarnation, Store: st, GitLab: d.gitlab, Graph: d.state.graph, Rescan: d.rescanAfterPush, RescanGap: pushRescanGap, Mode: opts.Mode,
		Refs:   cfg.RefRules(),
		Expiry: opts.ChainExpiry, PollInterval: opts.PollInterval, InboxWait: opts.ReconcileInterval / 2,
		// As many creates in flight as the client lets through: they are
		// urgent, and its limits keep the rest of the traffic safe.
		SendConcurrency: cfg.GitLab.Concurrency,
		Verifier:        iv, Verify: chain.VerifyMode(cfg.Images.Verify), VerifyTimeout: verifyTimeout(cfg.Images.Timeout),
		Pins: cfg.PinRules(), PinTimeout: cfg.Pins.Timeout, PinInterval: opts.ReconcileInterval,
		DepsOptions: cfg.Analysis(), ChainURL: chainURL(cfg.Hooks.URL, opts.UIListen),
		// Every replica writes what a chain's commit status should show;
		// the leader sends them (lead).
		Statuses: cfg.ChainStatuses(d.gitlab),
		// The merge requests premerge covers: validated on their
		// candidates (docs/validation.md); the leader does the work.
		Premerge: d.premergeOptions(),
		Now:      opts.Now, Logger: opts.Logger, Observer: observer{d.metrics},
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	if d.signingTokens, err = SigningTokens(ctx, cfg, st); err != nil {
		st.Close()
		return nil, err
	}
	shared, err := sharedSecretAccepted(ctx, cfg, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	d.sharedSecret.Store(shared)
	d.metrics.watch(d.gitlab, func() bool { _, leading := d.elector.state(); return leading })
	d.recorder = d.engine.NewRecorder()
	d.outbox = d.engine.RunOutbox
	d.state.keepPaths = len(cfg.HookGroups()) > 0
	hook, err := webhook.NewHandler(webhook.Options{
		Secret: cfg.Hooks.Secret, SecretMode: cfg.Hooks.SecretMode, SharedSecretAccepted: d.sharedSecret.Load,
		Groups: cfg.HookGroups(), ProjectPath: d.state.projectPath,
		Signing: cfg.Hooks.Signing, SigningTokens: d.signingTokens,
		DependencyFiles: append(append([]string{}, cfg.Containerfiles...), ".gitlab-deps"), Follows: cfg.Follows(),
		Premerge: cfg.PremergeCovers(),
		Recorder: recorder{d.recorder}, Scope: d.state, // the Recorder wakes the inbox
		Observe: func(kind, outcome string) { d.metrics.events.WithLabelValues(kind, outcome).Inc() },
		Now:     opts.Now, Logger: opts.Logger.With("component", "webhook"),
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	dash, err := d.newDashboard()
	if err != nil {
		st.Close()
		return nil, err
	}
	if d.signin, err = d.newSignin(ctx); err != nil {
		st.Close()
		return nil, err
	}
	a := &api{store: st, engine: d.engine, webhook: hook, metrics: d.metrics, ready: d.ready, status: d.Status, dashboard: dash,
		freshness: d.freshness, signin: d.signin, scope: d.scopeOf, logger: d.log.With("component", "http")}
	mainMux, uiMux := a.routes(opts.UIListen != "")
	d.server = d.newServer(mainMux)
	if uiMux != nil {
		d.ui = d.newServer(uiMux)
	}
	return d, nil
}

func (d *Daemon) newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
}

// Engine is the daemon's chain engine (the demo reads chains through it).
func (d *Daemon) Engine() *chain.Engine { return d.engine }

// chainURL links a chain's page for the pin merge requests' descriptions:
// at hooks.url's site when the dashboard is served there too (no
// --ui-listen of its own, whose public address depsd does not know).
func chainURL(hooksURL, uiListen string) func(int64) string {
	base, ok := strings.CutSuffix(hooksURL, "/hooks/gitlab")
	if hooksURL == "" || !ok || uiListen != "" {
		return nil
	}
	return func(id int64) string { return base + "/chains/" + strconv.FormatInt(id, 10) }
}

// validationURL links a validation's page for its commit status and
// note, as chainURL does a chain's.
func validationURL(hooksURL, uiListen string) func(int64) string {
	base, ok := strings.CutSuffix(hooksURL, "/hooks/gitlab")
	if hooksURL == "" || !ok || uiListen != "" {
		return nil
	}
	return func(id int64) string { return base + "/validations/" + strconv.FormatInt(id, 10) }
}

// premergeOptions are the engine's validations (nil when premerge covers
// nothing): the candidates' digests are read by a registry client under
// the verifier's policy (registries.go), at most the registries it may
// read.
func (d *Daemon) premergeOptions() *chain.PremergeOptions {
	cfg := d.opts.Config
	rules := cfg.PremergeRules()
	if rules == nil {
		return nil
	}
	return &chain.PremergeOptions{Rules: rules, GitLab: d.gitlab, Registry: registry.New(d.registryOptions()),
		Interval: d.opts.ReconcileInterval, NoteInterval: cfg.GitLab.CommitStatusInterval,
		URL: validationURL(cfg.Hooks.URL, d.opts.UIListen)}
}

// Run serves until ctx ends, then drains. The store is closed when it
// returns.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.store.Close()
	// The run lock: another live run of this replica id on this host is
	// refused at once; without one, every earlier run here is dead, and
	// start drops its leases instead of waiting them out (runlock.go).
	lockPath := runLockPath(d.opts.Config.State, d.opts.ReplicaID)
	lock, err := lockRun(lockPath)
	switch {
	case errors.Is(err, errRunLocked):
		inUse := &replicaIDInUseError{replica: d.opts.ReplicaID, lock: lockPath}
		if leases, lerr := d.store.LiveLeases(ctx, alivePrefix+d.opts.ReplicaID+"/", d.opts.Now()); lerr == nil {
			for _, l := range leases {
				if sameHostRun(l.Holder, d.opts.ReplicaID) {
					inUse.other = l.Holder
				}
			}
		}
		return inUse
	case err != nil:
		d.log.Warn("no run lock: an earlier run of this replica id is taken for dead only once its leases run out", "err", err)
	default:
		defer lock.release()
		d.alive.earlierDead = true
	}
	// With a scan stored, the graph it gave is served at once and the
	// start-up scan runs beside (a restart answers webhooks within a
	// second); without one, serve cannot start before its first scan.
	_, scanned, err := d.store.LastScan(ctx)
	if err != nil {
		return err
	}
	if scanned {
		err = d.state.reload(ctx, d.store)
	} else {
		err = d.loadGraph(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: a normal shutdown
		}
		return err
	}
	// Checked here so that a bad schedule stops every replica at start;
	// the leader builds its own for each term.
	if _, err := d.newScheduler(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.opts.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.opts.Listen, err)
	}
	var uiLn net.Listener
	if d.ui != nil {
		if uiLn, err = net.Listen("tcp", d.opts.UIListen); err != nil {
			ln.Close()
			return fmt.Errorf("listen on %s (ui): %w", d.opts.UIListen, err)
		}
		d.log.Info("serving the dashboard", "addr", uiLn.Addr().String())
		d.warnOpenUI(uiLn.Addr().String())
		if d.opts.UIListening != nil {
			d.opts.UIListening(uiLn.Addr().String())
		}
	}
	d.log.Info("serving", "addr", ln.Addr().String(), "mode", d.engine.Mode(), "store", string(d.store.Kind()))
	if d.ui == nil {
		d.warnOpenUI(ln.Addr().String())
	}
	if d.opts.Listening != nil {
		d.opts.Listening(ln.Addr().String())
	}

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	g, gctx := errgroup.WithContext(workCtx)
	g.Go(func() error {
		if err := d.server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	if d.ui != nil {
		g.Go(func() error {
			if err := d.ui.Serve(uiLn); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("ui http server: %w", err)
			}
			return nil
		})
	}
	// Every replica applies webhook events and sends actions (each claimed
	// in the store); one at a time leads. The outbox claims actions in
	// this incarnation's name only while its liveness lease safely holds:
	// a claim whose owner has no live lease counts as abandoned, and
	// another sender takes it over (see liveness).
	g.Go(func() error { return d.recorder.Run(gctx) })
	g.Go(func() error { return d.engine.RunInbox(gctx) })
	// Recording and applying webhooks need no lease; sending and leading
	// wait until start has settled the other runs of this replica id:
	// another live one is refused (the error stops this process), a dead
	// one's leases are dropped (see liveness.start).
	g.Go(func() error {
		// The version decides whether creates may carry inputs: read
		// before the first send.
		d.readGitLabVersion(gctx)
		if err := d.alive.start(gctx); err != nil {
			if gctx.Err() != nil {
				return nil
			}
			return err
		}
		d.dropDeadLeader(gctx)
		g.Go(func() error { return d.alive.run(gctx, d.outbox) })
		g.Go(func() error { return d.elector.run(gctx, d.lead) })
		return nil
	})
	if scanned {
		g.Go(func() error {
			if _, err := d.scan(gctx); err != nil && gctx.Err() == nil {
				d.log.Warn("scan at start failed: serving the last stored scan", "err", err)
			}
			return nil
		})
	}
	g.Go(func() error { return d.followScans(gctx) })
	g.Go(func() error { return d.exportState(gctx) })
	g.Go(func() error { return d.exportFreshness(gctx) })
	g.Go(func() error {
		// Shutdown: on SIGTERM (ctx) or a failed component (gctx), refuse
		// new requests and finish those in flight, then stop the workers.
		select {
		case <-ctx.Done():
		case <-gctx.Done():
		}
		d.log.Info("draining", "timeout", d.opts.DrainTimeout)
		drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.DrainTimeout)
		defer cancel()
		err := d.server.Shutdown(drainCtx)
		if d.ui != nil {
			err = errors.Join(err, d.ui.Shutdown(drainCtx))
		}
		stopWork()
		if err != nil {
			return fmt.Errorf("drain: requests still running after %s: %w", d.opts.DrainTimeout, err)
		}
		return nil
	})
	err = g.Wait()
	d.log.Info("stopped")
	return err
}

// loadGraph scans at start when nothing was scanned yet (with a stored
// scan, Run serves it and scans beside). When GitLab cannot be reached,
// the last stored scan is used if there is one; with none, serve cannot
// start.
func (d *Daemon) loadGraph(ctx context.Context) error {
	_, scanned, err := d.store.LastScan(ctx)
	if err != nil {
		return err
	}
	_, err = d.scan(ctx)
	switch {
	case err == nil:
		return nil // scan has loaded its graph
	case errors.Is(err, scan.ErrConflict):
		// Another replica stored a newer scan while this one ran.
	case !scanned:
		return fmt.Errorf("first scan: %w", err)
	default:
		d.log.Warn("scan at start failed: serving the last stored scan", "err", err)
	}
	return d.state.reload(ctx, d.store)
}

// Scan runs an incremental scan of the scope and swaps in the new graph;
// the daemon's maintenance schedule uses it.
func (d *Daemon) scan(ctx context.Context) (scan.Result, error) { return d.scanOnly(ctx, nil) }

// scanOnly is scan of the projects only names (scan.Options.Only), the
// rest of the scope kept as stored; all of it when only is empty. The
// scan metrics are of scans of the whole scope: a push's rescan does not
// say that the scope was read.
func (d *Daemon) scanOnly(ctx context.Context, only []string) (scan.Result, error) {
	d.scanning.Lock()
	defer d.scanning.Unlock()
	cfg := d.opts.Config
	opts := cfg.ScanOptions(d.log.With("component", "scan"), d.opts.Now)
	if opts.InstanceHost == "" {
		opts.InstanceHost = config.HostOf(d.gitlab.BaseURL())
	}
	opts.Only = only
	res, err := scan.Run(ctx, d.gitlab, d.store, opts)
	if err != nil {
		return res, err
	}
	if res.Targeted == 0 {
		d.metrics.observeScan(res.FinishedAt, res.Duration, res.Projects, res.Warnings)
	}
	return res, d.state.reload(ctx, d.store)
}

// requestRescan asks the leader for an incremental scan soon (what a scan
// maps changed: a publication seen), without waiting for it; requests
// made before it ran are one.
func (d *Daemon) requestRescan() {
	select {
	case d.rescanRequests <- struct{}{}:
	default:
	}
}

// rescanWhenAsked runs the scans requestRescan asks for, until ctx ends.
func (d *Daemon) rescanWhenAsked(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.rescanRequests:
			if _, err := d.scan(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("rescan after a seen publication failed", "err", err)
			}
		}
	}
}

// pushRescanGap is the least time between two rescans for pushes
// (chain.Config.RescanGap): a stream of pushes to dependency files costs
// a rescan a second at most, and a push waits a second at most for its.
const pushRescanGap = time.Second

// rescanAfterPush answers pushes that touched a dependency file (or a new
// release): the projects pushed to are read again, one request each plus
// their files, the rest of the scope kept as stored (the scope is listed
// when what changed needs it: scan.Options.Only).
func (d *Daemon) rescanAfterPush(ctx context.Context, projects []string) error {
	d.log.Info("dependency file changed: rescanning", "projects", projects)
	_, err := d.scanOnly(ctx, projects)
	return err
}

// ready: the store answers and a graph is loaded.
func (d *Daemon) ready(ctx context.Context) error {
	if !d.state.loaded() {
		return errors.New("graph not loaded yet")
	}
	if err := d.store.Ping(ctx); err != nil {
		return err
	}
	if _, err := d.engine.Stats(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// stateInterval is how often exportState refreshes the metrics read from
// the store.
const stateInterval = 5 * time.Second

// exportState refreshes the metrics read from the store (queues, chains,
// replicas, webhooks, whether the store answers) every stateInterval.
func (d *Daemon) exportState(ctx context.Context) error {
	tick := time.NewTicker(stateInterval)
	defer tick.Stop()
	for {
		d.refreshState(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// refreshState reads the store once for the metrics; a store that does
// not answer within stateInterval counts as down.
func (d *Daemon) refreshState(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, stateInterval)
	defer cancel()
	now := d.opts.Now()
	s, err := d.engine.Stats(ctx)
	if err == nil {
		err = d.store.Ping(ctx)
	}
	var alive []store.Lease
	if err == nil {
		alive, err = d.store.LiveLeases(ctx, alivePrefix, now)
	}
	if err != nil && ctx.Err() == nil {
		d.log.Debug("read the state for the metrics", "err", err)
	}
	if d.sharedSecret.Load() {
		// Another replica's sync (or depsd hooks sync) may have given the
		// hooks their own. Only that way: this process's configuration,
		// which names the secrets, does not change while it runs.
		if shared, serr := sharedSecretAccepted(ctx, d.opts.Config, d.store); serr == nil && !shared {
			d.sharedSecret.Store(false)
		}
	}
	hooks := d.hookStatus(ctx)
	checked := hooks.URL != "" && !hooks.CheckedAt.IsZero()
	d.metrics.observeState(now, s, err == nil, len(alive), hooks, checked)
}

// Graph returns the graph the daemon currently works with.
func (d *Daemon) Graph(ctx context.Context) (*deps.Graph, error) { return d.state.graph(ctx) }

// defaultReplicaID is the host name and the listen port: two replicas on
// one host listen on different ports, and a replica restarted after a
// crash is the same replica, so it takes its leader lease back at once
// instead of waiting for it to expire. With port 0, the pid stands in.
func defaultReplicaID(listen string) string {
	host, _ := os.Hostname()
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "" && port != "0" {
		return host + "-" + port
	}
	return fmt.Sprintf("%s-pid%d", host, os.Getpid())
}
