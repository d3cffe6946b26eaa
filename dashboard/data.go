package dashboard

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
)

// graphData is one stored scan seen as a graph.
type graphData struct {
	scan    scan.Meta
	scanned bool
	g       *deps.Graph
	doc     report.Graph
	byPath  map[string]*report.Project
	targets map[string]report.HistoryTarget
	// projects are those the graph was built of.
	projects []scan.Project
}

// loadGraph returns the graph of the newest stored scan, from the cache
// when no scan was stored since.
func (d *Dashboard) loadGraph(ctx context.Context) (*graphData, error) {
	meta, ok, err := d.opts.Store.LastScan(ctx)
	if err != nil {
		return nil, err
	}
	d.graph.mu.Lock()
	defer d.graph.mu.Unlock()
	if d.graph.data != nil && d.graph.data.scanned == ok && d.graph.scan.Equal(meta.StartedAt) {
		return d.graph.data, nil
	}
	projects, err := d.opts.Store.Projects(ctx)
	if err != nil {
		return nil, err
	}
	data := newGraphData(meta, ok, projects)
	d.graph.data, d.graph.scan = data, meta.StartedAt
	return data, nil
}

// nodeName is how pages name a node: project@branch for the default
// branch of a project with several nodes (deps.NodeLabel), else its key,
// as the last graph loaded knows it (the key itself before one is).
func (d *Dashboard) nodeName(key string) string {
	d.graph.mu.Lock()
	data := d.graph.data
	d.graph.mu.Unlock()
	if data == nil {
		return key
	}
	if p, ok := data.byPath[key]; ok {
		return p.Name()
	}
	return key
}

// chainView is a chain with its members grouped by wave.
type chainView struct {
	chain.ChainView
	Waves []waveView
	// Counts summarises the members by state, in a fixed order.
	Counts []stateCount
	// Live: the page refreshes the chain while it runs.
	Live bool
	// Images is the verdict on each member's images since its build in
	// the chain (the chain page only; none before a verification).
	Images map[string]*imageSummary
	// CSRF is the action forms' token, and Actions whether to show them
	// (a signed-in person, an active chain); Audit is the chain's audit
	// log (the chain page only).
	CSRF    string
	Actions bool
	Audit   []chain.AuditEntry
}

type waveView struct {
	N       int
	Members []chain.MemberView
}

type stateCount struct {
	State chain.MemberState
	N     int
}

// memberOrder is the order states are counted in, most urgent first.
func memberOrder() []chain.MemberState {
	return []chain.MemberState{
		chain.MemberRunning, chain.Verifying, chain.Triggered, chain.Pending, chain.WaitingMerge, chain.Waiting,
		chain.Failed, chain.Canceled, chain.Stale, chain.MemberBlocked, chain.MemberExpired, chain.MemberSkipped, chain.Success,
	}
}

// viewChain groups the members by wave: a member's wave is one more than
// the highest wave of its in-chain upstreams, as in a rebuild plan.
func viewChain(c chain.ChainView) chainView {
	byName := make(map[string]chain.MemberView, len(c.Members))
	for _, m := range c.Members {
		byName[m.Project] = m
	}
	wave := map[string]int{}
	var level func(p string, depth int) int
	level = func(p string, depth int) int {
		if w, ok := wave[p]; ok {
			return w
		}
		w := 0
		if depth < len(c.Members) { // a chain has no cycles; the bound is a guard
			for _, u := range byName[p].Upstreams {
				if _, in := byName[u]; in {
					w = max(w, level(u, depth+1)+1)
				}
			}
		}
		wave[p] = w
		return w
	}
	v := chainView{ChainView: c, Live: c.State.Active()}
	counts := map[chain.MemberState]int{}
	for _, m := range c.Members {
		w := level(m.Project, 0)
		for len(v.Waves) <= w {
			v.Waves = append(v.Waves, waveView{N: len(v.Waves)})
		}
		v.Waves[w].Members = append(v.Waves[w].Members, m)
		counts[m.State]++
	}
	for _, s := range memberOrder() {
		if counts[s] > 0 {
			v.Counts = append(v.Counts, stateCount{State: s, N: counts[s]})
		}
	}
	return v
}

