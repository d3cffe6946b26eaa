package dashboard

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/verify"
)

// freshnessView is the Freshness page's data: the stored verifications,
// stalest first, filtered by state and project.
type freshnessView struct {
	Rows []verify.Row
	// Filters as given: a state (fresh, stale, unknown) and a project
	// path or part of one ("apps/" for a group).
	State, Project string
	States         []verify.State
	// Counts are the rows per state matching the project filter, in the
	// order of States; Total sums them.
	Counts map[verify.State]int
	Total  int
	Error  string
}

// freshnessPage lists every image depsd verified with its state, stalest
// first: when its upstream moved, what it was built on and what will
// rebuild it (a running chain, a schedule, nothing).
func (d *Dashboard) freshnessPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := freshnessView{State: q.Get("state"), Project: strings.TrimSpace(q.Get("project")), States: verify.States(), Counts: map[verify.State]int{}}
	if v.State != "" && !slices.Contains(v.States, verify.State(v.State)) {
		v.Error = fmt.Sprintf("state %q: want fresh, stale or unknown", v.State)
		d.render(w, r, http.StatusBadRequest, "freshness", page{Title: "Freshness", Nav: "freshness", Data: v})
		return
	}
	var rows []verify.Row
	if d.opts.Freshness != nil {
		var err error
		if rows, err = d.opts.Freshness(r.Context()); err != nil {
			d.fail(w, r, http.StatusInternalServerError, err)
			return
		}
	}
	for _, row := range rows {
		if v.Project != "" && !strings.Contains(row.Project, v.Project) {
			continue
		}
		v.Counts[row.State]++
		v.Total++
		if v.State == "" || string(row.State) == v.State {
			v.Rows = append(v.Rows, row)
		}
	}
	d.render(w, r, http.StatusOK, "freshness", page{Title: "Freshness", Nav: "freshness", Data: v})
}

// imageSummary is a project's verified images in one word: stale when one
// is, else unknown when one is, else fresh; N counts its rows (images ×
// platforms) and Detail is the worst row's.
type imageSummary struct {
	State      verify.State
	N          int
	Detail     string
	VerifiedAt time.Time
}

// summarize sums up rows per project, keeping only the verifications
// made at or after since(project) (the member's build in a chain; zero:
// any).
func summarize(rows []verify.Row, since func(project string) (time.Time, bool)) map[string]*imageSummary {
	rank := map[verify.State]int{verify.StateStale: 0, verify.StateUnknown: 1, verify.StateFresh: 2}
	out := map[string]*imageSummary{}
	for _, r := range rows {
		t, ok := since(r.Project)
		if !ok || r.VerifiedAt.Before(t) {
			continue
		}
		s, seen := out[r.Project]
		if !seen {
			s = &imageSummary{State: r.State, Detail: r.Detail}
			out[r.Project] = s
		}
		s.N++
		if rank[r.State] < rank[s.State] {
			s.State, s.Detail = r.State, r.Detail
		}
		if r.VerifiedAt.After(s.VerifiedAt) {
			s.VerifiedAt = r.VerifiedAt
		}
	}
	return out
}

// memberImages is the verdict on each member's images: the engine's on
// its last build in this chain (MemberView.Verified), else, for a chain
// that ended (one from before the engine verified), the stored
// verifications made since the member's build; none for a member not built
// yet. A live chain's page, refreshed every few seconds, reads only the
// chain.
func (d *Dashboard) memberImages(r *http.Request, c chain.ChainView) map[string]*imageSummary {
	out := map[string]*imageSummary{}
	built := map[string]time.Time{}
	for _, m := range c.Members {
		switch {
		case m.Verified != "":
			out[m.Project] = &imageSummary{State: verify.State(m.Verified), Detail: m.VerifyDetail}
		case !c.State.Active() && m.TriggeredAt != nil && m.PipelineID != 0:
			built[m.Project] = *m.TriggeredAt
		}
	}
	if len(built) > 0 && d.opts.Freshness != nil {
		rows, err := d.opts.Freshness(r.Context(), slices.Sorted(maps.Keys(built))...)
		if err != nil {
			d.log.Warn("verifications not read", "chain_id", c.ID, "err", err)
		}
		maps.Copy(out, summarize(rows, func(p string) (time.Time, bool) { t, ok := built[p]; return t, ok }))
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// verdictIcon gives each verification state a glyph, so that they differ
// without colour.
func verdictIcon(s verify.State) string {
	switch s {
	case verify.StateFresh:
		return "✓"
	case verify.StateStale:
		return "≠"
	}
	return "?"
}

// fixURL links what will fix a stale image: its chain, the project whose
// schedule rebuilds it, the health page's watches.
func fixURL(f *verify.Fix) string {
	if f == nil {
		return ""
	}
	switch f.Kind {
	case verify.FixChain:
		return fmt.Sprintf("/chains/%d", f.ChainID)
	case verify.FixSchedule:
		return projectURL(f.Project) + "#sched-h"
	case verify.FixWatch:
		return "/health#watch-h"
	}
	return ""
}
