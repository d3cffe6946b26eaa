package gitlabtest

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// The branches API as GitLab answers it: list (search, sort, pagination),
// a branch's shape (commit, protected, default, merged, can_push,
// developers_can_*), create with Branches::CreateService's refusals and a
// Push Hook, delete with GitLab's branch checks (the default branch never,
// a protected one only by a Maintainer), protected branches.
func TestBranchesAPI(t *testing.T) {
	clock := newFakeClock()
	s := New(Options{Now: clock.Now})
	defer s.Close()
	seed(t, s, "g/app")
	rc := newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/app", Hook{URL: rc.URL, Events: []string{"push_events"}}))
	branches := "/projects/" + pathID("g/app") + "/repository/branches"

	for _, name := range []string{"feature/a", "bookworm", "release/1.0"} {
		clock.Advance(time.Minute)
		code, out := apiJSON(t, s, "POST", branches, map[string]any{"branch": name, "ref": "main"})
		if m := out.(map[string]any); code != 201 || m["name"] != name || m["default"] != false || m["merged"] != false {
			t.Fatalf("create %s: %d %v", name, code, out)
		}
		r := rc.next(t)
		ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePush, r.body)).(*gl.PushEvent)
		if ev.Ref != "refs/heads/"+name || ev.Before != zeroSHA || ev.After != s.Branches("g/app")["main"] || ev.TotalCommitsCount != 0 || ev.UserUsername != TokenUsername {
			t.Fatalf("push hook of a new branch: %s", r.body)
		}
	}
	clock.Advance(time.Minute)
	mustDo[string](t)(s.SetFileOn("g/app", "bookworm", "Containerfile", "FROM debian:bookworm\n"))
	rc.next(t)

	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"bookworm", "feature/a", "main", "release/1.0"}},
		{"?sort=updated_desc", []string{"bookworm", "release/1.0", "main", "feature/a"}}, // ties by name
		{"?search=^release", []string{"release/1.0"}},
		{"?search=a", []string{"feature/a", "main", "release/1.0"}},
		{"?search=*/*", []string{"feature/a", "release/1.0"}},
		{"?search=MAIN", []string{"main"}},
	} {
		code, _, out := apiGet(t, s, branches+tt.query)
		if got := names(out); code != 200 || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %d %v, want %v", tt.query, code, got, tt.want)
		}
	}
	if _, h, out := apiGet(t, s, branches+"?per_page=3"); len(out.([]any)) != 3 || h.Get("X-Total") != "4" || h.Get("X-Next-Page") != "2" {
		t.Errorf("page 1: %v %v", out, h)
	}

	code, out := apiJSON(t, s, "GET", branches+"/main", nil)
	m := out.(map[string]any)
	if code != 200 || m["protected"] != true || m["default"] != true || m["can_push"] != false || m["developers_can_push"] != false ||
		m["commit"].(map[string]any)["id"] != s.Branches("g/app")["main"] {
		t.Fatalf("main as a Developer: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "GET", branches+"/feature%2Fa", nil); code != 200 || out.(map[string]any)["merged"] != false || out.(map[string]any)["can_push"] != true {
		t.Fatalf("feature/a: %d %v", code, out)
	}

	for _, tt := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"branch": "bookworm", "ref": "main"}, `{"message":"Branch already exists"}`},
		{map[string]any{"branch": "x", "ref": "nope"}, `{"message":"Invalid reference name: nope"}`},
		{map[string]any{"branch": "bad name", "ref": "main"}, `{"message":"Branch name is invalid"}`},
		{map[string]any{"branch": "x"}, `{"error":"ref is missing"}`},
	} {
		if code, out := apiJSON(t, s, "POST", branches, tt.body); code != 400 || toJSON(out) != tt.want {
			t.Errorf("create %v: %d %s, want 400 %s", tt.body, code, toJSON(out), tt.want)
		}
	}

	// Protection: a Developer may not delete a protected branch nor create
	// one a rule keeps to Maintainers; a Maintainer may delete it; nobody
	// deletes the default branch.
	if err := s.ProtectBranch("g/app", "release/*", Protection{Push: RoleDeveloper}); err != nil {
		t.Fatal(err)
	}
	if code, out := apiJSON(t, s, "GET", branches+"/release%2F1.0", nil); code != 200 || out.(map[string]any)["protected"] != true ||
		out.(map[string]any)["developers_can_push"] != true || out.(map[string]any)["developers_can_merge"] != false || out.(map[string]any)["can_push"] != true {
		t.Fatalf("release/1.0: %d %v", code, out)
	}
	for _, tt := range []struct {
		branch string
		code   int
		want   string
	}{
		{"main", 400, `{"message":"The default branch of a project cannot be deleted."}`},
		{"release%2F1.0", 400, `{"message":"You are not allowed to delete protected branches from this project. Only a project maintainer or owner can delete a protected branch."}`},
		{"nope", 404, `{"message":"404 Branch Not Found"}`},
	} {
		if code, out := apiJSON(t, s, "DELETE", branches+"/"+tt.branch, nil); code != tt.code || toJSON(out) != tt.want {
			t.Errorf("delete %s: %d %s, want %d %s", tt.branch, code, toJSON(out), tt.code, tt.want)
		}
	}
	if err := s.SetCISettings("g/app", CISettings{TokenRole: RoleMaintainer}); err != nil {
		t.Fatal(err)
	}
	before := s.Branches("g/app")["release/1.0"]
	if code, _ := apiJSON(t, s, "DELETE", branches+"/release%2F1.0", nil); code != 204 || s.Branches("g/app")["release/1.0"] != "" {
		t.Fatalf("a Maintainer deletes release/1.0: %d", code)
	}
	r := rc.next(t)
	ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePush, r.body)).(*gl.PushEvent)
	if ev.Ref != "refs/heads/release/1.0" || ev.Before != before || ev.After != zeroSHA || !strings.Contains(string(r.body), `"checkout_sha":null`) {
		t.Fatalf("push hook of a deleted branch: %s", r.body)
	}
	if code, out := apiJSON(t, s, "GET", branches+"/main", nil); code != 200 || out.(map[string]any)["can_push"] != true {
		t.Fatalf("main as a Maintainer: %d %v", code, out)
	}

	code, out = apiJSON(t, s, "GET", "/projects/"+pathID("g/app")+"/protected_branches", nil)
	list := out.([]any)
	if code != 200 || len(list) != 2 || toJSON(list[0].(map[string]any)["name"]) != `"main"` {
		t.Fatalf("protected branches: %d %v", code, out)
	}
	rel := list[1].(map[string]any)
	push := rel["push_access_levels"].([]any)[0].(map[string]any)
	merge := rel["merge_access_levels"].([]any)[0].(map[string]any)
	if rel["name"] != "release/*" || push["access_level"] != 30.0 || push["access_level_description"] != "Developers + Maintainers" ||
		merge["access_level"] != 40.0 || rel["allow_force_push"] != false {
		t.Fatalf("release/*: %v", rel)
	}
}

