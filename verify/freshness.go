package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Store keeps what verification needs between runs: each upstream
// image's digest history, and the latest result per project, image and
// platform. The store package's *Store implements it on SQLite and
// PostgreSQL. Calls may be concurrent, from several processes.
type Store interface {
	// RecordUpstreamDigest notes that image (host/path:tag) pointed at
	// digest at time at. A digest new to the image joins its history,
	// first seen at at; a known one only updates its last seen time.
	RecordUpstreamDigest(ctx context.Context, image, digest string, at time.Time) error
	// UpstreamHistory returns the digests image had, newest first (by
	// first seen); none for an image never recorded.
	UpstreamHistory(ctx context.Context, image string) ([]Seen, error)
	// SaveVerification stores r, replacing the result stored for its
	// project, image and platform.
	SaveVerification(ctx context.Context, r Record) error
	// Verifications returns the stored results of the projects named (all
	// when none is), in no particular order.
	Verifications(ctx context.Context, projects ...string) ([]Record, error)
}

// Seen is one digest an upstream image had.
type Seen struct {
	Digest    string
	FirstSeen time.Time
}

// Record is a verification as stored: the project whose image it is, the
// result and when it was made.
type Record struct {
	Project    string
	Result     Result
	VerifiedAt time.Time
}

// Row is one line of `depsd freshness`: an image of a project for one
// platform, with its verdicts and how long it has been stale.
type Row struct {
	Project    string    `json:"project"`
	Image      string    `json:"image"`
	Platform   string    `json:"platform"`
	State      State     `json:"state"`
	Reason     Reason    `json:"reason,omitempty"`
	Digest     string    `json:"digest,omitempty"`
	Detail     string    `json:"detail"`
	Upstreams  []Verdict `json:"upstreams"`
	VerifiedAt time.Time `json:"verified_at"`
	// StaleSince is when the upstream the image is stale against moved
	// away from the image's base (the earliest such move over its stale
	// upstreams); zero unless stale.
	StaleSince time.Time `json:"stale_since,omitzero"`
	// Fix is what will rebuild a stale image (Fixes fills it); nil for
	// the images that are not stale.
	Fix *Fix `json:"fix,omitempty"`
}

