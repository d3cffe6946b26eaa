package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/report"
	"gitlab.com/depsd/depsd/scan"
)

func TestChainMembersByWave(t *testing.T) {
	c := chain.ChainView{ID: 3, State: chain.Running, Members: []chain.MemberView{
		{Project: "app", State: chain.Waiting, Upstreams: []string{"lint", "ruby"}},
		{Project: "base", State: chain.Success},
		{Project: "lint", State: chain.MemberRunning, Upstreams: []string{"base"}},
		{Project: "ruby", State: chain.Failed, Upstreams: []string{"base", "outside"}},
	}}
	v := viewChain(c)
	var waves [][]string
	for _, w := range v.Waves {
		var names []string
		for _, m := range w.Members {
			names = append(names, m.Project)
		}
		waves = append(waves, names)
	}
	if want := [][]string{{"base"}, {"lint", "ruby"}, {"app"}}; !slices.EqualFunc(waves, want, slices.Equal) {
		t.Errorf("waves %v, want %v", waves, want)
	}
	if !v.Live || len(v.Counts) != 4 || v.Counts[0].State != chain.MemberRunning {
		t.Errorf("live %v counts %+v", v.Live, v.Counts)
	}
}

func TestFilesMarkTheLinesThatMatter(t *testing.T) {
	p := scan.Project{File: "Containerfile", Files: []scan.File{
		{Name: ".gitlab-deps", Content: []byte("# comment\ng/lib\n")},
		{Name: "Containerfile", Content: []byte("ARG V\nFROM r/g/base:${V}\nCOPY --from=alpine:3 / /\n")},
	},
		Dependencies: []deps.Dependency{
			{Kind: deps.KindGitLabDeps, Line: 2, Project: "g/lib"},
			{Kind: deps.KindCopyFrom, Line: 3, Image: "docker.io/library/alpine:3"},
		},
		Warnings: []deps.Warning{{File: "Containerfile", Line: 2, Message: "ARG V has no value"}},
	}
	files := viewFiles(p)
	if len(files) != 2 || files[0].Name != "Containerfile" {
		t.Fatalf("files %+v: the analysed file comes first", files)
	}
	cf, gd := files[0], files[1]
	if cf.Marked != 2 || len(cf.Lines[1].Warns) != 1 || !strings.Contains(cf.Lines[2].Notes[0], "COPY --from external image docker.io/library/alpine:3") {
		t.Errorf("Containerfile: %+v", cf)
	}
	if gd.Marked != 1 || gd.Lines[1].Notes[0] != "declared upstream project g/lib" {
		t.Errorf(".gitlab-deps: %+v", gd)
	}
}

func TestHookStates(t *testing.T) {
	paused := []string{"signing token not set", "disabled until 2026-11-27T22:00:00Z, GitLab retries then"}
	for _, tc := range []struct {
		action  gitlab.HookAction
		dry     bool
		state   string
		reasons []string
	}{
		{gitlab.HookCreated, true, "missing", nil}, {gitlab.HookCreated, false, "missing", nil},
		{gitlab.HookReenabled, true, "disabled", nil}, {gitlab.HookStillDisabled, false, "disabled", nil},
		{gitlab.HookTemporarilyDisabled, true, "failing", nil}, {gitlab.HookUnchanged, true, "ok", nil},
		{gitlab.HookUpdated, false, "ok", nil},
		// A paused hook that drifted (no signing token yet after an
		// upgrade) is edited and still paused.
		{gitlab.HookUpdated, false, "failing", paused}, {gitlab.HookUpdated, true, "failing", paused},
		{gitlab.HookGroupRefused, false, "missing", nil}, {gitlab.HookReplacedByGroup, false, "ok", nil},
		{gitlab.HookCoveredByGroup, true, "ok", nil},
	} {
		if state, _ := hookState(gitlab.HookChange{Action: tc.action, Reasons: tc.reasons}, tc.dry); state != tc.state {
			t.Errorf("%s (dry run %v): %s, want %s", tc.action, tc.dry, state, tc.state)
		}
	}
}

// fakes for the handler tests.
type fakeStore struct{ projects []scan.Project }

func (f fakeStore) Projects(context.Context) ([]scan.Project, error) { return f.projects, nil }
func (f fakeStore) Project(_ context.Context, path string) (scan.Project, error) {
	for _, p := range f.projects {
		if p.Path == path {
			return p, nil
		}
	}
	return scan.Project{}, scan.ErrNotFound
}
func (f fakeStore) LastScan(context.Context) (scan.Meta, bool, error) {
	return scan.Meta{StartedAt: time.Unix(1, 0), Projects: len(f.projects)}, true, nil
}

type fakeChains []chain.ChainView

