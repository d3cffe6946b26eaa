package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// TestChainPageNamesNodes: a chain through a project with several nodes
// names its default branch lang/ruby@main beside lang/ruby@bookworm, as
// depsd graph does; a project with one node is named by its path.
func TestChainPageNamesNodes(t *testing.T) {
	projects := []scan.Project{
		{Path: "infra/base", ID: 1, DefaultBranch: "main", Refs: []scan.Ref{{Node: "infra/base@tags", Kind: deps.NodeTags, Ref: "v3.2.2"}}},
		{Path: "lang/ruby", ID: 2, DefaultBranch: "main", Refs: []scan.Ref{{Node: "lang/ruby@bookworm", Kind: deps.NodeBranch, Ref: "bookworm"}}},
		{Path: "apps/shop", ID: 3, DefaultBranch: "main"},
	}
	d, err := New(Options{Store: fakeStore{projects}, Chains: fakeChains{{ID: 7, State: chain.Running, Roots: []string{"infra/base@tags"},
		Members: []chain.MemberView{
			{Project: "infra/base@tags", State: chain.Success, PipelineID: 11},
			{Project: "lang/ruby", State: chain.MemberRunning, Upstreams: []string{"infra/base@tags"}, PipelineID: 12},
			{Project: "apps/shop", State: chain.Waiting, Upstreams: []string{"lang/ruby"}},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	get := func(path string) string {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Body.String()
	}
	body := get("/chains/7")
	for _, want := range []string{
		`<a href="/projects/lang/ruby">lang/ruby@main</a>`,
		`<a href="/projects/infra/base@tags">infra/base@tags</a>`,
		`<a href="/projects/apps/shop">apps/shop</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the chain page lacks %q:\n%s", want, body)
		}
	}
}
