package verify_test

import (
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/verify"
)

// Rows come stalest first, and an image is stale since its upstream moved
// away from the digest it was built on.
func TestFreshness(t *testing.T) {
	const ruby, debian = "r.example.com/base/ruby:3", "r.example.com/base/debian:12"
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	history := map[string][]verify.Seen{
		ruby:   {{"sha256:r3", t0.Add(30 * time.Hour)}, {"sha256:r2", t0.Add(10 * time.Hour)}, {"sha256:r1", t0}},
		debian: {{"sha256:d2", t0.Add(20 * time.Hour)}, {"sha256:d1", t0}},
	}
	rec := func(project string, verdicts ...verify.Verdict) verify.Record {
		st, detail := verify.Sum(verdicts)
		return verify.Record{Project: project, VerifiedAt: t0.Add(40 * time.Hour),
			Result: verify.Result{Image: "r.example.com/" + project + ":latest", Platform: amd64, State: st, Detail: detail, Upstreams: verdicts}}
	}
	v := func(up string, st verify.State, builtOn string) verify.Verdict {
		return verify.Verdict{Upstream: up, State: st, BuiltOn: builtOn}
	}
	rows := verify.Freshness([]verify.Record{
		rec("apps/fresh", v(ruby, verify.StateFresh, "sha256:r3")),
		rec("apps/unknown", verify.Verdict{Upstream: ruby, State: verify.StateUnknown}),
		rec("apps/recent", v(ruby, verify.StateStale, "sha256:r2")),                                          // ruby moved from r2 at 30h
		rec("apps/old", v(ruby, verify.StateStale, "sha256:r1")),                                             // ruby moved from r1 at 10h
		rec("apps/both", v(ruby, verify.StateFresh, "sha256:r3"), v(debian, verify.StateStale, "sha256:d1")), // debian moved at 20h
		rec("apps/unrecorded", v("r.example.com/x:1", verify.StateStale, "sha256:x")),                        // no history: since verified
	}, history)
	want := []struct {
		project string
		since   time.Duration // from t0; -1: zero
	}{{"apps/old", 10 * time.Hour}, {"apps/both", 20 * time.Hour}, {"apps/recent", 30 * time.Hour}, {"apps/unrecorded", 40 * time.Hour}, {"apps/unknown", -1}, {"apps/fresh", -1}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		r := rows[i]
		wantSince := time.Time{}
		if w.since >= 0 {
			wantSince = t0.Add(w.since)
		}
		if r.Project != w.project || !r.StaleSince.Equal(wantSince) {
			t.Errorf("row %d: %s stale since %s, want %s since %s", i, r.Project, r.StaleSince, w.project, wantSince)
		}
	}
	now := t0.Add(45 * time.Hour)
	over := verify.Overdue(rows, 24*time.Hour, now)
	if len(over) != 2 || over[0].Project != "apps/old" || over[1].Project != "apps/both" {
		t.Errorf("overdue after 24h: %+v, want apps/old and apps/both", over)
	}
}

// Fixes: a running chain first, then the schedule that fires first over
// the project and what it is built from, then a watch that has not seen
// the upstream's current digest, else none; rows not stale get none.
func TestFixes(t *testing.T) {
	const ruby = "r.example.com/base/ruby:3"
	soon := time.Date(2026, 11, 3, 1, 0, 0, 0, time.UTC)
	later := soon.Add(time.Hour)
	graph := map[string][]string{"apps/shop": {"base/ruby"}, "base/ruby": {"base/debian"}, "apps/cli": {"base/ruby"}}
	sources := verify.FixSources{
		Chains: []verify.Rebuilding{{ChainID: 9, Unfinished: []string{"apps/shop"}}, {ChainID: 7, Unfinished: []string{"apps/shop", "apps/web"}}},
		Schedules: []verify.Scheduled{
			{Project: "base/debian", Next: soon}, {Project: "base/ruby", Next: later}, {Project: "apps/cli", Next: later},
			{Project: "apps/off"}, // disabled
		},
		Watches:   []verify.Watched{{Image: ruby, Digest: "sha256:old", Next: soon}, {Image: "r.example.com/x:1", Digest: "sha256:x2"}},
		Upstreams: func(p string) []string { return graph[p] },
	}
	stale := func(project, upstream, current string) verify.Row {
		return verify.Row{Project: project, State: verify.StateStale,
			Upstreams: []verify.Verdict{{Upstream: upstream, State: verify.StateStale, BuiltOn: "sha256:old", Current: current}}}
	}
	rows := []verify.Row{
		stale("apps/shop", ruby, "sha256:new"),
		stale("apps/cli", ruby, "sha256:new"),
		stale("apps/lone", ruby, "sha256:new"),
		stale("apps/seen", "r.example.com/x:1", "sha256:x2"), // the watch already saw it: it will not fire
		stale("apps/off", ruby, "sha256:old"),
		{Project: "apps/fresh", State: verify.StateFresh},
	}
	verify.Fixes(rows, sources)
	want := []verify.Fix{
		{Kind: verify.FixChain, ChainID: 7},
		{Kind: verify.FixSchedule, Project: "base/debian", Next: soon},
		{Kind: verify.FixWatch, Image: ruby, Next: soon},
		{Kind: verify.FixNone},
		{Kind: verify.FixNone},
	}
	for i, w := range want {
		f := rows[i].Fix
		if f == nil || f.Kind != w.Kind || f.ChainID != w.ChainID || f.Project != w.Project || f.Image != w.Image || !f.Next.Equal(w.Next) || f.Detail == "" {
			t.Errorf("%s: fix %+v, want %+v", rows[i].Project, f, w)
		}
	}
	if f := rows[5].Fix; f != nil {
		t.Errorf("a fresh image has a fix: %+v", f)
	}
}

// TestFixOfAPinnedImage: a pinned image whose project waits, in a running
// chain, for the merge request moving its pin is shown with that merge
// request; another pinned image has no fix (a rebuild would not help).
func TestFixOfAPinnedImage(t *testing.T) {
	mr := "https://gitlab.example.com/apps/shop/-/merge_requests/4"
	rows := []verify.Row{{Project: "apps/shop", State: verify.StatePinned}, {Project: "apps/cli", State: verify.StatePinned}}
	verify.Fixes(rows, verify.FixSources{Chains: []verify.Rebuilding{{ChainID: 9, Unfinished: []string{"apps/shop"},
		MergeRequests: map[string]string{"apps/shop": mr}}}})
	if f := rows[0].Fix; f == nil || f.Kind != verify.FixMergeRequest || f.URL != mr || f.ChainID != 9 || !strings.Contains(f.Detail, "merge request !4") {
		t.Errorf("fix of the pinned apps/shop = %+v, want its merge request", f)
	}
	if f := rows[1].Fix; f != nil {
		t.Errorf("fix of apps/cli = %+v, want none", f)
	}
}