// Freshness turns stored results into rows, stalest first (then by
// project, image and platform). history gives each upstream image's
// digests, newest first: an image built on digest D of an upstream is
// stale since the digest after D was first seen (or, when D is not in the
// history, since the current one was).
func Freshness(records []Record, history map[string][]Seen) []Row {
	rows := make([]Row, 0, len(records))
	for _, r := range records {
		row := Row{
			Project: r.Project, Image: r.Result.Image, Platform: r.Result.Platform.String(),
			State: r.Result.State, Reason: r.Result.Reason, Digest: r.Result.Digest, Detail: r.Result.Detail,
			Upstreams: r.Result.Upstreams, VerifiedAt: r.VerifiedAt,
		}
		for _, v := range r.Result.Upstreams {
			if v.State != StateStale {
				continue
			}
			if since := movedAwayFrom(history[v.Upstream], v.BuiltOn); !since.IsZero() && (row.StaleSince.IsZero() || since.Before(row.StaleSince)) {
				row.StaleSince = since
			}
		}
		if row.State == StateStale && row.StaleSince.IsZero() {
			row.StaleSince = r.VerifiedAt // no history: at least since it was found
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, Compare)
	return rows
}

// movedAwayFrom is when the upstream's next digest after builtOn was first
// seen (history newest first).
func movedAwayFrom(history []Seen, builtOn string) time.Time {
	if len(history) == 0 {
		return time.Time{}
	}
	for i, s := range history {
		if s.Digest == builtOn && i > 0 {
			return history[i-1].FirstSeen
		}
	}
	return history[0].FirstSeen
}

// Overdue returns the rows stale for longer than maxAge at now.
func Overdue(rows []Row, maxAge time.Duration, now time.Time) []Row {
	var out []Row
	for _, r := range rows {
		if r.State == StateStale && now.Sub(r.StaleSince) > maxAge {
			out = append(out, r)
		}
	}
	return out
}

// FixKind is what will rebuild a stale image.
type FixKind string

const (
	// FixChain: a running chain has the project as an unfinished member.
	FixChain FixKind = "chain"
	// FixSchedule: a cron schedule rebuilds the project, or a project it
	// is built from (a rebuild follows the graph down to it).
	FixSchedule FixKind = "schedule"
	// FixWatch: depsd watches the upstream image and has not yet seen its
	// current digest; the watch's next check starts the rebuild.
	FixWatch FixKind = "watch"
	// FixNone: nothing will; someone has to run depsd rebuild.
	FixNone FixKind = "none"
	// FixMergeRequest: a pinned image's project waits, in a running
	// chain, for the merge request that moves its pin (URL).
	FixMergeRequest FixKind = "merge-request"
)

// Fix says what will rebuild a stale image, and when if it is known.
type Fix struct {
	Kind FixKind `json:"kind"`
	// ChainID is the running chain (FixChain).
	ChainID int64 `json:"chain_id,omitempty"`
	// Project is the project the schedule rebuilds (FixSchedule): the
	// image's own or one it is built from.
	Project string `json:"project,omitempty"`
	// Image is the watched upstream image (FixWatch).
	Image string `json:"image,omitempty"`
	// Next is when the schedule fires or the watch checks next.
	Next time.Time `json:"next,omitzero"`
	// URL is the merge request moving the pin (FixMergeRequest).
	URL string `json:"url,omitempty"`
	// Detail says it in a sentence.
	Detail string `json:"detail"`
}

// Rebuilding is a running chain and its members that have work ahead,
// with the merge requests moving the pins of those waiting for one, by
// project.
type Rebuilding struct {
	ChainID       int64
	Unfinished    []string
	MergeRequests map[string]string
}

// Scheduled is a cron schedule that rebuilds Project, firing next at Next
// (zero: disabled).
type Scheduled struct {
	Project string
	Next    time.Time
}

// Watched is an upstream image depsd checks: the digest it last saw, and
// when it checks next.
type Watched struct {
	Image  string
	Digest string
	Next   time.Time
}

// FixSources is what Fixes looks at.
type FixSources struct {
	Chains    []Rebuilding
	Schedules []Scheduled
	Watches   []Watched
	// Upstreams returns the projects p is built from directly (the
	// scanned graph); nil: none.
	Upstreams func(p string) []string
}

// Fixes sets each stale row's Fix: a running chain with the project
// unfinished (the lowest ID), else the schedule of the project or of a
// project it is built from, directly or not, that fires first, else a
// watch of a stale upstream image that has not seen the upstream's
// current digest, else none. A pinned row's Fix is the merge request
// moving its pin when a running chain waits for one (else it has none:
// no rebuild moves a pin).
func Fixes(rows []Row, src FixSources) {
	chains := map[string]int64{}
	type pinMR struct {
		chainID int64
		url     string
	}
	mrs := map[string]pinMR{}
	for _, c := range src.Chains {
		for _, p := range c.Unfinished {
			if id, ok := chains[p]; !ok || c.ChainID < id {
				chains[p] = c.ChainID
			}
		}
		for p, url := range c.MergeRequests {
			mrs[p] = pinMR{c.ChainID, url}
		}
	}
	for i := range rows {
		r := &rows[i]
		if mr, ok := mrs[r.Project]; ok && r.State == StatePinned {
			r.Fix = &Fix{Kind: FixMergeRequest, ChainID: mr.chainID, URL: mr.url,
				Detail: fmt.Sprintf("%s moves the pin (chain %d)", mergeRequestName(mr.url), mr.chainID)}
		}
	}
	schedules := map[string]time.Time{}
	for _, s := range src.Schedules {
		if s.Next.IsZero() {
			continue
		}
		if t, ok := schedules[s.Project]; !ok || s.Next.Before(t) {
			schedules[s.Project] = s.Next
		}
	}
	watches := map[string]Watched{}
	for _, w := range src.Watches {
		watches[w.Image] = w
	}
	scheduled := map[string]*Fix{} // per project: the schedule found walking up
	for i := range rows {
		r := &rows[i]
		if r.State != StateStale {
			continue
		}
		if id, ok := chains[r.Project]; ok {
			r.Fix = &Fix{Kind: FixChain, ChainID: id, Detail: fmt.Sprintf("chain %d rebuilds it", id)}
			continue
		}
		f, ok := scheduled[r.Project]
		if !ok {
			f = firstSchedule(r.Project, schedules, src.Upstreams)
			scheduled[r.Project] = f
		}
		if f != nil {
			r.Fix = f
			continue
		}
		for _, v := range r.Upstreams {
			if w, ok := watches[v.Upstream]; ok && v.State == StateStale && v.Current != "" && w.Digest != v.Current {
				r.Fix = &Fix{Kind: FixWatch, Image: w.Image, Next: w.Next,
					Detail: fmt.Sprintf("the watch of %s sees its new digest at its next check", w.Image)}
				break
			}
		}
		if r.Fix == nil {
			r.Fix = &Fix{Kind: FixNone, Detail: "nothing will rebuild it: run depsd rebuild " + r.Project}
		}
	}
}

// firstSchedule finds, over p and every project it is built from, the
// schedule that fires first; nil when none does.
func firstSchedule(p string, schedules map[string]time.Time, upstreams func(string) []string) *Fix {
	if len(schedules) == 0 {
		return nil
	}
	var best *Fix
	seen := map[string]bool{p: true}
	queue := []string{p}
	for i := 0; i < len(queue); i++ {
		q := queue[i]
		if next, ok := schedules[q]; ok && (best == nil || next.Before(best.Next) || next.Equal(best.Next) && q < best.Project) {
			best = &Fix{Kind: FixSchedule, Project: q, Next: next}
		}
		if upstreams == nil {
			continue
		}
		for _, u := range upstreams(q) {
			if !seen[u] {
				seen[u] = true
				queue = append(queue, u)
			}
		}
	}
	if best != nil {
		best.Detail = "the schedule of " + best.Project + " rebuilds it at " + best.Next.UTC().Format("2006-01-02 15:04 UTC")
		if best.Project == p {
			best.Detail = "its schedule rebuilds it at " + best.Next.UTC().Format("2006-01-02 15:04 UTC")
		}
	}
	return best
}

// mergeRequestName names a merge request by its URL: "merge request !4".
func mergeRequestName(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= 0 && i < len(url)-1 {
		return "merge request !" + url[i+1:]
	}
	return "a merge request"
}