// estimate reads the typical durations of the members of a rebuild of
// project (from the cache, or GitLab within the page's time budget) and
// estimates the rebuild.
func (d *Dashboard) estimate(ctx context.Context, data *graphData, project string) (est report.Estimate, unread int) {
	now := d.opts.Now()
	typical := map[string]time.Duration{}
	var missing []report.HistoryTarget
	d.history.mu.Lock()
	for _, w := range data.g.Waves(project) {
		for _, m := range w {
			e, ok := d.history.entries[m]
			switch {
			case ok && now.Sub(e.at) < historyTTL:
				if e.known {
					typical[m] = e.typical
				}
			default:
				if t, ok := data.targets[m]; ok {
					missing = append(missing, t)
				}
			}
		}
	}
	d.history.mu.Unlock()
	if len(missing) > 0 && d.opts.History != nil {
		fctx, cancel := context.WithTimeout(ctx, d.opts.EstimateTimeout)
		got, failed := report.FetchDurations(fctx, d.opts.History, missing, 8)
		cancel()
		d.history.mu.Lock()
		for _, t := range missing {
			if _, bad := failed[t.Path]; bad {
				unread++
				continue
			}
			typ, known := got[t.Path]
			d.history.entries[t.Path] = historyEntry{typical: typ, known: known, at: now}
			if known {
				typical[t.Path] = typ
			}
		}
		d.history.mu.Unlock()
		if len(failed) > 0 {
			d.log.Warn("pipeline history not read for some projects", "project", project, "failed", len(failed))
		}
	}
	return report.EstimateRebuild(data.g, project, typical), unread
}

// fileView is a dependency file with the lines that declare dependencies
// or carry warnings marked.
type fileView struct {
	Name  string
	Lines []lineView
	// Marked counts the lines that matter.
	Marked int
}

type lineView struct {
	N     int
	Text  string
	Notes []string // what the line declares
	Warns []string // warnings about the line
}

// viewFiles marks, in each file, the lines of its dependencies and
// warnings. Dependencies of .gitlab-deps lines are in that file; the others
// come from the Containerfile or Dockerfile the scan analysed.
func viewFiles(p scan.Project) []fileView {
	notes := map[string]map[int][]string{}
	warns := map[string]map[int][]string{}
	add := func(m map[string]map[int][]string, file string, line int, s string) {
		if m[file] == nil {
			m[file] = map[int][]string{}
		}
		m[file][line] = append(m[file][line], s)
	}
	for _, dep := range p.Dependencies {
		file := p.File
		if dep.Kind == deps.KindGitLabDeps {
			file = ".gitlab-deps"
		}
		add(notes, file, dep.Line, describeDep(dep))
	}
	for _, w := range p.Warnings {
		add(warns, w.File, w.Line, w.Message)
	}
	var out []fileView
	for _, f := range p.Files {
		fv := fileView{Name: f.Name}
		text := strings.TrimSuffix(string(f.Content), "\n")
		for i, l := range strings.Split(text, "\n") {
			lv := lineView{N: i + 1, Text: l, Notes: notes[f.Name][i+1], Warns: warns[f.Name][i+1]}
			if len(lv.Notes)+len(lv.Warns) > 0 {
				fv.Marked++
			}
			fv.Lines = append(fv.Lines, lv)
		}
		out = append(out, fv)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name == p.File && out[j].Name != p.File })
	return out
}

func describeDep(dep deps.Dependency) string {
	kind := map[deps.Kind]string{deps.KindFrom: "FROM", deps.KindCopyFrom: "COPY --from", deps.KindMountFrom: "RUN --mount from", deps.KindGitLabDeps: "declared upstream"}[dep.Kind]
	switch {
	case dep.Project != "" && dep.Pinned:
		s := kind + " project " + dep.Project + ", pinned by digest " + report.ShortDigest(dep.Digest)
		if dep.Tag != "" {
			s += " (tag " + dep.Tag + ")"
		}
		return s
	case dep.Project != "":
		return kind + " project " + dep.Project
	case dep.Image != "":
		return kind + " external image " + dep.Image
	}
	return kind + " " + dep.Ref + " (not resolved)"
}

// pipelineRow is one pipeline of a project that depsd created or that
// started a chain.
type pipelineRow struct {
	ChainID    int64
	ChainState chain.State
	State      string // the member's state, or "started the chain"
	PipelineID int64
	URL        string
	At         time.Time
	Why        string
}

// projectPipelines lists the project's pipelines recorded in its recent
// chains, newest chain first.
func projectPipelines(chains []chain.ChainView, project string) []pipelineRow {
	var rows []pipelineRow
	for _, c := range chains {
		for _, r := range c.Reasons {
			if r.Kind == chain.ReasonPipeline && r.Project == project && r.PipelineID != 0 {
				rows = append(rows, pipelineRow{ChainID: c.ID, ChainState: c.State, State: "success (started the chain)", PipelineID: r.PipelineID, At: r.At, Why: r.Detail})
			}
		}
		for _, m := range c.Members {
			if m.Project != project || m.PipelineID == 0 {
				continue
			}
			at := c.Started
			if m.TriggeredAt != nil {
				at = *m.TriggeredAt
			}
			rows = append(rows, pipelineRow{ChainID: c.ID, ChainState: c.State, State: string(m.State), PipelineID: m.PipelineID, URL: m.PipelineURL, At: at, Why: m.Why})
		}
	}
	slices.SortStableFunc(rows, func(a, b pipelineRow) int { return b.At.Compare(a.At) })
	return rows
}
