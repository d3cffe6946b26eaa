package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
)

// page is what every template gets: the page's own data and the layout's.
type page struct {
	Title  string
	Nav    string // the nav entry to mark current
	Data   any
	Viewer Viewer // who asks (sign-in); zero when sign-in is off
}

// render writes the whole page, or only the template named by ?part= (the
// live parts the script refreshes), buffered so that a template error
// becomes a clean 500 rather than half a page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, code int, name string, p page, parts ...string) {
	if d.opts.Viewer != nil {
		p.Viewer = d.opts.Viewer(r)
	}
	// The names of nodes (nodeName) come from the stored scan's graph,
	// kept until the next scan: a page that did not need it loads it.
	if _, err := d.loadGraph(r.Context()); err != nil {
		d.log.Warn("graph not loaded: nodes are named by their keys", "err", err)
	}
	tmpl, data := "layout", any(p)
	if part := r.URL.Query().Get("part"); part != "" {
		if !slices.Contains(parts, part) {
			d.fail(w, r, http.StatusBadRequest, fmt.Errorf("unknown part %q", part))
			return
		}
		tmpl, data = part, p.Data
	}
	var buf bytes.Buffer
	if err := d.pages[name].ExecuteTemplate(&buf, tmpl, data); err != nil {
		d.log.Error("render page", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// fail renders the error page: what went wrong, in the user's terms.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		d.log.Error("dashboard page failed", "path", r.URL.Path, "err", err)
	}
	var buf bytes.Buffer
	p := page{Title: http.StatusText(code), Data: map[string]any{"Code": code, "Err": err.Error()}}
	if d.opts.Viewer != nil {
		p.Viewer = d.opts.Viewer(r)
	}
	if terr := d.pages["error"].ExecuteTemplate(&buf, "layout", p); terr != nil {
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// chainsPage: the active chains first (refreshed live), then history.
func (d *Dashboard) chainsPage(w http.ResponseWriter, r *http.Request) {
	all, err := d.reads(r).chains(chain.Filter{Limit: 50})
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	var active, history []chainView
	for _, c := range all {
		if c.State == chain.Merged {
			continue
		}
		v := viewChain(c)
		if c.State.Active() {
			active = append(active, v)
		} else {
			history = append(history, v)
		}
	}
	// Running before blocked, each newest first (as listed).
	slices.SortStableFunc(active, func(a, b chainView) int {
		return boolRank(a.State == chain.Running) - boolRank(b.State == chain.Running)
	})
	d.render(w, r, http.StatusOK, "chains", page{Title: "Chains", Nav: "chains", Data: map[string]any{"Active": active, "History": history}}, "active")
}

func boolRank(b bool) int {
	if b {
		return 0
	}
	return 1
}

// chainPage: one chain, refreshed live while active.
func (d *Dashboard) chainPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, fmt.Errorf("chain id %q: want a number", r.PathValue("id")))
		return
	}
	rd := d.reads(r)
	c, err := rd.chain(id)
	switch {
	case notFound(err):
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("there is no chain %d", id))
		return
	case err != nil:
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if c.Kind == chain.KindValidation && r.URL.Query().Get("part") == "" {
		// A validation has its own page, with its merge request.
		http.Redirect(w, r, "/validations/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
		return
	}
	v := viewChain(c)
	v.Images = rd.memberImages(c)
	v.CSRF = rd.v.CSRF
	v.Actions = v.CSRF != "" && c.State.Active()
	if v.Audit, err = rd.audit(id); err != nil {
		d.log.Warn("audit log not read", "chain_id", id, "err", err)
	}
	d.render(w, r, http.StatusOK, "chain", page{Title: fmt.Sprintf("Chain %d", id), Nav: "chains", Data: v}, "chain")
}

// graphView is the graph page's data.
type graphView struct {
	Scanned bool
	Focus   string
	Depth   int
	// AutoDepth: the focus view's depth was chosen to keep the picture
	// readable (maxFocusPicture), not asked for.
	AutoDepth bool
	Mode      string // "full", "focus" or "overview"
	Total     int    // projects in the graph
	Shown     int    // projects in the picture
	Edges     int
	Projects  []string // for the search box, in the page (up to inlineSearch)
	// ProjectsSrc is where the search box's list is fetched from the
	// first time it is used, when there are too many to put in the page.
	ProjectsSrc string
	SVG         template.HTML
	// Columns lists the pictured projects column by column: the text
	// alternative of the picture.
	Columns    [][]string
	Upstream   []string // focus: every project it is built from
	Downstream []string // focus: every project built from it
	Cycles     [][]string
	Error      string
}

