package dashboard

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/verify"
)

// The Freshness page lists the rows it is given in their order (stalest
// first), filtered by state and by a part of the project path, each stale
// row linked to what will fix it; the project page shows the project's
// images; the chain page shows a member's verdict only when it was made
// after the member's build in that chain.
func TestFreshnessPages(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	projects := []scan.Project{
		{Path: "g/ruby", ID: 1, DefaultBranch: "main"},
		{Path: "g/shop", ID: 2, DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "r/g/ruby", Project: "g/ruby"}}},
		{Path: "g/cli", ID: 3, DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "r/g/ruby", Project: "g/ruby"}}},
		{Path: "h/docs", ID: 4, DefaultBranch: "main"},
	}
	row := func(p string, st verify.State, verified time.Time, fix *verify.Fix) verify.Row {
		r := verify.Row{Project: p, Image: "r/" + p + ":latest", Platform: "linux/amd64", State: st, Digest: "sha256:" + strings.Repeat("d", 64),
			Detail: p + " is " + string(st), VerifiedAt: verified, Fix: fix}
		if st == verify.StateStale {
			r.StaleSince = now.Add(-26 * time.Hour)
			r.Upstreams = []verify.Verdict{{Upstream: "r/g/ruby:latest", State: st, BuiltOn: "sha256:" + strings.Repeat("1", 64), Current: "sha256:" + strings.Repeat("2", 64)}}
		}
		return r
	}
	rows := []verify.Row{
		row("g/shop", verify.StateStale, now.Add(-time.Hour), &verify.Fix{Kind: verify.FixChain, ChainID: 7, Detail: "chain 7 rebuilds it"}),
		row("g/cli", verify.StateStale, now.Add(-3*time.Hour), &verify.Fix{Kind: verify.FixNone, Detail: "nothing will rebuild it: run depsd rebuild g/cli"}),
		row("h/docs", verify.StateUnknown, now.Add(-time.Hour), nil),
		row("g/ruby", verify.StateFresh, now.Add(-time.Hour), nil),
	}
	freshness := func(_ context.Context, only ...string) ([]verify.Row, error) {
		return slices.DeleteFunc(slices.Clone(rows), func(r verify.Row) bool { return len(only) > 0 && !slices.Contains(only, r.Project) }), nil
	}
	triggered := now.Add(-2 * time.Hour)
	c := chain.ChainView{ID: 7, State: chain.Finished, Roots: []string{"g/ruby"}, Members: []chain.MemberView{
		{Project: "g/ruby", State: chain.Success, PipelineID: 11, TriggeredAt: &triggered},
		{Project: "g/shop", State: chain.Success, PipelineID: 12, TriggeredAt: &triggered, Upstreams: []string{"g/ruby"}}, // verified after: shown
		{Project: "g/cli", State: chain.Success, PipelineID: 13, TriggeredAt: &triggered, Upstreams: []string{"g/ruby"}},  // verified before its build: not shown
		// The engine's own verdict on the member's build wins over the
		// stored rows (unknown, verified after its build).
		{Project: "h/docs", State: chain.Stale, PipelineID: 14, TriggeredAt: &triggered, Verified: chain.ImageStale, VerifyDetail: "built on an old base"},
	}}
	d, get := pages(t, Options{Store: fakeStore{projects}, Chains: fakeChains{c}, Freshness: freshness, Now: func() time.Time { return now }})
	listed := regexp.MustCompile(`<tr data-project="([^"]+)" data-state="([^"]+)"`)
	for _, tc := range []struct {
		path string
		code int
		rows []string
		want []string
	}{
		{"/freshness", 200, []string{"g/shop stale", "g/cli stale", "h/docs unknown", "g/ruby fresh"},
			[]string{`<a href="/chains/7">chain 7 rebuilds it</a>`, "run depsd rebuild g/cli", "26h00m", `sha256:111111111111</code> → <code title="sha256:2222`, `href="/projects/g/shop"`, `aria-current="page">Freshness`}},
		{"/freshness?state=stale", 200, []string{"g/shop stale", "g/cli stale"}, []string{"≠ 2 stale", "? 1 unknown", "✓ 1 fresh"}},
		{"/freshness?project=g/", 200, []string{"g/shop stale", "g/cli stale", "g/ruby fresh"}, []string{"of 3 images matching"}},
		{"/freshness?project=h/&state=fresh", 200, nil, []string{"No image matches the filter"}},
		{"/freshness?state=rotten", 400, nil, []string{"state &#34;rotten&#34;: want fresh, stale or unknown"}},
	} {
		code, body := get(tc.path)
		var got []string
		for _, m := range listed.FindAllStringSubmatch(body, -1) {
			got = append(got, m[1]+" "+m[2])
		}
		if code != tc.code || !slices.Equal(got, tc.rows) {
			t.Errorf("GET %s: %d rows %v, want %d rows %v", tc.path, code, got, tc.code, tc.rows)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", tc.path, w)
			}
		}
	}

	if _, body := get("/projects/g/shop"); !strings.Contains(body, `<tr data-image="r/g/shop:latest" data-state="stale">`) || !strings.Contains(body, "chain 7 rebuilds it") {
		t.Errorf("project page: shop's image and what fixes it not shown\n%s", body)
	}
	if _, body := get("/projects/g/ruby"); !strings.Contains(body, `data-state="fresh"`) || strings.Contains(body, "g/shop:latest") {
		t.Errorf("project page of ruby shows other projects' images, or not its own")
	}

	_, body := get("/chains/7")
	cells := regexp.MustCompile(`(?s)<tr data-member="([^"]+)".*?<td class="member-images">(.*?)</td>`)
	shown := map[string]string{}
	for _, m := range cells.FindAllStringSubmatch(body, -1) {
		shown[m[1]] = m[2]
	}
	if !strings.Contains(shown["g/shop"], "≠ stale") || !strings.Contains(shown["g/ruby"], "✓ fresh") || strings.Contains(shown["g/cli"], "stale") ||
		!strings.Contains(shown["h/docs"], "≠ stale") || !strings.Contains(shown["h/docs"], "built on an old base") || len(shown) != 4 {
		t.Errorf("chain page's images column: %q; want shop stale, ruby fresh, cli none (verified before its build), docs stale (the engine's verdict)", shown)
	}
	d.opts.Chains = fakeChains{{ID: 7, State: chain.Running, Roots: c.Roots, Members: c.Members}}
	if _, body := get("/chains/7"); strings.Count(body, `<td class="member-images">`) != 4 || strings.Contains(body, "g/shop is stale") {
		t.Errorf("a running chain's page shows stored verdicts (read at every refresh), or no column for the engine's")
	}
	d.opts.Freshness = nil
	_, body = get("/chains/7")
	if got := strings.Count(body, `<td class="member-images">`); got != 4 || !strings.Contains(body, "built on an old base") {
		t.Errorf("without stored verifications the chain page shows %d image cells, want 4 with the engine's verdict on docs", got)
	}
}

