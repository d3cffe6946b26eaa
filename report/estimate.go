package report

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// PipelineHistory reads how long a project's pipelines took; *gitlab.Client
// implements it. SuccessfulDurations returns GitLab's `duration` of up to n
// of the most recent successful pipelines on ref, newest first; none is not
// an error. Calls may be concurrent.
type PipelineHistory interface {
	SuccessfulDurations(ctx context.Context, projectID int64, ref string, n int) ([]time.Duration, error)
}

// HistoryTarget names a project whose history to read.
type HistoryTarget struct {
	Path string
	ID   int64
	Ref  string // the node's ref: its branch, or its newest release tag
}

// HistoryRuns is how many recent successful pipelines an estimate looks at
// per project; their median is the project's typical duration.
const HistoryRuns = 3

// FetchDurations reads the typical pipeline duration (the median of the last
// HistoryRuns successful default-branch pipelines) of each target, with at
// most concurrency requests at a time. Projects without a successful
// pipeline are absent from the result; a project whose history could not be
// read is in failed with the error, and the others are still returned.
func FetchDurations(ctx context.Context, h PipelineHistory, targets []HistoryTarget, concurrency int) (typical map[string]time.Duration, failed map[string]error) {
	typical, failed = map[string]time.Duration{}, map[string]error{}
	var mu sync.Mutex
	// A plain group: one project's failure must not cancel the others;
	// ctx (the caller's deadline) bounds them all.
	var g errgroup.Group
	g.SetLimit(max(concurrency, 1))
	for _, t := range targets {
		g.Go(func() error {
			runs, err := h.SuccessfulDurations(ctx, t.ID, t.Ref, HistoryRuns)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed[t.Path] = err
			case len(runs) > 0:
				typical[t.Path] = median(runs)
			}
			return nil
		})
	}
	g.Wait()
	return typical, failed
}

func median(runs []time.Duration) time.Duration {
	s := slices.Clone(runs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Estimate is what a rebuild of a project would build and roughly cost.
type Estimate struct {
	Project string     `json:"project"`
	Waves   [][]string `json:"waves"`
	// Typical is each member's typical pipeline duration, for members
	// with history.
	Typical map[string]time.Duration `json:"typical"`
	// Wall is the expected wall time: the longest chain of builds, each
	// member starting when its last in-chain upstream finishes (the
	// critical path), counting members without history as zero.
	Wall time.Duration `json:"wall"`
	// CriticalPath is the members along Wall, in build order.
	CriticalPath []string `json:"critical_path"`
	// Total is the sum of the members' pipeline durations: the runner time
	// the rebuild uses.
	Total time.Duration `json:"total"`
	// NoHistory lists the members with no successful default-branch
	// pipeline to go by (not counted in Wall and Total).
	NoHistory []string `json:"no_history"`
}

// EstimateRebuild plans a rebuild of project on g (the waves of
// `depsd rebuild --dry-run`) and estimates it from the members' typical
// durations.
func EstimateRebuild(g *deps.Graph, project string, typical map[string]time.Duration) Estimate {
	est := Estimate{Project: project, Waves: g.Waves(project), Typical: map[string]time.Duration{}, NoHistory: []string{}}
	member := map[string]bool{}
	for _, w := range est.Waves {
		for _, p := range w {
			member[p] = true
		}
	}
	finish := map[string]time.Duration{}
	via := map[string]string{}
	last := ""
	for _, w := range est.Waves {
		for _, p := range w {
			d, ok := typical[p]
			if ok {
				est.Typical[p] = d
			} else {
				est.NoHistory = append(est.NoHistory, p)
			}
			start := time.Duration(0)
			for _, u := range g.Upstream(p) {
				if member[u] && (via[p] == "" || finish[u] > start) {
					start, via[p] = finish[u], u
				}
			}
			finish[p] = start + d
			est.Total += d
			if last == "" || finish[p] > est.Wall {
				est.Wall, last = finish[p], p
			}
		}
	}
	for p := last; p != ""; p = via[p] {
		est.CriticalPath = append(est.CriticalPath, p)
	}
	slices.Reverse(est.CriticalPath)
	slices.Sort(est.NoHistory)
	return est
}

// Members counts the projects the rebuild builds.
func (e Estimate) Members() int {
	n := 0
	for _, w := range e.Waves {
		n += len(w)
	}
	return n
}

// WriteEstimate prints the waves and the estimate as `depsd rebuild
// --dry-run` shows them.
func WriteEstimate(w io.Writer, e Estimate) error {
	var b strings.Builder
	for i, wave := range e.Waves {
		fmt.Fprintf(&b, "wave %d: %s\n", i, strings.Join(wave, " "))
	}
	fmt.Fprintf(&b, "estimate: %s wall time (critical path %s), %s of pipelines in total, for %d projects\n",
		FormatDuration(e.Wall), strings.Join(e.CriticalPath, " → "), FormatDuration(e.Total), e.Members())
	fmt.Fprintf(&b, "  from the median of each project's last %d successful default-branch pipelines\n", HistoryRuns)
	if len(e.NoHistory) > 0 {
		fmt.Fprintf(&b, "  no history (counted as 0): %s\n", strings.Join(e.NoHistory, " "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// FormatDuration rounds d for people: 0s, 45s, 12m30s, 2h05m.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// RebuildTargets lists the members of a rebuild of project with what
// FetchDurations needs to read their history; members the store does not
// know are left out (and so end up with no history).
func RebuildTargets(g *deps.Graph, project string, stored []scan.Project) []HistoryTarget {
	byPath := make(map[string]scan.Project, len(stored))
	for _, p := range stored {
		byPath[p.Path] = p
	}
	var out []HistoryTarget
	for _, w := range g.Waves(project) {
		for _, m := range w {
			p, ok := byPath[deps.NodeProject(m)]
			if !ok {
				continue
			}
			ref := p.DefaultBranch // a node's own pipelines: its branch's, its release's
			for _, r := range p.Refs {
				if r.Node == m {
					ref = r.Ref
				}
			}
			out = append(out, HistoryTarget{Path: m, ID: p.ID, Ref: ref})
		}
	}
	return out
}