// graphPage draws the whole graph when it is small, an overview of the
// projects most others build on when it is large, and the focus view of
// one project (?focus=P&depth=N) at any size.
func (d *Dashboard) graphPage(w http.ResponseWriter, r *http.Request) {
	data, err := d.reads(r).graph()
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v := graphView{Scanned: data.scanned, Total: len(data.doc.Projects), Edges: data.g.EdgeCount(), Cycles: data.doc.Cycles}
	if len(data.doc.Projects) > inlineSearch {
		v.ProjectsSrc = "/graph/projects"
	} else {
		for _, p := range data.doc.Projects {
			v.Projects = append(v.Projects, p.Path)
		}
	}
	doc, opts, err := d.pictured(data, r.URL.Query(), &v)
	code := http.StatusOK
	if err != nil {
		v.Error, code = err.Error(), http.StatusBadRequest
		doc, opts, v.Mode = report.Graph{}, report.LayoutOptions{}, "none"
	}
	pic := report.Layout(doc, opts)
	v.Shown = pic.Projects
	if v.Mode == "focus" {
		v.Cycles = doc.Cycles
	}
	for _, n := range pic.Nodes {
		if n.External {
			continue
		}
		for len(v.Columns) <= n.Layer {
			v.Columns = append(v.Columns, nil)
		}
		v.Columns[n.Layer] = append(v.Columns[n.Layer], n.Name)
	}
	v.Columns = slices.DeleteFunc(v.Columns, func(c []string) bool { return len(c) == 0 })
	for _, c := range v.Columns {
		sort.Strings(c)
	}
	if len(doc.Projects) > 0 {
		var svg bytes.Buffer
		title := "Dependency graph"
		if v.Focus != "" {
			title += " around " + v.Focus
		}
		report.WriteSVG(&svg, pic, report.SVGOptions{Title: title, Link: func(n report.Node) string {
			if n.External {
				return ""
			}
			return focusURL(n.Name)
		}})
		v.SVG = template.HTML(svg.String()) // drawn by report.WriteSVG, which escapes every name
	}
	d.render(w, r, code, "graph", page{Title: "Graph", Nav: "graph", Data: v})
}

// inlineSearch is how many projects the graph page's search box lists in
// the page itself. Beyond it the list is fetched when the box is first
// used (static/search.js): 10,000 options cost the browser most of a
// second on every graph page, picture or not.
const inlineSearch = 1000

// graphProjects is the search box's list of a large graph: an <option>
// per project, which static/search.js puts in the page's datalist.
func (d *Dashboard) graphProjects(w http.ResponseWriter, r *http.Request) {
	data, err := d.reads(r).graph()
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	var b strings.Builder
	for _, p := range data.doc.Projects {
		b.WriteString(`<option value="`)
		b.WriteString(template.HTMLEscapeString(p.Path))
		b.WriteString(`">`)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, b.String())
}

// pictured picks what the graph page draws.
func (d *Dashboard) pictured(data *graphData, q url.Values, v *graphView) (report.Graph, report.LayoutOptions, error) {
	if focus := strings.TrimSpace(q.Get("focus")); focus != "" {
		v.Focus, v.Mode = focus, "focus"
		if s := q.Get("depth"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return report.Graph{}, report.LayoutOptions{}, fmt.Errorf("depth %q: want 0 (no bound) or a positive number", s)
			}
			v.Depth = n
		}
		doc, err := report.Around(data.doc, focus, v.Depth)
		if err != nil {
			return report.Graph{}, report.LayoutOptions{}, err
		}
		if q.Get("depth") == "" && len(doc.Projects) > maxFocusPicture {
			doc, v.Depth = nearest(data.doc, focus, doc)
			v.AutoDepth = true
		}
		v.Upstream, v.Downstream = ancestors(data, focus), data.g.Affected(focus)
		return doc, report.LayoutOptions{Focus: focus}, nil
	}
	if len(data.doc.Projects) <= d.opts.MaxFullGraph {
		v.Mode = "full"
		return data.doc, report.LayoutOptions{}, nil
	}
	v.Mode = "overview"
	keep, notes := hubs(data, overviewSize)
	return report.Subset(data.doc, keep), report.LayoutOptions{Notes: notes}, nil
}