func (f fakeChains) Chains(context.Context, chain.Filter) ([]chain.ChainView, error) { return f, nil }
func (f fakeChains) Chain(_ context.Context, id int64) (chain.ChainView, error) {
	for _, c := range f {
		if c.ID == id {
			return c, nil
		}
	}
	return chain.ChainView{}, chain.ErrNotFound
}
func (f fakeChains) Stats(context.Context) (chain.Stats, error) { return chain.Stats{}, nil }

func TestPagesAnswerInTheUsersTerms(t *testing.T) {
	projects := []scan.Project{
		{Path: "g/base", ID: 1, DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "debian:12"}}},
		{Path: "g/app", ID: 2, DefaultBranch: "main", Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: "r/g/base", Project: "g/base"}}},
	}
	d, err := New(Options{Store: fakeStore{projects}, Chains: fakeChains{{ID: 7, State: chain.Finished, Roots: []string{"g/base"},
		Members: []chain.MemberView{{Project: "g/base", State: chain.Success, PipelineID: 11, PipelineURL: "https://gitlab.example/g/base/-/pipelines/11"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/", 200, `href="/chains/7"`},
		{"/chains/7", 200, "https://gitlab.example/g/base/-/pipelines/11"},
		{"/chains/7?part=chain", 200, `<section class="chain" id="chain-7"`},
		{"/chains/8", 404, "there is no chain 8"},
		{"/chains/x", 400, "chain id &#34;x&#34;: want a number"},
		{"/chains/7?part=nope", 400, "unknown part"},
		{"/graph", 200, `data-project="g/app"`},
		{"/graph?focus=g/app", 200, `class="dg-node dg-focus" data-project="g/app"`},
		{"/graph?focus=g/none", 400, "project g/none is not in the scanned graph"},
		{"/graph?focus=g/app&depth=-1", 400, "depth"},
		{"/graph.svg?focus=g/base", 200, `<svg xmlns="http://www.w3.org/2000/svg"`},
		{"/projects/g/app", 200, `<li><a href="/projects/g/base">g/base</a></li>`},
		{"/projects/g/base", 200, "no history"},
		{"/projects/g/none", 404, "project g/none is not in the scanned graph"},
		{"/health", 200, "Last scan"},
		{"/static/live.js", 200, "data-live-src"},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("GET %s: %d, want %d with %q\n%.600s", tc.path, rec.Code, tc.code, tc.want, rec.Body.String())
		}
	}

	// The focus view's picture is what `depsd graph --format svg --around`
	// writes: the same code on the same subgraph.
	focused, err := report.Around(report.Build(projects, scan.GraphOf(projects)), "g/app", 0)
	if err != nil {
		t.Fatal(err)
	}
	var cli strings.Builder
	if err := report.Write(&cli, "svg", focused); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/graph.svg?focus=g/app", nil))
	if rec.Body.String() != cli.String() {
		t.Errorf("/graph.svg?focus=g/app differs from depsd graph --format svg --around g/app:\n%s\n---\n%s", rec.Body.String(), cli.String())
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/graph?focus=g/app", nil))
	dataProjects := regexp.MustCompile(`data-project="([^"]+)"`)
	var page, file []string
	for _, m := range dataProjects.FindAllStringSubmatch(rec.Body.String(), -1) {
		page = append(page, m[1])
	}
	for _, m := range dataProjects.FindAllStringSubmatch(cli.String(), -1) {
		file = append(file, m[1])
	}
	if len(page) == 0 || !slices.Equal(page, file) {
		t.Errorf("the focus page draws %v, the CLI %v", page, file)
	}
}

// syntheticInstance is n projects: 5 bases, 45 runtimes FROM them, apps
// FROM the runtimes.
func syntheticInstance(n int) []scan.Project {
	var projects []scan.Project
	from := func(p string) []deps.Dependency {
		return []deps.Dependency{{Kind: deps.KindFrom, Image: "r/" + p, Project: p}}
	}
	for i := range 5 {
		projects = append(projects, scan.Project{Path: fmt.Sprintf("images/base-%d", i), Dependencies: []deps.Dependency{{Kind: deps.KindFrom, Image: fmt.Sprintf("debian:%d", i)}}})
	}
	for i := range 45 {
		projects = append(projects, scan.Project{Path: fmt.Sprintf("images/runtime-%d", i), Dependencies: from(fmt.Sprintf("images/base-%d", i%5))})
	}
	for i := range n - 50 {
		projects = append(projects, scan.Project{Path: fmt.Sprintf("apps/app-%d", i), Dependencies: from(fmt.Sprintf("images/runtime-%d", i%45))})
	}
	return projects
}

// On a large instance the graph page leaves the search's list out (it is
// fetched from /graph/projects when the field is used), and a focus view
// whose picture would hold more than maxFocusPicture projects draws fewer
// edges deep and links to the whole; what a person asks for (depth=0) is
// drawn whole.
func TestGraphPageAtScale(t *testing.T) {
	option := regexp.MustCompile(`<option value="`)
	node := regexp.MustCompile(`data-project="`)
	for _, tc := range []struct {
		name, path    string
		projects      int
		inlineOptions int  // <option>s in the page
		fetched       bool // the datalist says where its options are
		drawn         int  // projects in the picture
		drawAll       bool // a link to draw them all
	}{
		{"small instance: the search's list in the page", "/graph?focus=images/base-0", 500, 500, false, 1 + 9 + 90, false},
		{"large instance: the list fetched when used", "/graph", 2000, 0, true, 40, false},
		{"a runtime's focus, drawn whole", "/graph?focus=images/runtime-3", 2000, 0, true, 1 + 1 + 44, false},
		{"a base's focus, one edge deep", "/graph?focus=images/base-0", 5000, 0, true, 1 + 9, true},
		{"a base's focus, all asked for", "/graph?focus=images/base-0&depth=0", 5000, 0, true, 1 + 9 + 990, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(Options{Store: fakeStore{syntheticInstance(tc.projects)}, Chains: fakeChains{}})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			d.Register(mux)
			get := func(path string) string {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("GET %s: %d", path, rec.Code)
				}
				return rec.Body.String()
			}
			page := get(tc.path)
			if n := len(option.FindAllString(page, -1)); n != tc.inlineOptions {
				t.Errorf("the page carries %d of the search's options, want %d", n, tc.inlineOptions)
			}
			if got := strings.Contains(page, `data-src="/graph/projects"`); got != tc.fetched {
				t.Errorf("the search's list fetched from /graph/projects: %v, want %v", got, tc.fetched)
			}
			if n := len(option.FindAllString(get("/graph/projects"), -1)); n != tc.projects {
				t.Errorf("/graph/projects lists %d projects, want %d", n, tc.projects)
			}
			if n := len(node.FindAllString(page, -1)); n != tc.drawn {
				t.Errorf("the picture draws %d projects, want %d", n, tc.drawn)
			}
			if got := strings.Contains(page, `id="draw-all"`); got != tc.drawAll {
				t.Errorf("a link to draw all: %v, want %v", got, tc.drawAll)
			}
		})
	}
}

// BenchmarkGraphHandler2000 renders the graph page of 2,000 projects on
// the server (no browser): the overview, and a focus view.
func BenchmarkGraphHandler2000(b *testing.B) { graphHandler(b, 2000) }

// BenchmarkGraphHandler10000 is the same at 10,000 projects, the server's
// part of BenchmarkGraphPage10000.
func BenchmarkGraphHandler10000(b *testing.B) { graphHandler(b, 10000) }

func graphHandler(b *testing.B, n int) {
	projects := syntheticInstance(n)
	d, err := New(Options{Store: fakeStore{projects}, Chains: fakeChains{}})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	for _, path := range []string{"/graph", "/graph?focus=images/runtime-3", "/graph?focus=images/base-0"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

// TestValidationChainOpensItsValidationPage: /chains/ID of a validation
// (as the chains API or an old link names it) sends the person to its
// validation's page, which shows its merge request; with validations off
// that page is not found, and the list says how to turn them on.
func TestValidationChainOpensItsValidationPage(t *testing.T) {
	c := chain.ChainView{ID: 9, Kind: chain.KindValidation, State: chain.Running, Roots: []string{"g/base"}}
	vs := fakeValidations{{Project: "g/base", IID: 3, State: chain.MROpened, Chains: []int64{9}, Chain: &c}}
	for _, tc := range []struct {
		opts       Options
		path       string
		code       int
		want, href string
	}{
		{Options{Store: fakeStore{}, Chains: fakeChains{c}, Validations: vs}, "/chains/9", http.StatusSeeOther, "", "/validations/9"},
		{Options{Store: fakeStore{}, Chains: fakeChains{c}, Validations: vs}, "/validations/9", 200, `data-live-src="/validations/9?part=validation"`, ""},
		{Options{Store: fakeStore{}, Chains: fakeChains{c}}, "/validations/9", 404, "there is no validation 9", ""},
		{Options{Store: fakeStore{}, Chains: fakeChains{c}}, "/validations", 200, "<code>premerge:</code>", ""},
	} {
		d, err := New(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		d.Register(mux)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) || rec.Header().Get("Location") != tc.href {
			t.Errorf("GET %s: %d %q, want %d %q with %q\n%.400s", tc.path, rec.Code, rec.Header().Get("Location"), tc.code, tc.href, tc.want, rec.Body.String())
		}
	}
}
