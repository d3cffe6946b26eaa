package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/dashboard"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/signin"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/visible"
)

// api is what the HTTP endpoints read.
type api struct {
	store   *store.Store
	engine  *chain.Engine
	webhook http.Handler
	metrics *metrics
	ready   func(ctx context.Context) error
	status  func(ctx context.Context) (Status, error)
	// freshness reads the freshness report (Freshness).
	freshness func(ctx context.Context, q FreshnessQuery) (FreshnessReport, error)
	// dashboard is the web UI over the same reads.
	dashboard *dashboard.Dashboard
	// signin authenticates the dashboard's and the API's requests (nil:
	// ui.auth none, no sign-in and no actions); scope is what the
	// person asking may see.
	signin *signin.Service
	scope  func(r *http.Request) *visible.Scope
	logger *slog.Logger
}

func (a *api) log() *slog.Logger {
	if a.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.logger
}

// routes is depsd's HTTP surface: the webhook and health checks on the
// main listener, and the read-only views (dashboard, API, metrics) on the
// UI listener, which is the main one too unless --ui-listen gives it an
// address of its own (so GitLab need reach only the webhook).
func (a *api) routes(separateUI bool) (main, ui http.Handler) {
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/gitlab", a.webhook)
	a.health(mux)
	if !separateUI {
		a.views(mux)
		return mux, nil
	}
	uiMux := http.NewServeMux()
	a.health(uiMux)
	a.views(uiMux)
	return mux, uiMux
}

func (a *api) health(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.readyz)
}

// views are the metrics (their own rules: no sign-in, no project names
// unless metrics.project_labels is on) and, behind the sign-in when it is
// on, the JSON API, the dashboard and the actions. Every view reads
// through the person's scope (a.scope).
func (a *api) views(mux *http.ServeMux) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.metrics.registry, promhttp.HandlerOpts{}))
	if a.scope == nil {
		a.scope = func(*http.Request) *visible.Scope { return visible.All() }
	}
	inner := http.NewServeMux()
	inner.HandleFunc("GET /api/v1/graph", a.graph)
	inner.HandleFunc("GET /api/v1/chains", a.chains)
	inner.HandleFunc("GET /api/v1/chains/{id}", a.chain)
	inner.HandleFunc("GET /api/v1/validations", a.validations)
	inner.HandleFunc("GET /api/v1/validations/{id}", a.validation)
	inner.HandleFunc("GET /api/v1/status", a.statusHandler)
	inner.HandleFunc("GET /api/v1/freshness", a.freshnessHandler)
	if a.dashboard != nil {
		a.dashboard.Register(inner)
	}
	if a.signin == nil {
		mux.Handle("/", inner)
		return
	}
	inner.HandleFunc("GET /api/v1/audit", a.auditHandler)
	a.actionRoutes(inner)
	mux.Handle("/", a.signin.Handler(inner, public))
}

// newDashboard builds the dashboard over the daemon's store, engine,
// schedules, replicas, last webhook check and GitLab client (for rebuild
// estimates).
func (d *Daemon) newDashboard() (*dashboard.Dashboard, error) {
	return dashboard.New(dashboard.Options{
		Store: d.store, Chains: d.engine, Validations: d.engine, History: d.gitlab, Now: d.opts.Now,
		Logger: d.log.With("component", "dashboard"),
		Schedules: func(ctx context.Context) ([]scheduler.Entry, error) {
			return ListSchedules(ctx, d.opts.Config.Scheduler, d.store, d.log)
		},
		Hooks: d.hookStatus,
		Freshness: func(ctx context.Context, projects ...string) ([]verify.Row, error) {
			rep, err := d.freshness(ctx, FreshnessQuery{Projects: projects})
			return rep.Images, err
		},
		Replicas: func(ctx context.Context) (dashboard.Replicas, error) {
			st, err := d.Status(ctx)
			return replicasView(st), err
		},
		Viewer: d.viewer,
		Audit:  d.engine.Audit,
	})
}

// replicasView is Status in the dashboard's terms.
func replicasView(st Status) dashboard.Replicas {
	v := dashboard.Replicas{This: st.Replica, Leading: st.Leading, Store: string(st.Store), StorePath: st.StorePath}
	if l := st.Leader; l != nil {
		v.Leader = &dashboard.Lease{Holder: l.Replica, Since: l.Since, ExpiresAt: l.ExpiresAt, Expired: l.Expired}
	}
	for _, r := range st.Replicas {
		v.Live = append(v.Live, dashboard.Lease{Holder: r.Incarnation, Since: r.Since, ExpiresAt: r.ExpiresAt})
	}
	for _, j := range st.Jobs {
		v.Jobs = append(v.Jobs, dashboard.JobRun{Name: j.Name, Replica: j.Replica, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, Err: j.Error})
	}
	return v
}

// readyz answers 200 when the store answers and a scan has loaded the graph.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *api) graph(w http.ResponseWriter, r *http.Request) {
	projects, err := a.store.Projects(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	projects = a.scope(r).Projects(projects)
	writeJSON(w, http.StatusOK, report.Build(projects, scan.GraphOf(projects)))
}

func (a *api) chains(w http.ResponseWriter, r *http.Request) {
	f := chain.Filter{State: chain.State(r.URL.Query().Get("state"))}
	if f.State != "" && !slices.Contains(chain.States(), f.State) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("state %q: want one of %s", f.State, stateList()))
		return
	}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, errors.New("limit: want a positive number"))
			return
		}
		f.Limit = n
	}
	scope := a.scope(r)
	want := f.Limit
	if want == 0 {
		want = 100 // the engine's default
	}
	if !scope.Everything() {
		f.Limit = want * 5 // hidden chains take no place in the answer
	}
	views, err := a.engine.Chains(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if views = scope.Chains(views); len(views) > want {
		views = views[:want]
	}
	if views == nil {
		views = []chain.ChainView{} // [] rather than null: no chains
	}
	writeJSON(w, http.StatusOK, map[string]any{"chains": views})
}

