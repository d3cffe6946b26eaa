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

// TestProjectPageShowsPins: the project page says which upstream the
// project pins by digest, with the digest and tag, in "Built from" and on
// the line of the file that pins it.
func TestProjectPageShowsPins(t *testing.T) {
	const pin = "sha256:1f38c0d0a1f2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
	projects := []scan.Project{
		{Path: "g/ruby", ID: 1, DefaultBranch: "main"},
		{Path: "g/base", ID: 3, DefaultBranch: "main"},
		{Path: "g/app", ID: 2, DefaultBranch: "main", File: "Containerfile",
			Files: []scan.File{{Name: "Containerfile", Content: []byte("ARG RUBY=r/g/ruby:3@" + pin + "\nFROM ${RUBY}\nCOPY --from=r/g/base / /\n")}},
			Dependencies: []deps.Dependency{
				{Kind: deps.KindFrom, Line: 2, Ref: "${RUBY}", Image: "r/g/ruby:3@" + pin, Repository: "r/g/ruby", Tag: "3", Digest: pin, Pinned: true, Project: "g/ruby"},
				{Kind: deps.KindCopyFrom, Line: 3, Image: "r/g/base:latest", Repository: "r/g/base", Tag: "latest", Project: "g/base"},
			}},
	}
	d, err := New(Options{Store: fakeStore{projects}, Chains: fakeChains{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/projects/g/app", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`<li><a href="/projects/g/ruby">g/ruby</a> <span class="pin" title="` + pin + `">pinned sha256:1f38c0d0a1f2 (tag 3)</span></li>`,
		`<li><a href="/projects/g/base">g/base</a></li>`,
		"FROM project g/ruby, pinned by digest sha256:1f38c0d0a1f2 (tag 3)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the project page lacks %q:\n%s", want, body)
		}
	}
}

// TestChainPageShowsPinMoves: a member waiting for its pin merge request
// has its own glyph and count, links the merge request where a pipeline
// would be, and the chain's page lists what depsd wrote to GitLab.
func TestChainPageShowsPinMoves(t *testing.T) {
	mr := "https://gitlab.example/g/app/-/merge_requests/4"
	projects := []scan.Project{{Path: "g/ruby", ID: 1, DefaultBranch: "main"}, {Path: "g/app", ID: 2, DefaultBranch: "main"}}
	d, err := New(Options{Store: fakeStore{projects}, Chains: fakeChains{{ID: 7, State: chain.Running, Roots: []string{"g/ruby"},
		Members: []chain.MemberView{
			{Project: "g/ruby", State: chain.Success, PipelineID: 11},
			{Project: "g/app", State: chain.WaitingMerge, Upstreams: []string{"g/ruby"}, Pinned: []string{"g/ruby"}, MergeRequest: mr,
				Why: "waiting for merge request !4 to be merged"},
		},
		Writes: []chain.Write{{Project: "g/app", Kind: "merge-request", Ref: "depsd/pins", Detail: "opened merge request !4: depsd: move the digest pins of g/ruby", URL: mr}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/chains/7", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`<span class="count s-waiting-merge">⇄ 1 waiting-merge</span>`,
		`<td><a href="` + mr + `">merge request !4</a></td>`,
		`Written to GitLab`,
		`opened merge request !4: depsd: move the digest pins of g/ruby`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the chain page lacks %q:\n%s", want, body)
		}
	}
}