// maxFocusPicture is how many projects a focus view draws unless the
// depth is asked for: a base image of a 10,000-project instance has 2,000
// projects downstream, whose picture alone took the browser 1-2 s to draw
// (issue 30's goal: the page in under 2 s). Beyond it the view draws
// what lies within the largest depth that stays under it, at least one
// edge; the lists below the picture name every upstream and downstream,
// and depth=0 draws them all.
const maxFocusPicture = 500

// nearest is the focus view of project within the largest depth whose
// picture holds at most maxFocusPicture projects (at least depth 1); all
// is the whole view (depth 0), which holds more.
func nearest(doc report.Graph, project string, all report.Graph) (report.Graph, int) {
	best, depth := all, 0
	for d := 1; ; d++ {
		g, err := report.Around(doc, project, d)
		if err != nil || len(g.Projects) == len(all.Projects) || (d > 1 && len(g.Projects) > maxFocusPicture) {
			return best, depth
		}
		best, depth = g, d
	}
}

// overviewSize is how many projects the overview of a large graph draws.
const overviewSize = 40

// hubs picks the n projects with the most (transitive) downstreams, the
// ones a person usually wants to find, and notes how many each has.
func hubs(data *graphData, n int) (map[string]bool, map[string]string) {
	type hub struct {
		path     string
		affected int
	}
	var all []hub
	for _, p := range data.doc.Projects {
		if len(p.Downstream) > 0 {
			all = append(all, hub{p.Path, len(data.g.Affected(p.Path))})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].affected > all[j].affected })
	keep, notes := map[string]bool{}, map[string]string{}
	for _, h := range all[:min(n, len(all))] {
		keep[h.path] = true
		notes[h.path] = fmt.Sprintf("%d downstream", h.affected)
	}
	return keep, notes
}

// ancestors is every project p is built from, directly or not, sorted.
func ancestors(data *graphData, p string) []string {
	seen := map[string]bool{p: true}
	queue := []string{p}
	for i := 0; i < len(queue); i++ {
		for _, u := range data.g.Upstream(queue[i]) {
			if !seen[u] {
				seen[u] = true
				queue = append(queue, u)
			}
		}
	}
	out := queue[1:]
	sort.Strings(out)
	return out
}

// graphSVG is the picture alone, as `depsd graph --format svg [--around]`
// writes it.
func (d *Dashboard) graphSVG(w http.ResponseWriter, r *http.Request) {
	data, err := d.reads(r).graph()
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	doc := data.doc
	if focus := r.URL.Query().Get("focus"); focus != "" {
		depth := 0
		if s := r.URL.Query().Get("depth"); s != "" {
			if depth, err = strconv.Atoi(s); err != nil {
				d.fail(w, r, http.StatusBadRequest, fmt.Errorf("depth %q: want a number", s))
				return
			}
		}
		if doc, err = report.Around(doc, focus, depth); err != nil {
			d.fail(w, r, http.StatusBadRequest, err)
			return
		}
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, "svg", doc); err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(buf.Bytes())
}

// projectView is the project page's data.
type projectView struct {
	scan.Project
	Files    []fileView
	Upstream []string
	// Pins are the upstreams it pins by digest (report.Project.UpstreamPins).
	Pins       map[string]report.Pin
	Downstream []string
	External   []string
	OnCycle    bool
	Pipelines  []pipelineRow
	Schedules  []scheduler.Entry
	Estimate   *report.Estimate
	Unread     int    // members whose history could not be read
	NoEstimate string // why there is no estimate
	// Images are the project's verified images, stalest first; ImagesErr
	// says why they could not be read.
	Images    []verify.Row
	ImagesErr string
	Verifying bool // the dashboard reads verifications
	// HiddenDownstream counts what a rebuild builds that the person may
	// not see (and the estimate leaves out).
	HiddenDownstream int
	CSRF             string // the action forms' token; "" shows none
}