func (a *api) chain(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, errors.New("chain id: want a number"))
		return
	}
	view, err := a.engine.Chain(r.Context(), id)
	if err == nil {
		var ok bool
		if view, ok = a.scope(r).Chain(view); !ok {
			err = fmt.Errorf("chain %d: %w", id, chain.ErrNotFound)
		}
	}
	writeView(w, view, err)
}

// validations is GET /api/v1/validations: the merge requests validated,
// the most recently changed first, with their newest validation, as the
// person may see them (?limit=, default 100).
func (a *api) validations(w http.ResponseWriter, r *http.Request) {
	f := chain.MRFilter{}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, errors.New("limit: want a positive number"))
			return
		}
		f.Limit = n
	}
	scope := a.scope(r)
	want := cmp.Or(f.Limit, 100)
	if !scope.Everything() {
		f.Limit = want * 5 // hidden ones take no place in the answer
	}
	views, err := a.engine.Validations(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if views = scope.Validations(views); len(views) > want {
		views = views[:want]
	}
	if views == nil {
		views = []chain.ValidationView{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"validations": views})
}

// validation is GET /api/v1/validations/{id}: one validation (a chain id)
// with its merge request and members.
func (a *api) validation(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, errors.New("validation id: want a number"))
		return
	}
	view, err := a.engine.Validation(r.Context(), id)
	if err == nil {
		var ok bool
		if view, ok = a.scope(r).Validation(view); !ok {
			err = fmt.Errorf("validation %d: %w", id, chain.ErrNotFound)
		}
	}
	writeView(w, view, err)
}

// stateList is "running, blocked, ..." for error messages.
func stateList() string {
	names := make([]string, 0, len(chain.States()))
	for _, s := range chain.States() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// statusHandler shows this replica, the store, the leader and the last run
// of each background job.
func (a *api) statusHandler(w http.ResponseWriter, r *http.Request) {
	st, err := a.status(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	scope := a.scope(r)
	for i := range st.Jobs {
		st.Jobs[i].Error = scope.Text(st.Jobs[i].Error)
	}
	writeJSON(w, http.StatusOK, st)
}

// freshnessHandler answers what `depsd freshness --json` prints, filtered
// by ?project= (repeatable), ?state= and ?max_age= (a Go duration,
// default 24h, the threshold of stale_beyond_max_age), one page at a
// time: ?limit= rows (default 100, at most 1,000) after ?after= (the
// previous page's next; also in a Link header with rel="next", as GitLab
// gives its pages). It answers 200 whatever is stale: a monitor reads
// stale_beyond_max_age, which counts over every page.
func (a *api) freshnessHandler(w http.ResponseWriter, r *http.Request) {
	q, err := freshnessQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	q.Scope = a.scope(r)
	rep, err := a.freshness(r.Context(), q)
	if errors.Is(err, verify.ErrCursor) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("after: %w (take the next of the page before)", err))
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if rep.Images == nil {
		rep.Images = []verify.Row{} // [] rather than null: nothing verified
	}
	if rep.Next != "" {
		next := r.URL.Query()
		next.Set("after", rep.Next)
		next.Set("limit", strconv.Itoa(rep.Limit))
		w.Header().Set("Link", fmt.Sprintf(`<%s?%s>; rel="next"`, r.URL.Path, next.Encode()))
	}
	writeJSON(w, http.StatusOK, rep)
}

// freshnessQuery reads the API's freshness filters and page.
func freshnessQuery(v url.Values) (FreshnessQuery, error) {
	q := FreshnessQuery{Projects: v["project"], State: verify.State(v.Get("state")), MaxAge: DefaultMaxAge,
		After: v.Get("after"), Limit: verify.DefaultPageLimit}
	if q.State != "" && !slices.Contains(verify.States(), q.State) {
		return q, fmt.Errorf("state %q: want one of fresh, stale, unknown", q.State)
	}
	if s := v.Get("max_age"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return q, fmt.Errorf("max_age %q: want a duration of 0 or more, such as 24h", s)
		}
		q.MaxAge = d
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, fmt.Errorf("limit %q: want a number of rows from 1 to %d", s, verify.MaxPageLimit)
		}
		q.Limit = n // Freshness caps it at verify.MaxPageLimit, as GitLab caps per_page
	}
	return q, nil
}

// auditHandler answers the audit log the person may see, newest first
// (?chain=ID for one chain's, ?limit= up to 1,000, default 100): what
// `depsd audit --json` prints.
func (a *api) auditHandler(w http.ResponseWriter, r *http.Request) {
	f := chain.AuditFilter{Limit: 100}
	if s := r.URL.Query().Get("chain"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, errors.New("chain: want a number"))
			return
		}
		f.ChainID = id
	}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, errors.New("limit: want 1 to 1000"))
			return
		}
		f.Limit = n
	}
	es, err := a.engine.Audit(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	scope := a.scope(r)
	es = scope.Audit(es, func(id int64) bool {
		c, err := a.engine.Chain(r.Context(), id)
		if err != nil {
			return false
		}
		_, ok := scope.Chain(c)
		return ok
	})
	writeJSON(w, http.StatusOK, map[string]any{"audit": es})
}

// writeView answers one view: 404 when it is not found (or hidden), 500 on
// another error.
func writeView(w http.ResponseWriter, view any, err error) {
	switch {
	case errors.Is(err, chain.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
	default:
		writeJSON(w, http.StatusOK, view)
	}
}
