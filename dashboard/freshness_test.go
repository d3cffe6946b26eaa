package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
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
	d, err := New(Options{Store: fakeStore{projects}, Chains: fakeChains{c}, Freshness: freshness, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
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