// Files per branch, tag and commit: SetFileOn commits to a branch, and the
// tree, raw file and GraphQL blobs(ref:) read any ref.
func TestFilesPerRef(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/base")
	if err := s.CreateBranch("g/base", "bookworm"); err != nil {
		t.Fatal(err)
	}
	sha := mustDo[string](t)(s.SetFileOn("g/base", "bookworm", "Containerfile", "FROM debian:bookworm\n"))
	if err := s.CreateTag("g/base", "v1", "bookworm"); err != nil {
		t.Fatal(err)
	}
	mustDo[string](t)(s.SetFileOn("g/base", "bookworm", "Containerfile", "FROM debian:bookworm-slim\n"))
	id := "/projects/" + pathID("g/base")
	for _, tt := range []struct{ ref, want string }{
		{"main", "FROM debian\n"},
		{"bookworm", "FROM debian:bookworm-slim\n"},
		{"v1", "FROM debian:bookworm\n"},
		{sha, "FROM debian:bookworm\n"},
	} {
		code, _, body := rawGet(t, s, id+"/repository/files/Containerfile/raw?ref="+tt.ref)
		if code != 200 || body != tt.want {
			t.Errorf("raw at %s: %d %q", tt.ref, code, body)
		}
		_, _, tree := apiGet(t, s, id+"/repository/tree?ref="+tt.ref)
		if e := tree.([]any)[0].(map[string]any); e["id"] != BlobID(tt.want) {
			t.Errorf("tree at %s: %v", tt.ref, tree)
		}
		q := `{ project(fullPath: "g/base") { repository { rootRef blobs(paths: ["Containerfile"], ref: "` + tt.ref + `") { nodes { rawTextBlob } } } } }`
		_, out := postGraphQL(t, s, s.Token, q, nil)
		if !strings.Contains(out, `"rootRef":"main"`) || !strings.Contains(out, toJSON(tt.want)) {
			t.Errorf("GraphQL blobs at %s: %s", tt.ref, out)
		}
	}
	if _, err := s.SetFileOn("g/base", "nope", "f", "x"); err == nil {
		t.Error("SetFileOn a missing branch: no error")
	}
}

// rawGet is a GET returning the body as text.
func rawGet(t *testing.T, s *Server, path string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.APIURL()+path, nil)
	req.Header.Set("PRIVATE-TOKEN", s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
