package daemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/visible"
)

// FreshnessQuery selects the rows of a freshness report.
type FreshnessQuery struct {
	// Projects: only their images; none means every project's.
	Projects []string
	// State: only rows in this state; "" means any.
	State verify.State
	// MaxAge: a stale row counts in StaleBeyondMaxAge when its upstream
	// moved longer ago than this.
	MaxAge time.Duration
	// After and Limit select a page of the rows the filters keep
	// (verify.PageQuery): After is the Next of the page before ("" the
	// first page), Limit its rows at most (0: every row, as depsd
	// freshness and the metrics want).
	After string
	Limit int
	// Scope is what the person asking may see: only their projects' rows
	// are counted and paged (nil: every row).
	Scope *visible.Scope
}

// DefaultMaxAge is how long an image may be stale before `depsd freshness`
// exits 1 and the API counts it in stale_beyond_max_age.
const DefaultMaxAge = 24 * time.Hour

// FreshnessReport is what `depsd freshness --json` prints and
// GET /api/v1/freshness answers.
type FreshnessReport struct {
	// Images are the page's rows, stalest first (verify.Freshness), each
	// stale one with what will fix it.
	Images []verify.Row `json:"images"`
	// StaleBeyondMaxAge counts the rows stale for longer than MaxAge,
	// over every page.
	StaleBeyondMaxAge int `json:"stale_beyond_max_age"`
	// Counts are the rows per state the project filter keeps, whatever
	// the state filter says and over every page (every state present).
	Counts map[verify.State]int `json:"counts"`
	// Total is the rows every filter keeps, over every page.
	Total int `json:"total"`
	// Limit is the page's size as applied (the cap included); 0: every
	// row in one page.
	Limit int `json:"limit,omitzero"`
	// Next is the cursor of the next page (FreshnessQuery.After, ?after=);
	// absent on the last.
	Next string `json:"next,omitempty"`
	// Overdue are the rows StaleBeyondMaxAge counts.
	Overdue []verify.Row `json:"-"`
}

// ChainLister reads chains; *chain.Engine implements it.
type ChainLister interface {
	Chains(ctx context.Context, f chain.Filter) ([]chain.ChainView, error)
}

// FreshnessSources are what a freshness report reads: the store's
// verifications and digest histories, and for what will fix a stale image
// the running chains (nil: none) and the schedules and watches (nil:
// none).
type FreshnessSources struct {
	Store     *store.Store
	Chains    ChainLister
	Schedules func(ctx context.Context) ([]scheduler.Entry, error)
	Now       func() time.Time
}

// maxRunningChains bounds the running chains a report reads for its fixes.
const maxRunningChains = 10000

// Freshness reads the stored verifications into a report: rows stalest
// first, filtered by q, one page of them (q.After, q.Limit), each stale
// row of the page with what will fix it. The chains, schedules and graph
// are read only when a row of the page is stale. A cursor that is not a
// report's Next is verify.ErrCursor.
func Freshness(ctx context.Context, src FreshnessSources, q FreshnessQuery) (FreshnessReport, error) {
	records, err := src.Store.Verifications(ctx, q.Projects...)
	if err != nil {
		return FreshnessReport{}, err
	}
	var history map[string][]verify.Seen
	if len(records) > 0 {
		if history, err = src.Store.UpstreamHistories(ctx); err != nil {
			return FreshnessReport{}, err
		}
	}
	rows := q.Scope.Rows(verify.Freshness(records, history))
	page, err := verify.Paginate(rows, verify.PageQuery{State: q.State, After: q.After, Limit: q.Limit})
	if err != nil {
		return FreshnessReport{}, err
	}
	if slices.ContainsFunc(page.Rows, func(r verify.Row) bool { return r.State == verify.StateStale || r.State == verify.StatePinned }) {
		fix, err := fixSources(ctx, src)
		if err != nil {
			return FreshnessReport{}, err
		}
		verify.Fixes(page.Rows, fix)
		page.Rows = q.Scope.Rows(page.Rows) // what fixes them, as the person may see it
	}
	now := time.Now
	if src.Now != nil {
		now = src.Now
	}
	var over []verify.Row
	if q.State == "" || q.State == verify.StateStale { // only a stale row is overdue
		over = verify.Overdue(rows, q.MaxAge, now())
	}
	rep := FreshnessReport{Images: page.Rows, StaleBeyondMaxAge: len(over), Overdue: over, Counts: page.Counts, Total: page.Total, Next: page.Next}
	if q.Limit > 0 {
		rep.Limit = min(q.Limit, verify.MaxPageLimit)
	}
	return rep, nil
}

// fixSources reads what can rebuild a stale image.
func fixSources(ctx context.Context, src FreshnessSources) (verify.FixSources, error) {
	var fix verify.FixSources
	if src.Chains != nil {
		running, err := src.Chains.Chains(ctx, chain.Filter{State: chain.Running, Limit: maxRunningChains})
		if err != nil {
			return fix, fmt.Errorf("freshness: %w", err)
		}
		for _, c := range running {
			r := verify.Rebuilding{ChainID: c.ID}
			for _, m := range c.Members {
				if m.State.Unfinished() {
					r.Unfinished = append(r.Unfinished, m.Project)
				}
				if m.State == chain.WaitingMerge && m.MergeRequest != "" {
					if r.MergeRequests == nil {
						r.MergeRequests = map[string]string{}
					}
					r.MergeRequests[m.Project] = m.MergeRequest
				}
			}
			fix.Chains = append(fix.Chains, r)
		}
	}
	if src.Schedules != nil {
		entries, err := src.Schedules(ctx)
		if err != nil {
			return fix, fmt.Errorf("freshness: %w", err)
		}
		for _, e := range entries {
			switch e.Kind {
			case scheduler.KindRebuild:
				fix.Schedules = append(fix.Schedules, verify.Scheduled{Project: e.Target, Next: e.Next})
			case scheduler.KindWatch:
				fix.Watches = append(fix.Watches, verify.Watched{Image: e.Target, Digest: e.Digest, Next: e.Next})
			}
		}
	}
	if len(fix.Schedules) > 0 {
		g, err := src.Store.Graph(ctx)
		if err != nil {
			return fix, fmt.Errorf("freshness: %w", err)
		}
		fix.Upstreams = g.Upstream
	}
	return fix, nil
}

// freshness is the report over the daemon's store, engine and schedules.
func (d *Daemon) freshness(ctx context.Context, q FreshnessQuery) (FreshnessReport, error) {
	return Freshness(ctx, FreshnessSources{
		Store: d.store, Chains: d.engine, Now: d.opts.Now,
		Schedules: func(ctx context.Context) ([]scheduler.Entry, error) {
			return ListSchedules(ctx, d.opts.Config.Scheduler, d.store, d.log)
		},
	}, q)
}
