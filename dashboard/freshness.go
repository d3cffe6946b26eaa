package dashboard

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/verify"
)

// freshnessView is the Freshness page's data: one page of the stored
// verifications, stalest first, filtered by state and project, and the
// counts of them all.
type freshnessView struct {
	Rows []verify.Row
	// Filters as given: a state (fresh, stale, unknown) and a project
	// path or part of one ("apps/" for a group).
	State, Project string
	States         []verify.State
	// Counts are the rows per state matching the project filter, over
	// every page, in the order of States; Total sums them.
	Counts map[verify.State]int
	Total  int
	// Matching is the rows both filters keep, over every page; the page
	// shows the From-th to the To-th of them (from 1).
	Matching, From, To int
	// NextURL is the next page's address ("" on the last), FirstURL the
	// first page's ("" on it).
	NextURL, FirstURL string
	Error             string
}

// freshnessPage lists the images depsd verified with their state, stalest
// first, a page at a time (?limit=, default verify.DefaultPageLimit,
// capped at verify.MaxPageLimit; ?after= the cursor of the page before):
// when its upstream moved, what it was built on and what will rebuild it
// (a running chain, a schedule, nothing). The counts per state cover every
// page. The rows are read whole and cut here (verify.Paginate), so that
// the order, the filters and the counts are the API's.
func (d *Dashboard) freshnessPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := freshnessView{State: q.Get("state"), Project: strings.TrimSpace(q.Get("project")), States: verify.States(), Counts: map[verify.State]int{}}
	pq := verify.PageQuery{State: verify.State(v.State), After: q.Get("after"), Limit: verify.DefaultPageLimit}
	bad := func(msg string) {
		v.Error = msg
		d.render(w, r, http.StatusBadRequest, "freshness", page{Title: "Freshness", Nav: "freshness", Data: v})
	}
	if v.State != "" && !slices.Contains(v.States, verify.State(v.State)) {
		bad(fmt.Sprintf("state %q: want fresh, stale or unknown", v.State))
		return
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			bad(fmt.Sprintf("limit %q: want a number of rows from 1 to %d", s, verify.MaxPageLimit))
			return
		}
		pq.Limit = n
	}
	rows, err := d.reads(r).freshness()
	if err != nil {
		d.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if v.Project != "" {
		rows = slices.DeleteFunc(rows, func(row verify.Row) bool { return !strings.Contains(row.Project, v.Project) })
	}
	p, err := verify.Paginate(rows, pq)
	if err != nil {
		bad(err.Error() + ": follow the page's links, or start again from the first page")
		return
	}
	v.Rows, v.Counts, v.Matching = p.Rows, p.Counts, p.Total
	for _, n := range p.Counts {
		v.Total += n
	}
	if len(p.Rows) > 0 {
		v.From, v.To = p.Start+1, p.Start+len(p.Rows)
	}
	link := func(after string) string {
		u := url.Values{}
		for k, val := range map[string]string{"state": v.State, "project": v.Project, "limit": q.Get("limit"), "after": after} {
			if val != "" {
				u.Set(k, val)
			}
		}
		if len(u) == 0 {
			return "/freshness"
		}
		return "/freshness?" + u.Encode()
	}
	if p.Next != "" {
		v.NextURL = link(p.Next)
	}
	if p.Start > 0 {
		v.FirstURL = link("")
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
	rank := func(s verify.State) int { return slices.Index(verify.States(), s) }
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
		if rank(r.State) < rank(s.State) {
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
func (rd *reads) memberImages(c chain.ChainView) map[string]*imageSummary {
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
	if len(built) > 0 {
		rows, err := rd.freshness(slices.Sorted(maps.Keys(built))...)
		if err != nil {
			rd.d.log.Warn("verifications not read", "chain_id", c.ID, "err", err)
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
	case verify.StatePinned:
		return "@" // pinned by digest
	case verify.StateUnknown:
		return "?"
	}
	return ""
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
	case verify.FixMergeRequest:
		return f.URL
	}
	return ""
}
