package verify

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Compare orders freshness rows as Freshness lists them: stale before
// unknown before fresh, a stale row before those stale since later (the
// stalest first), then by project, image and platform. No two rows of a
// report compare equal: a project's image has one row per platform.
func Compare(a, b Row) int {
	return cmp.Or(
		cmp.Compare(stateRank(a.State), stateRank(b.State)),
		a.StaleSince.Compare(b.StaleSince),
		cmp.Compare(a.Project, b.Project),
		cmp.Compare(a.Image, b.Image),
		cmp.Compare(a.Platform, b.Platform),
	)
}

// stateRank is a state's place in the stalest-first order.
func stateRank(s State) int {
	switch s {
	case StateStale:
		return 0
	case StateUnknown:
		return 1
	case StateFresh:
		return 2
	}
	return 3
}

// ErrCursor: a page cursor that is not one Page.Next gave.
var ErrCursor = errors.New("not a freshness page cursor")

// MaxPageLimit caps a page's rows, whatever is asked: a page of 1,000
// rows is about 1 MB of HTML. DefaultPageLimit is a page's rows when the
// caller does not say.
const (
	MaxPageLimit     = 1000
	DefaultPageLimit = 100
)

// PageQuery selects one page of freshness rows.
type PageQuery struct {
	// State: only rows in this state; "" means any.
	State State
	// After is Page.Next of the page before: the page starts at the first
	// row that Compare puts after the row it names (so a row that changed
	// state or was verified again between two pages moves, and no row
	// stays behind the cursor twice). "" is the first page.
	After string
	// Limit: at most this many rows (capped at MaxPageLimit); 0 means
	// every row, uncapped (depsd freshness, the metrics).
	Limit int
}

// Page is one page of freshness rows and where it stands in the whole.
type Page struct {
	// Rows are the page's rows, in the order given.
	Rows []Row
	// Counts are the rows per state among all given, whatever
	// PageQuery.State says (every state present, 0 when none), so that a
	// page filtered on one state still shows the whole picture.
	Counts map[State]int
	// Total is the rows in PageQuery.State (all rows when "") over every
	// page; Start is the number of them before this page.
	Total, Start int
	// Next is the cursor of the page after this one (PageQuery.After);
	// "" on the last page.
	Next string
}

// Paginate cuts one page out of rows, which are in Freshness's order
// (Compare): it counts the rows per state, keeps those in q.State, and
// takes up to q.Limit of them after q.After. A cursor that does not parse
// is ErrCursor. The page's rows share rows' array.
func Paginate(rows []Row, q PageQuery) (Page, error) {
	p := Page{Counts: make(map[State]int, len(States()))}
	for _, s := range States() {
		p.Counts[s] = 0
	}
	var after *Row
	if q.After != "" {
		r, err := parseCursor(q.After)
		if err != nil {
			return Page{}, err
		}
		after = &r
	}
	kept := rows
	if q.State != "" {
		kept = make([]Row, 0, len(rows))
	}
	for _, r := range rows {
		p.Counts[r.State]++
		if q.State != "" && r.State == q.State {
			kept = append(kept, r)
		}
	}
	p.Total = len(kept)
	if after != nil {
		i, found := slices.BinarySearchFunc(kept, *after, Compare)
		if found {
			i++
		}
		p.Start = i
	}
	end := len(kept)
	if limit := min(q.Limit, MaxPageLimit); q.Limit > 0 && p.Start+limit < end {
		end = p.Start + limit
		p.Next = cursorOf(kept[end-1])
	}
	p.Rows = kept[p.Start:end]
	return p, nil
}

// cursor is what a page cursor names: its last row's place in Compare's
// order, as base64 (URL alphabet, no padding) of this JSON, so that it
// passes through a query string untouched. Clients take it as opaque.
type cursor struct {
	State      State     `json:"s"`
	StaleSince time.Time `json:"t,omitzero"`
	Project    string    `json:"p"`
	Image      string    `json:"i"`
	Platform   string    `json:"f"`
}

func cursorOf(r Row) string {
	b, _ := json.Marshal(cursor{State: r.State, StaleSince: r.StaleSince, Project: r.Project, Image: r.Image, Platform: r.Platform}) // cannot fail: strings and a time
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseCursor(s string) (Row, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Row{}, fmt.Errorf("cursor %q: %w", s, ErrCursor)
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || !slices.Contains(States(), c.State) || c.Project == "" {
		return Row{}, fmt.Errorf("cursor %q: %w", s, ErrCursor)
	}
	return Row{State: c.State, StaleSince: c.StaleSince, Project: c.Project, Image: c.Image, Platform: c.Platform}, nil
}
