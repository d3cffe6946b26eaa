// Package dashboard is depsd's read-only web face, served by `depsd serve`:
// the chains (running ones update live), the dependency graph as a picture
// with focus views, a page per project (its files, warnings, neighbours,
// pipelines, schedules, images and what a rebuild would cost), the
// freshness of the images projects publish and the health of the
// installation (webhooks, scans, schedules, watched images). Pages are
// rendered on the server with html/template; a few lines of JavaScript
// refresh the live parts. Everything it serves is embedded in the binary:
// no framework, nothing fetched from the internet.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the pages read of the stored scan; *store.Store implements
// it. Calls may be concurrent and only read.
type Store interface {
	// Projects returns every scanned project, sorted by path.
	Projects(ctx context.Context) ([]scan.Project, error)
	// Project returns one project or an error wrapping scan.ErrNotFound.
	Project(ctx context.Context, path string) (scan.Project, error)
	// LastScan returns the newest stored scan; ok is false before the first.
	LastScan(ctx context.Context) (m scan.Meta, ok bool, err error)
}

// Chains reads the chains; *chain.Engine implements it.
type Chains interface {
	Chains(ctx context.Context, f chain.Filter) ([]chain.ChainView, error)
	// Chain returns one chain or an error wrapping chain.ErrNotFound.
	Chain(ctx context.Context, id int64) (chain.ChainView, error)
	Stats(ctx context.Context) (chain.Stats, error)
}

// HookStatus is what depsd last learned about the projects' webhooks.
type HookStatus struct {
	// URL is the hook URL depsd maintains (hooks.url); empty when it is
	// not configured, and then depsd does not check hooks.
	URL string
	// CheckedAt is when the report was made; zero before the first check.
	CheckedAt time.Time
	Report    gitlab.HookReport
	// Err is why the last check failed for some projects, if it did.
	Err string
}

// Replicas is which depsd processes share the store and which one leads
// (the leader runs the schedules, maintenance, reconciler and catch-up).
type Replicas struct {
	This      string // the replica serving this page
	Leading   bool   // whether it is the leader
	Store     string // sqlite or postgres
	StorePath string // file, or database URL without password
	Leader    *Lease // nil when no replica ever led
	Live      []Lease
	Jobs      []JobRun
}

// Lease is a replica's hold on the leadership or on being alive.
type Lease struct {
	Holder           string
	Since, ExpiresAt time.Time
	Expired          bool
}

// JobRun is the last run of one of the leader's background jobs.
type JobRun struct {
	Name, Replica         string
	StartedAt, FinishedAt time.Time
	Err                   string
}

// Options are what the dashboard reads. Store and Chains are required.
type Options struct {
	Store  Store
	Chains Chains
	// Schedules lists the cron schedules, jobs and watched images with
	// their state; nil shows none.
	Schedules func(ctx context.Context) ([]scheduler.Entry, error)
	// Hooks returns the last webhook check (as stored by the leader, so
	// that every replica shows it); nil shows the state as unknown. A
	// check it cannot read is shown with HookStatus.Err.
	Hooks func(ctx context.Context) HookStatus
	// Replicas reads the replicas and the leader; nil shows none.
	Replicas func(ctx context.Context) (Replicas, error)
	// Freshness reads the stored verifications of the projects named (all
	// when none is) as rows, stalest first, each stale one with what will
	// fix it (the daemon's Freshness); nil shows none.
	Freshness func(ctx context.Context, projects ...string) ([]verify.Row, error)
	// History reads pipeline durations for rebuild estimates; nil leaves
	// the estimate out.
	History report.PipelineHistory
	// EstimateTimeout bounds the GitLab requests one page makes for an
	// estimate (default 3 s); members not read in time count as without
	// history and are read again by the next page.
	EstimateTimeout time.Duration
	// MaxFullGraph is the most projects the graph page draws whole; larger
	// graphs get an overview and focus views. Default 150.
	MaxFullGraph int
	// Viewer says who asks for a page and what they may see (sign-in);
	// nil: nobody in particular, who sees everything and no action.
	Viewer func(r *http.Request) Viewer
	// Validations reads the validations of merge requests (premerge;
	// chain.Engine); nil shows none.
	Validations Validations
	// Audit reads the audit log (chain.Engine.Audit); nil shows none.
	Audit  func(ctx context.Context, f chain.AuditFilter) ([]chain.AuditEntry, error)
	Now    func() time.Time
	Logger *slog.Logger
}

