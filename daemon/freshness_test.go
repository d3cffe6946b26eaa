package daemon

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
)

// freshnessEnv is a store with a scanned graph (base/debian > base/ruby >
// apps/shop, apps/admin; apps/cli alone) and verifications: apps/shop,
// apps/admin and apps/cli stale since ruby moved 48 h before now, base/ruby
// fresh, apps/docs unknown.
type freshnessEnv struct {
	st     *store.Store
	engine *chain.Engine
	now    time.Time
	moved  time.Time
}

const testRuby = "registry.example.com/base/ruby:3"

func newFreshnessEnv(t *testing.T) *freshnessEnv {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &freshnessEnv{st: st, now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	e.moved = e.now.Add(-48 * time.Hour)
	from := func(p string) []deps.Dependency { return []deps.Dependency{{Kind: deps.KindFrom, Project: p, Ref: p}} }
	projects := []scan.Project{
		{ID: 1, Path: "apps/admin", DefaultBranch: "main", Dependencies: from("base/ruby")},
		{ID: 2, Path: "apps/cli", DefaultBranch: "main"},
		{ID: 3, Path: "apps/docs", DefaultBranch: "main"},
		{ID: 4, Path: "apps/shop", DefaultBranch: "main", Dependencies: from("base/ruby")},
		{ID: 5, Path: "base/debian", DefaultBranch: "main"},
		{ID: 6, Path: "base/ruby", DefaultBranch: "main", Dependencies: from("base/debian")},
	}
	if err := st.ApplyScan(ctx, projects, scan.Meta{StartedAt: e.now}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordUpstreamDigest(ctx, testRuby, "sha256:old", e.moved.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordUpstreamDigest(ctx, testRuby, "sha256:new", e.moved); err != nil {
		t.Fatal(err)
	}
	amd64 := deps.Platform{OS: "linux", Architecture: "amd64"}
	rec := func(project string, state verify.State, builtOn string) verify.Record {
		r := verify.Record{Project: project, VerifiedAt: e.now.Add(-time.Hour), Result: verify.Result{
			Image: "registry.example.com/" + project + ":latest", Platform: amd64, State: state, Digest: "sha256:" + strings.Repeat("c", 64)}}
		if state == verify.StateUnknown {
			r.Result.Reason, r.Result.Detail = verify.ReasonNoBase, "no annotation and no shared layer"
			return r
		}
		r.Result.Upstreams = []verify.Verdict{{Upstream: testRuby, State: state, BuiltOn: builtOn, Current: "sha256:new"}}
		return r
	}
	for _, r := range []verify.Record{
		rec("apps/shop", verify.StateStale, "sha256:old"), rec("apps/admin", verify.StateStale, "sha256:old"),
		rec("apps/cli", verify.StateStale, "sha256:old"), rec("base/ruby", verify.StateFresh, "sha256:new"),
		rec("apps/docs", verify.StateUnknown, ""),
	} {
		if err := st.SaveVerification(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if e.engine, err = chain.New(chain.Config{Store: st, Graph: st.Graph, Now: func() time.Time { return e.now }}); err != nil {
		t.Fatal(err)
	}
	return e
}

// GET /api/v1/freshness: the rows stalest first, each stale one with what
// will fix it (a running chain with it unfinished, a schedule of a project
// it is built from, nothing), filtered by project, state and max_age; a bad
// filter is a 400 naming it.
func TestFreshnessAPI(t *testing.T) {
	e := newFreshnessEnv(t)
	id, err := e.engine.Rebuild(t.Context(), "apps/shop", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
	if err != nil {
		t.Fatal(err)
	}
	next := e.now.Add(3 * time.Hour)
	a := &api{store: e.st, engine: e.engine, webhook: http.NotFoundHandler(), metrics: newMetrics(true), ready: func(context.Context) error { return nil },
		freshness: func(ctx context.Context, q FreshnessQuery) (FreshnessReport, error) {
			return Freshness(ctx, FreshnessSources{Store: e.st, Chains: e.engine, Now: func() time.Time { return e.now },
				Schedules: func(context.Context) ([]scheduler.Entry, error) {
					return []scheduler.Entry{{Kind: scheduler.KindRebuild, Target: "base/debian", Spec: "0 15 * * *", Next: next}}, nil
				}}, q)
		}}
	h, _ := a.routes(false)
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(t *testing.T, query string) (int, FreshnessReport, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/v1/freshness?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		var rep FreshnessReport
		json.Unmarshal(raw, &rep)
		return resp.StatusCode, rep, string(raw)
	}
	code, rep, raw := get(t, "")
	if code != http.StatusOK || len(rep.Images) != 5 || rep.StaleBeyondMaxAge != 3 {
		t.Fatalf("GET: %d, %d rows, %d beyond 24h; want 200, 5 rows, 3\n%s", code, len(rep.Images), rep.StaleBeyondMaxAge, raw)
	}
	fixes := map[string]verify.Fix{}
	for i, r := range rep.Images {
		if (i < 3) != (r.State == verify.StateStale) {
			t.Errorf("row %d %s %s: stale rows come first", i, r.Project, r.State)
		}
		if r.State == verify.StateStale && !r.StaleSince.Equal(e.moved) {
			t.Errorf("%s stale since %s, want %s (when ruby moved)", r.Project, r.StaleSince, e.moved)
		}
		if r.Fix != nil {
			fixes[r.Project] = *r.Fix
		}
	}
	for project, want := range map[string]verify.Fix{
		"apps/shop":  {Kind: verify.FixChain, ChainID: id},
		"apps/admin": {Kind: verify.FixSchedule, Project: "base/debian", Next: next},
		"apps/cli":   {Kind: verify.FixNone},
	} {
		got := fixes[project]
		if got.Kind != want.Kind || got.ChainID != want.ChainID || got.Project != want.Project || !got.Next.Equal(want.Next) {
			t.Errorf("%s fixed by %+v, want %+v", project, got, want)
		}
	}
	if len(fixes) != 3 {
		t.Errorf("fixes for %d rows, want the 3 stale ones: %v", len(fixes), fixes)
	}

	tests := []struct {
		query  string
		code   int
		rows   []string // projects, in order
		beyond int
		err    string
	}{
		{query: "state=stale", code: 200, rows: []string{"apps/admin", "apps/cli", "apps/shop"}, beyond: 3},
		{query: "state=unknown", code: 200, rows: []string{"apps/docs"}},
		{query: "project=apps/cli&project=base/ruby", code: 200, rows: []string{"apps/cli", "base/ruby"}, beyond: 1},
		{query: "max_age=72h", code: 200, rows: []string{"apps/admin", "apps/cli", "apps/shop", "apps/docs", "base/ruby"}},
		{query: "project=nobody", code: 200, rows: []string{}},
		{query: "state=rotten", code: 400, err: `state "rotten": want one of fresh, stale, unknown`},
		{query: "max_age=soon", code: 400, err: `max_age "soon": want a duration`},
		{query: "max_age=-1h", code: 400, err: `max_age "-1h"`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, rep, raw := get(t, tt.query)
			if code != tt.code {
				t.Fatalf("%d, want %d\n%s", code, tt.code, raw)
			}
			if tt.err != "" {
				var body map[string]string
				json.Unmarshal([]byte(raw), &body)
				if !strings.Contains(body["error"], tt.err) {
					t.Errorf("error %q, want %q", body["error"], tt.err)
				}
				return
			}
			var got []string
			for _, r := range rep.Images {
				got = append(got, r.Project)
			}
			if strings.Join(got, " ") != strings.Join(tt.rows, " ") || rep.StaleBeyondMaxAge != tt.beyond {
				t.Errorf("rows %v beyond %d, want %v beyond %d", got, rep.StaleBeyondMaxAge, tt.rows, tt.beyond)
			}
			if !strings.Contains(raw, `"images": [`) {
				t.Errorf("images is not a list: %s", raw)
			}
		})
	}
}

// GET /api/v1/freshness pages: ?limit= rows after ?after= (the previous
// page's next, also a Link rel="next"), the filters applied before paging,
// and on every page the counts per state, the total and
// stale_beyond_max_age over every page; the stalest rows come first across
// pages. The rows, in order: apps/admin, apps/cli, apps/shop (stale),
// apps/docs (unknown), base/ruby (fresh).
func TestFreshnessAPIPages(t *testing.T) {
	e := newFreshnessEnv(t)
	a := &api{store: e.st, engine: e.engine, webhook: http.NotFoundHandler(), metrics: newMetrics(true), ready: func(context.Context) error { return nil },
		freshness: func(ctx context.Context, q FreshnessQuery) (FreshnessReport, error) {
			return Freshness(ctx, FreshnessSources{Store: e.st, Chains: e.engine, Now: func() time.Time { return e.now }}, q)
		}}
	h, _ := a.routes(false)
	srv := httptest.NewServer(h)
	defer srv.Close()
	type answer struct {
		code int
		rep  FreshnessReport
		raw  string
		link string
	}
	get := func(t *testing.T, path string) answer {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var rep FreshnessReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, b)
		}
		return answer{resp.StatusCode, rep, string(b), resp.Header.Get("Link")}
	}
	all := map[verify.State]int{verify.StateStale: 3, verify.StateUnknown: 1, verify.StateFresh: 1, verify.StatePinned: 0}
	tests := []struct {
		query  string
		pages  [][]string // projects per page
		counts map[verify.State]int
		total  int
		beyond int
		limit  int
	}{
		{"", [][]string{{"apps/admin", "apps/cli", "apps/shop", "apps/docs", "base/ruby"}}, all, 5, 3, 100},
		{"limit=2", [][]string{{"apps/admin", "apps/cli"}, {"apps/shop", "apps/docs"}, {"base/ruby"}}, all, 5, 3, 2},
		{"limit=5", [][]string{{"apps/admin", "apps/cli", "apps/shop", "apps/docs", "base/ruby"}}, all, 5, 3, 5},
		{"limit=4", [][]string{{"apps/admin", "apps/cli", "apps/shop", "apps/docs"}, {"base/ruby"}}, all, 5, 3, 4},
		{"state=stale&limit=2", [][]string{{"apps/admin", "apps/cli"}, {"apps/shop"}}, all, 3, 3, 2},
		{"state=fresh&limit=1", [][]string{{"base/ruby"}}, all, 1, 0, 1},
		{"project=apps/shop&project=apps/docs&project=base/ruby&limit=1", [][]string{{"apps/shop"}, {"apps/docs"}, {"base/ruby"}},
			map[verify.State]int{verify.StateStale: 1, verify.StateUnknown: 1, verify.StateFresh: 1, verify.StatePinned: 0}, 3, 1, 1},
		{"limit=5000", [][]string{{"apps/admin", "apps/cli", "apps/shop", "apps/docs", "base/ruby"}}, all, 5, 3, verify.MaxPageLimit},
		{"project=nobody&limit=2", [][]string{{}}, map[verify.State]int{verify.StateStale: 0, verify.StateUnknown: 0, verify.StateFresh: 0, verify.StatePinned: 0}, 0, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			path := "/api/v1/freshness?" + tt.query
			for i, want := range tt.pages {
				ans := get(t, path)
				got := []string{}
				for _, r := range ans.rep.Images {
					got = append(got, r.Project)
				}
				if ans.code != http.StatusOK || !slices.Equal(got, want) {
					t.Fatalf("page %d: %d %v, want 200 %v\n%s", i+1, ans.code, got, want, ans.raw)
				}
				if !maps.Equal(ans.rep.Counts, tt.counts) || ans.rep.Total != tt.total || ans.rep.StaleBeyondMaxAge != tt.beyond || ans.rep.Limit != tt.limit {
					t.Errorf("page %d: counts %v, total %d, beyond %d, limit %d; want %v, %d, %d, %d",
						i+1, ans.rep.Counts, ans.rep.Total, ans.rep.StaleBeyondMaxAge, ans.rep.Limit, tt.counts, tt.total, tt.beyond, tt.limit)
				}
				last := i == len(tt.pages)-1
				if last != (ans.rep.Next == "") || last != (ans.link == "") || last == strings.Contains(ans.raw, `"next"`) {
					t.Fatalf("page %d of %d: next %q, Link %q", i+1, len(tt.pages), ans.rep.Next, ans.link)
				}
				if last {
					break
				}
				// The Link header keeps the filters and the limit.
				m := regexp.MustCompile(`^<(/api/v1/freshness\?[^>]+)>; rel="next"$`).FindStringSubmatch(ans.link)
				if m == nil {
					t.Fatalf("Link %q", ans.link)
				}
				u, _ := url.Parse(m[1])
				for _, p := range []string{"state", "project"} {
					if !slices.Equal(u.Query()[p], mustQuery(t, tt.query)[p]) {
						t.Errorf("Link %q drops %s", ans.link, p)
					}
				}
				if u.Query().Get("after") != ans.rep.Next {
					t.Errorf("Link %q: after is not next %q", ans.link, ans.rep.Next)
				}
				path = m[1]
			}
		})
	}
	if ans := get(t, "/api/v1/freshness"); !strings.Contains(ans.raw, `"counts": {`) || !strings.Contains(ans.raw, `"total": 5`) || !strings.Contains(ans.raw, `"limit": 100`) {
		t.Errorf("the JSON lacks counts, total or limit:\n%s", ans.raw)
	}

	for query, want := range map[string]string{
		"limit=0":           `limit "0": want a number of rows from 1 to 1000`,
		"limit=ten":         `limit "ten"`,
		"after=bm90IGpzb24": "after: cursor",
		"after=%21%21":      "not a freshness page cursor",
	} {
		resp, err := http.Get(srv.URL + "/api/v1/freshness?" + query)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body["error"], want) {
			t.Errorf("?%s: %d %q, want 400 %q", query, resp.StatusCode, body["error"], want)
		}
	}
}

func mustQuery(t *testing.T, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
