package gitlabtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTreeShape checks GET /projects/:id/repository/tree as GitLab answers
// it: entries {id, name, type, path, mode}, directories first, offset
// pagination headers, recursive listings, 404 Tree Not Found for an empty
// repository, a missing ref and a missing path; and the raw blob endpoint.
func TestTreeShape(t *testing.T) {
	srv := New(Options{})
	defer srv.Close()
	id, _ := srv.AddProject(Project{Path: "g/app", Files: map[string]string{
		"Containerfile": "FROM debian\n", "b.txt": "b", "docker/Dockerfile": "FROM alpine\n", "docker/sub/x": "x",
	}})
	empty, _ := srv.AddProject(Project{Path: "g/empty", EmptyRepo: true})
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.APIURL()+path, nil)
		req.Header.Set("PRIVATE-TOKEN", srv.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, strings.TrimSpace(string(b))
	}
	type entry struct{ ID, Name, Type, Path, Mode string }
	decode := func(body string) []entry {
		var es []entry
		if err := json.Unmarshal([]byte(body), &es); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return es
	}
	p := "/projects/" + itoa(id) + "/repository/tree"

	code, h, body := get(p + "?ref=main&per_page=2")
	es := decode(body)
	if code != 200 || len(es) != 2 || es[0] != (entry{es[0].ID, "docker", "tree", "docker", "040000"}) ||
		es[1] != (entry{BlobID("FROM debian\n"), "Containerfile", "blob", "Containerfile", "100644"}) {
		t.Fatalf("page 1: %d %s", code, body)
	}
	if h.Get("X-Total") != "3" || h.Get("X-Total-Pages") != "2" || h.Get("X-Next-Page") != "2" || h.Get("X-Page") != "1" {
		t.Errorf("pagination headers: %v", h)
	}
	if _, h, body := get(p + "?ref=main&per_page=2&page=2"); len(decode(body)) != 1 || h.Get("X-Next-Page") != "" {
		t.Errorf("page 2: %s %v", body, h)
	}
	if _, _, body := get(p + "?path=docker&recursive=true"); len(decode(body)) != 3 {
		t.Errorf("recursive docker/: %s", body)
	}
	for _, q := range []string{"?ref=nope", "?path=nope", "?path=Containerfile"} {
		if code, _, body := get(p + q); code != 404 || body != `{"message":"404 Tree Not Found"}` {
			t.Errorf("%s: %d %s", q, code, body)
		}
	}
	if code, _, body := get("/projects/" + itoa(empty) + "/repository/tree"); code != 404 || body != `{"message":"404 Tree Not Found"}` {
		t.Errorf("empty repository: %d %s", code, body)
	}
	if code, _, body := get("/projects/" + itoa(id) + "/repository/blobs/" + BlobID("FROM alpine\n") + "/raw"); code != 200 || body != "FROM alpine" {
		t.Errorf("raw blob: %d %q", code, body)
	}
	if code, _, body := get("/projects/" + itoa(id) + "/repository/blobs/" + BlobID("nope") + "/raw"); code != 404 || body != `{"message":"404 Blob Not Found"}` {
		t.Errorf("missing blob: %d %s", code, body)
	}
}

// The raw file's X-Gitlab-Last-Commit-Id is the last commit that changed
// the file (what a commit's last_commit_id is checked against), and
// X-Gitlab-Commit-Id the ref's head.
func TestRawFileLastCommitID(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/app")
	changed := mustDo[string](t)(s.SetFile("g/app", "Containerfile", "FROM debian:12\n"))
	head := mustDo[string](t)(s.SetFile("g/app", "README.md", "hello\n"))
	code, h, _ := rawGet(t, s, "/projects/"+pathID("g/app")+"/repository/files/Containerfile/raw?ref=main")
	if code != 200 || h.Get("X-Gitlab-Last-Commit-Id") != changed || h.Get("X-Gitlab-Commit-Id") != head {
		t.Fatalf("%d last commit %s (want %s), commit %s (want %s)", code, h.Get("X-Gitlab-Last-Commit-Id"), changed, h.Get("X-Gitlab-Commit-Id"), head)
	}
}