// The Freshness page shows a page of rows at a time, stalest first across
// pages: its links lead from the first page to the last without a row
// lost or shown twice, keep the filters (applied before paging), and every
// page counts the rows per state over them all.
func TestFreshnessPagesArePaged(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var rows []verify.Row
	for i := range 250 { // 84 stale, 83 unknown, 83 fresh
		r := verify.Row{Project: fmt.Sprintf("g/team-%d/app-%03d", i%5, i), Image: fmt.Sprintf("r/app-%03d:latest", i), Platform: "linux/amd64", VerifiedAt: t0}
		switch i % 3 {
		case 0:
			r.State, r.StaleSince = verify.StateStale, t0.Add(-time.Duration(i)*time.Minute) // the larger i, the staler
		case 1:
			r.State = verify.StateUnknown
		default:
			r.State = verify.StateFresh
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, verify.Compare)
	_, get := pages(t, Options{Store: fakeStore{}, Chains: fakeChains{}, Now: func() time.Time { return t0 },
		Freshness: func(context.Context, ...string) ([]verify.Row, error) { return slices.Clone(rows), nil }})
	listed := regexp.MustCompile(`<tr data-project="([^"]+)" data-state="([^"]+)"`)
	linked := func(body, id string) string {
		m := regexp.MustCompile(`id="` + id + `"[^>]* href="([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return html.UnescapeString(m[1])
	}
	keep := func(f func(verify.Row) bool) []string {
		var out []string
		for _, r := range rows {
			if f(r) {
				out = append(out, r.Project+" "+string(r.State))
			}
		}
		return out
	}
	every := func(verify.Row) bool { return true }
	for _, tc := range []struct {
		path   string
		want   []string // every row, over the pages
		sizes  []int    // rows per page
		counts string   // on every page
	}{
		{"/freshness", keep(every), []int{100, 100, 50}, "≠ 84 stale @ 0 pinned ? 83 unknown ✓ 83 fresh of 250 images"},
		{"/freshness?limit=125", keep(every), []int{125, 125}, "≠ 84 stale @ 0 pinned ? 83 unknown ✓ 83 fresh of 250 images"},
		{"/freshness?state=stale&limit=30", keep(func(r verify.Row) bool { return r.State == verify.StateStale }), []int{30, 30, 24}, "≠ 84 stale @ 0 pinned ? 83 unknown ✓ 83 fresh of 250 images"},
		{"/freshness?state=stale&project=team-1/&limit=10", keep(func(r verify.Row) bool { return r.State == verify.StateStale && strings.Contains(r.Project, "team-1/") }), []int{10, 7},
			"≠ 17 stale @ 0 pinned ? 17 unknown ✓ 16 fresh of 50 images matching “team-1/”"},
		{"/freshness?limit=5000", keep(every), []int{250}, "of 250 images"},
		{"/freshness?project=app-00&limit=1", keep(func(r verify.Row) bool { return strings.Contains(r.Project, "app-00") }), []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
			"≠ 4 stale @ 0 pinned ? 3 unknown ✓ 3 fresh of 10 images matching “app-00”"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			var got []string
			path := tc.path
			for i, size := range tc.sizes {
				code, body := get(path)
				var page []string
				for _, m := range listed.FindAllStringSubmatch(body, -1) {
					page = append(page, m[1]+" "+m[2])
				}
				if code != 200 || len(page) != size {
					t.Fatalf("page %d (%s): %d, %d rows, want 200, %d", i+1, path, code, len(page), size)
				}
				got = append(got, page...)
				text := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(body, " ")), " ")
				if !strings.Contains(text, tc.counts) {
					t.Errorf("page %d lacks the counts %q", i+1, tc.counts)
				}
				if paged := len(tc.sizes) > 1; paged && !strings.Contains(text, fmt.Sprintf("images %d–%d of %d", len(got)-size+1, len(got), len(tc.want))) {
					t.Errorf("page %d does not say which rows it shows (%d–%d of %d)", i+1, len(got)-size+1, len(got), len(tc.want))
				}
				first, next := linked(body, "first-page"), linked(body, "next-page")
				if (i > 0) != (first != "") || (i < len(tc.sizes)-1) != (next != "") {
					t.Fatalf("page %d of %d: first-page link %q, next-page link %q", i+1, len(tc.sizes), first, next)
				}
				for _, l := range []string{first, next} {
					u, _ := url.Parse(l)
					want, _ := url.Parse(tc.path)
					for _, k := range []string{"state", "project", "limit"} {
						if l != "" && u.Query().Get(k) != want.Query().Get(k) {
							t.Errorf("page %d: link %q drops %s=%s", i+1, l, k, want.Query().Get(k))
						}
					}
				}
				path = next
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rows over the pages differ from every row stalest first:\n%v\nwant\n%v", got, tc.want)
			}
		})
	}

	// A cursor past the last row (the last row's, from a longer list):
	// no rows, and the way back.
	more := append(slices.Clone(rows), verify.Row{Project: "z/last", State: verify.StateFresh})
	p, err := verify.Paginate(more, verify.PageQuery{Limit: len(rows)})
	if err != nil || p.Next == "" {
		t.Fatal(err, p.Next)
	}
	if code, body := get("/freshness?after=" + p.Next); code != 200 || !strings.Contains(body, "No more images") || !strings.Contains(body, `id="first-page" href="/freshness"`) {
		t.Errorf("past the last row: %d\n%s", code, body)
	}
	for path, want := range map[string]string{
		"/freshness?limit=0":       `limit &#34;0&#34;: want a number of rows from 1 to 1000`,
		"/freshness?limit=many":    `limit &#34;many&#34;`,
		"/freshness?after=garbage": "not a freshness page cursor: follow the page&#39;s links",
	} {
		if code, body := get(path); code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want 400 saying %q", path, code, want)
		}
	}
}

// pages makes the dashboard with o, and returns it and a GET of one of its
// paths (the status and the body).
func pages(t *testing.T, o Options) (*Dashboard, func(path string) (int, string)) {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	return d, func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
}