// Dashboard serves the pages. Build it with New.
type Dashboard struct {
	opts    Options
	pages   map[string]*template.Template
	log     *slog.Logger
	graph   graphCache
	scoped  scopedGraphs
	history historyCache
}

// scopedGraphs keeps the graphs of people's scopes (reads.graph), for the
// graph of the last stored scan (of).
type scopedGraphs struct {
	mu    sync.Mutex
	of    *graphData
	byKey map[string]*graphData
}

// New parses the templates; a template error is a bug caught by the tests.
func New(opts Options) (*Dashboard, error) {
	if opts.Store == nil || opts.Chains == nil {
		return nil, errors.New("dashboard: Store and Chains are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.EstimateTimeout <= 0 {
		opts.EstimateTimeout = 3 * time.Second
	}
	if opts.MaxFullGraph <= 0 {
		opts.MaxFullGraph = 150
	}
	d := &Dashboard{opts: opts, pages: map[string]*template.Template{}, log: opts.Logger}
	d.history.entries = map[string]historyEntry{}
	funcs := templateFuncs(opts.Now)
	funcs["nodeName"] = d.nodeName
	for _, page := range []string{"chains", "chain", "graph", "project", "health", "freshness", "validations", "validation", "error"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", page, err)
		}
		d.pages[page] = t
	}
	return d, nil
}

// Register adds the dashboard's routes to mux: /, /chains/{id}, /graph,
// /graph.svg, /graph/projects, /projects/{path}, /health, /freshness,
// /validations, /validations/{id} and /static/.
// Every page reads through reads (the viewer's scope); view_test.go's
// TestEveryRouteShowsOnlyWhatThePersonMaySee asks each of these routes as
// a person who may not see everything, and fails on a route it does not
// know.
func (d *Dashboard) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle(StaticRoute, http.StripPrefix("/static/", cacheFor(time.Hour, http.FileServerFS(static))))
	for _, rt := range d.routes() {
		mux.HandleFunc(rt.pattern, rt.handler)
	}
}

// StaticRoute serves the embedded assets (style, scripts): public, also
// to people who have not signed in.
const StaticRoute = "GET /static/"

type route struct {
	pattern string
	handler http.HandlerFunc
}

// routes are the pages, each reading through the viewer's scope.
func (d *Dashboard) routes() []route {
	return []route{
		{"GET /{$}", d.chainsPage},
		{"GET /chains/{id}", d.chainPage},
		{"GET /graph", d.graphPage},
		{"GET /graph.svg", d.graphSVG},
		{"GET /graph/projects", d.graphProjects},
		{"GET /projects/{path...}", d.projectPage},
		{"GET /health", d.healthPage},
		{"GET /freshness", d.freshnessPage},
		{"GET /validations", d.validationsPage},
		{"GET /validations/{id}", d.validationPage},
	}
}

// Fail renders the error page (for the daemon's action handlers).
func (d *Dashboard) Fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	d.fail(w, r, code, err)
}

func cacheFor(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("max-age=%d", int(d.Seconds())))
		h.ServeHTTP(w, r)
	})
}

// graphCache keeps the graph document of the last stored scan, rebuilt
// when a newer scan is stored: reading 2,000 projects with their files for
// every page would be wasted.
type graphCache struct {
	mu   sync.Mutex
	scan time.Time
	data *graphData
}

// historyCache keeps each project's typical pipeline duration for a while,
// so that reloading a project page does not ask GitLab again.
type historyCache struct {
	mu      sync.Mutex
	entries map[string]historyEntry
}

type historyEntry struct {
	typical time.Duration
	known   bool // false: no successful pipeline
	at      time.Time
}

// historyTTL is how long a read pipeline history is reused.
const historyTTL = 15 * time.Minute
