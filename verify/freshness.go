package verify

import (
	"cmp"
	"context"
	"slices"
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

// UpstreamOf returns the Upstream of image for a verification, from its
// history (newest first): its current digest and the earlier ones.
func UpstreamOf(image string, history []Seen) Upstream {
	u := Upstream{Image: image}
	for i, s := range history {
		if i == 0 {
			u.Current = s.Digest
			continue
		}
		u.Earlier = append(u.Earlier, s.Digest)
	}
	return u
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
	rank := map[State]int{StateStale: 0, StateUnknown: 1, StateFresh: 2}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(
			cmp.Compare(rank[a.State], rank[b.State]),
			a.StaleSince.Compare(b.StaleSince),
			cmp.Compare(a.Project, b.Project),
			cmp.Compare(a.Image, b.Image),
			cmp.Compare(a.Platform, b.Platform),
		)
	})
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
