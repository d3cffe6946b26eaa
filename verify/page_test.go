package verify_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/verify"
)

// pageRows are n rows in Freshness's order: a third stale (stale since i
// hours after t0 for the i-th, so the first ones are the stalest, and the
// last two stale since the same hour, told apart by project), a third
// unknown, a third fresh.
func pageRows(n int) []verify.Row {
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var rows []verify.Row
	for i := range n {
		r := verify.Row{Project: fmt.Sprintf("apps/app-%04d", i), Image: fmt.Sprintf("r.example.com/apps/app-%04d:latest", i), Platform: "linux/amd64"}
		switch i % 3 {
		case 0:
			r.State, r.StaleSince = verify.StateStale, t0.Add(time.Duration(min(i, n-n%3-3))*time.Hour)
		case 1:
			r.State = verify.StateUnknown
		default:
			r.State = verify.StateFresh
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, verify.Compare)
	return rows
}

func projects(rows []verify.Row) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Project+" "+string(r.State))
	}
	return out
}

// Paginate: pages of the asked size, stalest first, whose cursors lead
// from the first page to the last without a row lost or shown twice;
// the state filter before paging; counts per state over every page.
func TestPaginate(t *testing.T) {
	rows := pageRows(31) // 11 stale, 10 unknown, 10 fresh
	stale := slices.DeleteFunc(slices.Clone(rows), func(r verify.Row) bool { return r.State != verify.StateStale })
	counts := map[verify.State]int{verify.StateStale: 11, verify.StateUnknown: 10, verify.StateFresh: 10, verify.StatePinned: 0}
	tests := []struct {
		name  string
		q     verify.PageQuery
		want  []verify.Row // every row, over the pages
		pages int
	}{
		{"no limit: one page of every row", verify.PageQuery{}, rows, 1},
		{"pages of 10", verify.PageQuery{Limit: 10}, rows, 4},
		{"pages of 31: one, no next", verify.PageQuery{Limit: 31}, rows, 1},
		{"pages of 30: the last of one row", verify.PageQuery{Limit: 30}, rows, 2},
		{"stale, pages of 4", verify.PageQuery{State: verify.StateStale, Limit: 4}, stale, 3},
		{"fresh, pages of 10: one", verify.PageQuery{State: verify.StateFresh, Limit: 10}, rows[21:], 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []verify.Row
			q := tt.q
			for n := 1; ; n++ {
				p, err := verify.Paginate(rows, q)
				if err != nil {
					t.Fatal(err)
				}
				if p.Total != len(tt.want) || p.Start != len(got) || !maps.Equal(p.Counts, counts) {
					t.Errorf("page %d: total %d, start %d, counts %v; want %d, %d, %v", n, p.Total, p.Start, p.Counts, len(tt.want), len(got), counts)
				}
				if tt.q.Limit > 0 && len(p.Rows) > tt.q.Limit || len(p.Rows) == 0 {
					t.Fatalf("page %d: %d rows, want 1 to %d", n, len(p.Rows), tt.q.Limit)
				}
				got = append(got, p.Rows...)
				if p.Next == "" {
					if n != tt.pages {
						t.Errorf("%d pages, want %d", n, tt.pages)
					}
					break
				}
				if n > tt.pages {
					t.Fatalf("more than %d pages", tt.pages)
				}
				q.After = p.Next
			}
			if !slices.Equal(projects(got), projects(tt.want)) {
				t.Errorf("rows over the pages:\n%v\nwant\n%v", projects(got), projects(tt.want))
			}
		})
	}
}

// A page asks for no more than MaxPageLimit rows.
func TestPaginateCapsTheLimit(t *testing.T) {
	rows := pageRows(verify.MaxPageLimit + 50)
	p, err := verify.Paginate(rows, verify.PageQuery{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != verify.MaxPageLimit || p.Next == "" {
		t.Errorf("limit 5000: %d rows (next %q), want %d and a next page", len(p.Rows), p.Next, verify.MaxPageLimit)
	}
	p, _ = verify.Paginate(rows, verify.PageQuery{Limit: 5000, After: p.Next})
	if len(p.Rows) != 50 || p.Next != "" || p.Start != verify.MaxPageLimit {
		t.Errorf("second page: %d rows from %d (next %q), want the last 50", len(p.Rows), p.Start, p.Next)
	}
}

// A cursor names a place in the order, not an index: when rows change
// between two pages, the next page starts after the last row shown.
func TestPaginateCursorOutlivesItsRow(t *testing.T) {
	rows := pageRows(12) // stale: 0 3 6 9
	first, err := verify.Paginate(rows, verify.PageQuery{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	last := first.Rows[2] // app-0006, stale
	// app-0006 is rebuilt (now fresh) and app-0000 too, before the next page is read.
	changed := slices.Clone(rows)
	for i := range changed {
		if changed[i].Project == last.Project || changed[i].Project == "apps/app-0000" {
			changed[i].State, changed[i].StaleSince = verify.StateFresh, time.Time{}
		}
	}
	slices.SortFunc(changed, verify.Compare)
	next, err := verify.Paginate(changed, verify.PageQuery{Limit: 3, After: first.Next})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := projects(next.Rows), []string{"apps/app-0009 stale", "apps/app-0001 unknown", "apps/app-0004 unknown"}; !slices.Equal(got, want) {
		t.Errorf("the page after %s: %v, want %v", last.Project, got, want)
	}
}

func TestPaginateRefusesABadCursor(t *testing.T) {
	for _, c := range []string{"!!", "bm90IGpzb24", "eyJzIjoicm90dGVuIiwicCI6ImEifQ"} { // not base64, not JSON, a state that is none
		if _, err := verify.Paginate(pageRows(3), verify.PageQuery{After: c}); !errors.Is(err, verify.ErrCursor) {
			t.Errorf("cursor %q: %v, want ErrCursor", c, err)
		}
	}
}