func (d *Dashboard) projectPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rd := d.reads(r)
	path := strings.Trim(r.PathValue("path"), "/")
	p, err := rd.project(path)
	switch {
	case errors.Is(err, scan.ErrNotFound):
		d.fail(w, r, http.StatusNotFound, fmt.Errorf("project %s is not in the scanned graph", path))
		return
	case err != nil:
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	data, err := rd.graph()
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v := projectView{Project: p, Files: viewFiles(p), Upstream: data.g.Upstream(path), Downstream: data.g.Downstream(path), CSRF: rd.v.CSRF}
	if full, err := rd.fullGraph(); err == nil && full != data {
		v.HiddenDownstream = len(full.g.Affected(path)) - len(data.g.Affected(path))
	}
	if rp, ok := data.byPath[path]; ok {
		v.External, v.Pins = rp.External, rp.UpstreamPins
	}
	for _, c := range data.doc.Cycles {
		v.OnCycle = v.OnCycle || slices.Contains(c, path)
	}
	chains, err := rd.chains(chain.Filter{Project: path, Limit: 20})
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v.Pipelines = projectPipelines(chains, path)
	entries, err := rd.schedules()
	if err != nil {
		d.log.Warn("schedules not listed", "err", err)
	}
	for _, e := range entries {
		if e.Target == path || slices.Contains(e.Projects, path) {
			v.Schedules = append(v.Schedules, e)
		}
	}
	if d.opts.Freshness != nil {
		v.Verifying = true
		if v.Images, err = rd.freshness(path); err != nil {
			v.ImagesErr = err.Error()
		}
	}
	switch {
	case v.OnCycle:
		v.NoEstimate = "The project is on a dependency cycle: depsd never rebuilds it in a chain."
	case !data.g.Has(path):
		v.NoEstimate = "The project is not in the graph of the last scan."
	default:
		est, unread := d.estimate(ctx, data, path)
		v.Estimate, v.Unread = &est, unread
		if d.opts.History == nil {
			v.NoEstimate = "GitLab is not configured: no durations to estimate from."
		}
	}
	d.render(w, r, http.StatusOK, "project", page{Title: path, Nav: "graph", Data: v})
}

// hookRow is one project's webhook, as the last check found it.
type hookRow struct {
	Project string
	State   string // ok, missing, disabled, failing, unknown
	Done    string // what depsd did about it
	Reasons []string
}

// HookState is the state a hook was found in (ok, missing, disabled,
// failing) as the health page shows it; the daemon's metrics count hooks by
// it.
func HookState(c gitlab.HookChange, dryRun bool) string {
	state, _ := hookState(c, dryRun)
	return state
}

// hookState maps what SyncHooks did (or, in a dry run, would do) to the
// state the hook was found in.
func hookState(c gitlab.HookChange, dryRun bool) (state, done string) {
	if dryRun {
		state, _ = hookState(c, false)
		switch c.Action {
		case gitlab.HookUnchanged, gitlab.HookTemporarilyDisabled:
			return state, ""
		case gitlab.HookUpdated:
			return state, "settings differ: the maintenance run repairs them"
		}
		return state, "the maintenance run repairs it"
	}
	switch c.Action {
	case gitlab.HookCreated:
		return "missing", "created"
	case gitlab.HookReenabled:
		return "disabled", "re-enabled"
	case gitlab.HookStillDisabled:
		return "disabled", "re-enabling failed"
	case gitlab.HookTemporarilyDisabled:
		return "failing", "GitLab retries it by itself"
	case gitlab.HookUpdated:
		// A paused hook with drifted settings (e.g. no signing token yet,
		// after an upgrade) is edited but stays paused.
		if slices.ContainsFunc(c.Reasons, func(r string) bool { return strings.HasPrefix(r, "disabled until ") }) {
			return "failing", "settings repaired; GitLab retries it by itself"
		}
		return "ok", "settings repaired"
	case gitlab.HookDeletedDuplicate:
		return "ok", "duplicate deleted"
	case gitlab.HookGroupRefused:
		return "missing", "GitLab refused the group hook: project hooks kept"
	case gitlab.HookReplacedByGroup:
		return "ok", "project hook replaced by the group hook"
	case gitlab.HookCoveredByGroup:
		return "ok", "the group hook delivers its events"
	}
	return "ok", ""
}

// healthView is the health page's data.
type healthView struct {
	Scan        scan.Meta
	Scanned     bool
	Stats       chain.Stats
	StatsErr    string
	Hooks       HookStatus
	HookRows    []hookRow
	HookCount   map[string]int
	Schedules   []scheduler.Entry
	Watches     []scheduler.Entry
	SchedErr    string
	Replicas    *Replicas
	ReplicasErr string
}

