package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/visible"
)

// Viewer is who asks for a page when people sign in (Options.Viewer).
type Viewer struct {
	// Name is the person's GitLab username; "" when sign-in is off (the
	// pages then show no person and no action).
	Name string
	// CSRF is the token the pages' action forms carry; "" shows none.
	CSRF string
	// Scope is what the person may see (nil: everything).
	Scope *visible.Scope
	// Key names the scope for the dashboard's caches: one Key, one scope.
	Key string
	// SeenAt is when GitLab last listed what the person may see.
	SeenAt time.Time
}

// reads is everything one request's page may read, through the viewer's
// scope. Handlers read nothing but through it (view_test.go checks every
// route with a person who may not see everything), so a new view cannot
// forget the filter.
type reads struct {
	d   *Dashboard
	ctx context.Context
	v   Viewer
}

func (d *Dashboard) reads(r *http.Request) *reads {
	v := Viewer{}
	if d.opts.Viewer != nil {
		v = d.opts.Viewer(r)
	}
	return &reads{d: d, ctx: r.Context(), v: v}
}

func (rd *reads) sees(project string) bool { return rd.v.Scope.Sees(project) }

// chains lists the chains f selects that the person may see, as they may
// see them (up to f.Limit of those).
func (rd *reads) chains(f chain.Filter) ([]chain.ChainView, error) {
	if f.Project != "" && !rd.sees(f.Project) {
		return nil, nil
	}
	want := f.Limit
	if !rd.v.Scope.Everything() && want > 0 {
		f.Limit = max(want*5, 200) // hidden chains take no place in the page
	}
	cs, err := rd.d.opts.Chains.Chains(rd.ctx, f)
	if err != nil {
		return nil, err
	}
	cs = rd.v.Scope.Chains(cs)
	if want > 0 && len(cs) > want {
		cs = cs[:want]
	}
	return cs, nil
}

// chain is one chain, ErrNotFound when the person may not see it.
func (rd *reads) chain(id int64) (chain.ChainView, error) {
	c, err := rd.d.opts.Chains.Chain(rd.ctx, id)
	if err != nil {
		return chain.ChainView{}, err
	}
	v, ok := rd.v.Scope.Chain(c)
	if !ok {
		return chain.ChainView{}, fmt.Errorf("chain %d: %w", id, chain.ErrNotFound)
	}
	return v, nil
}

// stats counts what the person may see of the engine's state.
func (rd *reads) stats() (chain.Stats, error) {
	s, err := rd.d.opts.Chains.Stats(rd.ctx)
	if err != nil || rd.v.Scope.Everything() {
		return s, err
	}
	var active []chain.ChainView
	for _, st := range []chain.State{chain.Running, chain.Blocked} {
		cs, err := rd.d.opts.Chains.Chains(rd.ctx, chain.Filter{State: st, Limit: 100000})
		if err != nil {
			return chain.Stats{}, err
		}
		active = append(active, cs...)
	}
	return rd.v.Scope.Stats(s, active), nil
}

// project is one project, scan.ErrNotFound when the person may not see it
// (as if it were not in scope).
func (rd *reads) project(path string) (scan.Project, error) {
	if !rd.sees(path) {
		return scan.Project{}, fmt.Errorf("project %s: %w", path, scan.ErrNotFound)
	}
	p, err := rd.d.opts.Store.Project(rd.ctx, deps.NodeProject(path))
	if err != nil {
		return p, err
	}
	at, ok := p.At(path) // a node: its ref's files and dependencies
	if !ok {
		return scan.Project{}, fmt.Errorf("project %s: %w", path, scan.ErrNotFound)
	}
	return at, nil
}

// graph is the graph of the projects the person may see.
func (rd *reads) graph() (*graphData, error) {
	all, err := rd.d.loadGraph(rd.ctx)
	if err != nil || rd.v.Scope.Everything() {
		return all, err
	}
	return rd.d.scopedGraph(all, rd.v), nil
}

// fullGraph is the whole graph, for what a rebuild would build beyond
// what the person sees: counted, never named.
func (rd *reads) fullGraph() (*graphData, error) { return rd.d.loadGraph(rd.ctx) }

