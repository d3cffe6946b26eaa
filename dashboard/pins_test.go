package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