func (d *Dashboard) healthPage(w http.ResponseWriter, r *http.Request) {
	rd := d.reads(r)
	data, err := rd.graph()
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v := healthView{Scan: data.scan, Scanned: data.scanned, HookCount: map[string]int{}}
	if v.Stats, err = rd.stats(); err != nil {
		v.StatsErr = err.Error()
	}
	v.Hooks = rd.hooks()
	if v.Replicas, err = rd.replicas(); err != nil {
		v.ReplicasErr = err.Error()
	}
	found := map[string]hookRow{}
	for _, c := range v.Hooks.Report.Changes {
		state, done := hookState(c, v.Hooks.Report.DryRun)
		if prev, ok := found[c.Project]; ok && prev.State != "ok" {
			continue // a duplicate's deletion does not hide a worse state
		}
		found[c.Project] = hookRow{Project: c.Project, State: state, Done: done, Reasons: c.Reasons}
	}
	for _, p := range data.doc.Projects {
		row, ok := found[p.Path]
		if !ok {
			row = hookRow{Project: p.Path, State: "unknown"}
		}
		v.HookRows = append(v.HookRows, row)
		v.HookCount[row.State]++
	}
	// Problems first, then by path.
	rank := map[string]int{"disabled": 0, "failing": 1, "missing": 2, "unknown": 3, "ok": 4}
	slices.SortStableFunc(v.HookRows, func(a, b hookRow) int { return rank[a.State] - rank[b.State] })
	entries, err := rd.schedules()
	if err != nil {
		v.SchedErr = err.Error()
	}
	for _, e := range entries {
		if e.Kind == scheduler.KindWatch {
			v.Watches = append(v.Watches, e)
		} else {
			v.Schedules = append(v.Schedules, e)
		}
	}
	d.render(w, r, http.StatusOK, "health", page{Title: "Health", Nav: "health", Data: v})
}

// projectURL is the project page of path; each segment is escaped.
func projectURL(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/projects/" + strings.Join(segs, "/")
}

// focusURL is the graph page focused on path.
func focusURL(path string) string { return "/graph?focus=" + url.QueryEscape(path) }

// templateFuncs are the helpers the templates use; now is the clock.
func templateFuncs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"projectURL": projectURL,
		"count":      count,
		"focusURL":   focusURL,
		"icon":       stateIcon,
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"whenp": func(t *time.Time) string {
			if t == nil || t.IsZero() {
				return "-"
			}
			return t.UTC().Format("15:04:05")
		},
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			d := now().Sub(t)
			if d < 0 {
				return "in " + report.FormatDuration(-d)
			}
			return report.FormatDuration(d) + " ago"
		},
		"dur":    report.FormatDuration,
		"join":   strings.Join,
		"hidden": func(project string) bool { return strings.HasPrefix(project, "hidden-") },
		"short": func(s string, n int) string {
			if len(s) <= n {
				return s
			}
			return s[:n]
		},
		"add":     func(a, b int) int { return a + b },
		"verdict": verdictIcon,
		"fixURL":  fixURL,
		// mrRef names a merge request by its URL: "merge request !4".
		"mrRef": func(url string) string {
			if i := strings.LastIndexByte(url, '/'); i >= 0 && i < len(url)-1 {
				return "merge request !" + url[i+1:]
			}
			return "merge request"
		},
		"digest": func(s string) string {
			if len(s) > len("sha256:")+12 {
				return s[:len("sha256:")+12]
			}
			return s
		},
		"since": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return report.FormatDuration(now().Sub(t))
		},
		"typical": func(e *report.Estimate, p string) string {
			if d, ok := e.Typical[p]; ok {
				return report.FormatDuration(d)
			}
			return "no history"
		},
	}
}

// stateIcon gives every state a glyph so that states differ without
// colour (chains, members, hooks).
func stateIcon(state any) string {
	switch fmt.Sprint(state) {
	case "success", "finished", "ok":
		return "✓"
	case "failed", "disabled":
		return "✗"
	case "running":
		return "▶"
	case "triggered", "pending":
		return "▷"
	case "waiting":
		return "◷"
	case "waiting-merge":
		return "⇄"
	case "blocked":
		return "⊘"
	case "canceled":
		return "■"
	case "verifying":
		return "◎"
	case "stale":
		return "≠"
	case "skipped":
		return "↷"
	case "expired":
		return "⌛"
	case "failing":
		return "!"
	case "missing":
		return "∅"
	case "merged":
		return "⇢"
	case "opened": // a merge request
		return "○"
	case "closed":
		return "×"
	}
	return "?"
}

// count says n things in words: "1 project", "7 projects". noun is the
// singular; every noun the pages count takes an s.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