// freshness reads the freshness rows of projects (all when none) the
// person may see.
func (rd *reads) freshness(projects ...string) ([]verify.Row, error) {
	if rd.d.opts.Freshness == nil {
		return nil, nil
	}
	rows, err := rd.d.opts.Freshness(rd.ctx, projects...)
	return rd.v.Scope.Rows(rows), err
}

// schedules lists the schedules, jobs and watches the person may see.
func (rd *reads) schedules() ([]scheduler.Entry, error) {
	if rd.d.opts.Schedules == nil {
		return nil, nil
	}
	es, err := rd.d.opts.Schedules(rd.ctx)
	return rd.v.Scope.Entries(es), err
}

// hooks is the last webhook check of the projects the person may see
// (group hooks only for those who see everything).
func (rd *reads) hooks() HookStatus {
	if rd.d.opts.Hooks == nil {
		return HookStatus{}
	}
	h := rd.d.opts.Hooks(rd.ctx)
	if rd.v.Scope.Everything() {
		return h
	}
	var kept []gitlab.HookChange
	for _, c := range h.Report.Changes {
		if !c.Group && rd.sees(c.Project) {
			kept = append(kept, c)
		}
	}
	h.Report.Changes = kept
	h.Err = rd.v.Scope.Text(h.Err)
	return h
}

// replicas names no project: the same for everyone.
func (rd *reads) replicas() (*Replicas, error) {
	if rd.d.opts.Replicas == nil {
		return nil, nil
	}
	r, err := rd.d.opts.Replicas(rd.ctx)
	return &r, err
}

// audit lists a chain's audit entries the person may see.
func (rd *reads) audit(chainID int64) ([]chain.AuditEntry, error) {
	if rd.d.opts.Audit == nil {
		return nil, nil
	}
	es, err := rd.d.opts.Audit(rd.ctx, chain.AuditFilter{ChainID: chainID, Limit: 50})
	if err != nil {
		return nil, err
	}
	return rd.v.Scope.Audit(es, func(id int64) bool { _, err := rd.chain(id); return err == nil }), nil
}

// scopedGraph is the graph of the projects v may see, built once per
// scope and scan (scopeGraphs).
func (d *Dashboard) scopedGraph(all *graphData, v Viewer) *graphData {
	d.scoped.mu.Lock()
	defer d.scoped.mu.Unlock()
	if d.scoped.of != all {
		d.scoped.of, d.scoped.byKey = all, map[string]*graphData{}
	}
	if g, ok := d.scoped.byKey[v.Key]; ok && v.Key != "" {
		return g
	}
	projects := v.Scope.Projects(all.projects)
	data := newGraphData(all.scan, all.scanned, projects)
	// The scan's counts, of what the person sees.
	data.scan.Projects, data.scan.Edges, data.scan.Cycles = len(data.doc.Projects), data.g.EdgeCount(), len(data.doc.Cycles)
	ext := map[string]bool{}
	data.scan.Warnings = 0
	for _, p := range data.doc.Projects {
		for _, e := range p.External {
			ext[e] = true
		}
		data.scan.Warnings += len(p.Warnings)
	}
	data.scan.External = len(ext)
	if len(d.scoped.byKey) >= maxScopedGraphs {
		clear(d.scoped.byKey)
	}
	if v.Key != "" {
		d.scoped.byKey[v.Key] = data
	}
	return data
}

// maxScopedGraphs bounds the graphs kept for people's scopes.
const maxScopedGraphs = 64

// newGraphData builds the graph document of projects.
func newGraphData(meta scan.Meta, scanned bool, projects []scan.Project) *graphData {
	g := scan.GraphOf(projects)
	data := &graphData{scan: meta, scanned: scanned, g: g, doc: report.Build(projects, g), projects: projects,
		targets: make(map[string]report.HistoryTarget, len(projects))}
	data.byPath = make(map[string]*report.Project, len(data.doc.Projects))
	for i := range data.doc.Projects {
		data.byPath[data.doc.Projects[i].Path] = &data.doc.Projects[i]
	}
	for _, p := range projects {
		data.targets[p.Path] = report.HistoryTarget{Path: p.Path, ID: p.ID, Ref: p.DefaultBranch}
	}
	return data
}

// notFound reports whether err means the thing asked for is absent (or
// hidden, which the person cannot tell apart).
func notFound(err error) bool {
	return errors.Is(err, chain.ErrNotFound) || errors.Is(err, scan.ErrNotFound)
}
