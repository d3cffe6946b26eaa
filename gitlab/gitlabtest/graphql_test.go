package gitlabtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postGraphQL(t *testing.T, s *Server, token, query string, vars map[string]any) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest("POST", s.URL+"/api/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// filesQuery is the shape of depsd's batch read.
const filesQuery = `query($paths: [String!], $files: [String!]!) {
  projects(fullPaths: $paths, first: 50) {
    nodes { id fullPath repository { blobs(paths: $files) { nodes { path oid rawTextBlob } } } }
    pageInfo { hasNextPage endCursor }
  }
}`

func seedGraphQL(t *testing.T) *Server {
	t.Helper()
	s := New(Options{})
	t.Cleanup(s.Close)
	for _, p := range []Project{
		{Path: "g/app", Files: map[string]string{"Containerfile": "FROM alpine\n", ".gitlab-deps": "g/base\n"}},
		{Path: "g/bin", Files: map[string]string{"Containerfile": "FROM x\x00\xff"}},
		{Path: "g/sub/base", Files: map[string]string{"Dockerfile": "FROM debian\n"}},
		{Path: "g/empty", EmptyRepo: true},
	} {
		if _, err := s.AddProject(p); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestGraphQLAnswersAsGitLab(t *testing.T) {
	s := seedGraphQL(t)
	many := make([]any, 51)
	for i := range many {
		many[i] = fmt.Sprintf("g/p%d", i)
	}
	files := []any{"Containerfile", "Dockerfile", ".gitlab-deps"}
	tests := []struct {
		name       string
		token      string
		query      string
		vars       map[string]any
		wantStatus int
		want       []string // substrings of the body
		notWant    []string
	}{
		{"files of a batch", s.Token, filesQuery, map[string]any{"paths": []any{"g/app", "g/sub/base"}, "files": files}, 200,
			[]string{`"fullPath":"g/app"`, `"rawTextBlob":"FROM alpine\n"`, `"oid":"` + BlobID("FROM alpine\n") + `"`, `"path":".gitlab-deps"`, `"fullPath":"g/sub/base"`, `"path":"Dockerfile"`},
			[]string{`"errors"`}},
		{"binary content has no rawTextBlob", s.Token, filesQuery, map[string]any{"paths": []any{"g/bin"}, "files": files}, 200,
			[]string{`"rawTextBlob":null`, `"path":"Containerfile"`}, nil},
		{"empty repository has no blobs", s.Token, filesQuery, map[string]any{"paths": []any{"g/empty"}, "files": files}, 200,
			[]string{`"blobs":{"nodes":[]}`}, nil},
		{"more than 50 fullPaths is a field error next to the data", s.Token,
			`query($paths: [String!]) { queryComplexity { limit } projects(fullPaths: $paths) { nodes { id } } }`, map[string]any{"paths": many}, 200,
			[]string{`"projects":null`, `"queryComplexity":{"limit":250}`, `"message":"You cannot provide more than 50 full_paths"`, `"path":["projects"]`}, nil},
		{"unknown field as graphql-ruby words it", s.Token, `{ projects { nodes { id nope } } }`, nil, 200,
			[]string{`"message":"Field 'nope' doesn't exist on type 'Project'"`, `"code":"undefinedField"`}, []string{`"data"`}},
		{"unknown argument as graphql-ruby words it", s.Token, `{ projects(nope: 1) { nodes { id } } }`, nil, 200,
			[]string{`"message":"Field 'projects' doesn't accept argument 'nope'"`, `"code":"argumentNotAccepted"`}, []string{`"data"`}},
		{"query too large", s.Token, "{ projects { nodes { id } } }" + strings.Repeat(" ", 10000), nil, 422,
			[]string{`{"errors":[{"message":"Query too large"}]}`}, nil},
		{"invalid token", "nope", `{ queryComplexity { limit } }`, nil, 401, []string{`{"errors":[{"message":"Invalid token"}]}`}, nil},
		{"anonymous: limit 200 and no private project", "", `{ queryComplexity { limit } project(fullPath: "g/app") { id } }`, nil, 200,
			[]string{`"limit":200`, `"project":null`}, nil},
		{"first above 100 is capped, not refused", s.Token, `{ group(fullPath: "g") { projects(includeSubgroups: true, first: 500) { nodes { fullPath } pageInfo { hasNextPage } } } }`, nil, 200,
			[]string{`"g/sub/base"`, `"hasNextPage":false`}, []string{`"errors"`}},
		{"subgroups only when asked", s.Token, `{ group(fullPath: "g") { projects { nodes { fullPath } } } }`, nil, 200,
			[]string{`"g/app"`}, []string{`g/sub/base`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := postGraphQL(t, s, tt.token, tt.query, tt.vars)
			if status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", status, tt.wantStatus, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s:\n%s", w, body)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(body, w) {
					t.Errorf("body has %s:\n%s", w, body)
				}
			}
		})
	}
	if n := s.Requests(GraphQLEndpoint); n != int64(len(tests)) {
		t.Errorf("counted %d GraphQL requests, want %d", n, len(tests))
	}
}

// TestGraphQLComplexity holds the fake to GitLab's rules
// (graphql_complexity.go). Anchors from GitLab: Types::BaseField's spec (a
// resolver connection without first doubles its cost, with first: 50 it
// grows by half), Resolvers::BlobsResolver's spec (one more per path, so two
// per path once the connection doubles it: the slope clients measured on
// GitLab.com before 18.4.2 and again after the fix, "15 + 2 × paths"), and
// the refusal message graphql-ruby sends.
func TestGraphQLComplexity(t *testing.T) {
	s := seedGraphQL(t)
	blobsOf := func(n int) string {
		paths := make([]string, n)
		for i := range paths {
			paths[i] = fmt.Sprintf("%q", fmt.Sprint("f", i))
		}
		return `{ queryComplexity { score } project(fullPath: "g/app") { repository { blobs(paths: [` + strings.Join(paths, ",") + `]) { nodes { size rawTextBlob } } } } }`
	}
	tests := []struct {
		name  string
		query string
		score int
	}{
		// queryComplexity 1+1; project: resolver, child + 1; id 1.
		{"plain fields", `{ queryComplexity { score } project(fullPath: "g/app") { id fullPath } }`, 2 + 3},
		// projects: child (nodes 1 + id 1 = 2) + 1 = 3, × (1 + 100 × 1 %) = 6.
		{"connection without first doubles", `{ queryComplexity { score } projects { nodes { id } } }`, 2 + 6},
		// × (1 + 50 × 1 %) = 4.5, truncated.
		{"first 50 adds half", `{ queryComplexity { score } projects(first: 50) { nodes { id } } }`, 2 + 4},
		{"first above 100 counts as 100", `{ queryComplexity { score } projects(first: 500) { nodes { id } } }`, 2 + 6},
		// blobs: child (nodes 1 + size 1 + rawTextBlob 1 = 3) + 1 + paths + gitaly 1,
		// × 2; repository 1 +; project resolver + 1.
		{"one blob path", blobsOf(1), 2 + (3+1+1+1)*2 + 1 + 1},
		{"ten blob paths: two a path", blobsOf(10), 2 + (3+1+10+1)*2 + 1 + 1},
		// rootRef calls Gitaly: 2.
		{"gitaly field", `{ queryComplexity { score } project(fullPath: "g/app") { repository { rootRef } } }`, 2 + (1 + 2) + 1},
		// the score does not depend on how many projects fullPaths names.
		{"fullPaths do not count", `{ queryComplexity { score } projects(fullPaths: ["a","b","c","d","e","f","g"]) { nodes { id } } }`, 2 + 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, body := postGraphQL(t, s, s.Token, tt.query, nil)
			if want := fmt.Sprintf(`"score":%d`, tt.score); !strings.Contains(body, want) {
				t.Errorf("want %s, got %s", want, body)
			}
		})
	}

	// 200 paths: 2 + (3+1+200+1)×2 + 2 = 414 > 250, refused whole.
	status, body := postGraphQL(t, s, s.Token, blobsOf(200), nil)
	if want := `{"errors":[{"message":"Query has complexity of 414, which exceeds max complexity of 250"}]}`; status != 200 || strings.TrimSpace(body) != want {
		t.Errorf("got %d %s, want 200 %s", status, body, want)
	}
	s.SetGraphQLAdmin(true)
	_, body = postGraphQL(t, s, s.Token, blobsOf(200), nil)
	if !strings.Contains(body, "exceeds max complexity of 300") {
		t.Errorf("admin: %s", body)
	}
	_, body = postGraphQL(t, s, s.Token, blobsOf(140), nil) // 2 + 145×2 + 2 = 294
	if !strings.Contains(body, `"score":294`) {
		t.Errorf("admin under 300: %s", body)
	}
}

func TestGraphQLOldGitLabAndTimeouts(t *testing.T) {
	s := seedGraphQL(t)
	files := []any{"Containerfile"}
	s.SetOldGraphQL(true)
	_, body := postGraphQL(t, s, s.Token, filesQuery, map[string]any{"paths": []any{"g/app"}, "files": files})
	if !strings.Contains(body, `"message":"Field 'blobs' doesn't exist on type 'Repository'"`) || strings.Contains(body, `"data"`) {
		t.Errorf("old GitLab: %s", body)
	}
	s.SetOldGraphQL(false)
	s.SetGraphQLTimeouts("Repository.blobs")
	_, body = postGraphQL(t, s, s.Token, filesQuery, map[string]any{"paths": []any{"g/app"}, "files": files})
	for _, w := range []string{`"blobs":null`, `"message":"Timeout on Repository.blobs"`, `"path":["projects","nodes",0,"repository","blobs"]`, `"fullPath":"g/app"`} {
		if !strings.Contains(body, w) {
			t.Errorf("timeout: body lacks %s: %s", w, body)
		}
	}
}

func TestGraphQLCursorsListEveryProject(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	for i := range 250 {
		if _, err := s.AddProject(Project{Path: fmt.Sprintf("big/s%d/p%d", i%3, i), Files: map[string]string{"f": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	after, pages := any(nil), 0
	for {
		_, body := postGraphQL(t, s, s.Token, `query($after: String) { group(fullPath: "big") { projects(includeSubgroups: true, first: 100, after: $after) {
			nodes { fullPath } pageInfo { hasNextPage endCursor } } } }`, map[string]any{"after": after})
		var out struct {
			Data struct {
				Group struct {
					Projects struct {
						Nodes    []struct{ FullPath string }
						PageInfo struct {
							HasNextPage bool
							EndCursor   string
						}
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, n := range out.Data.Group.Projects.Nodes {
			seen[n.FullPath] = true
		}
		if !out.Data.Group.Projects.PageInfo.HasNextPage {
			break
		}
		after = out.Data.Group.Projects.PageInfo.EndCursor
	}
	if len(seen) != 250 || pages != 3 {
		t.Errorf("listed %d projects in %d pages, want 250 in 3", len(seen), pages)
	}
}

// TestGraphQLBranchNames: Repository.branchNames as GitLab answers it
// (Resolvers::RepositoryBranchNamesResolver, Repositories::BranchNamesFinder,
// RepositorySetCache#search): the names matching searchPattern, a Redis
// glob (* any run, slashes too; ? one character; [..] a class; \ escapes),
// sorted with the default branch first, then offset dropped and limit
// taken; null for an empty pattern; its declared complexity of 170 counted
// once however many projects answer.
func TestGraphQLBranchNames(t *testing.T) {
	s := seedGraphQL(t)
	for _, b := range []string{"bookworm", "bullseye", "release/1.0", "release/2.0", "feature/x"} {
		if err := s.CreateBranch("g/app", b); err != nil {
			t.Fatal(err)
		}
	}
	query := `query($pattern: String!, $offset: Int!, $limit: Int!) { projects(fullPaths: ["g/app", "g/sub/base", "g/empty"], first: 3) {
		nodes { fullPath repository { branchNames(searchPattern: $pattern, offset: $offset, limit: $limit) } } } }`
	tests := []struct {
		pattern       string
		offset, limit int
		want          string // g/app's answer
	}{
		{"*", 0, 100, `["main","bookworm","bullseye","feature/x","release/1.0","release/2.0"]`},
		{"*", 2, 3, `["bullseye","feature/x","release/1.0"]`},
		{"release/*", 0, 100, `["release/1.0","release/2.0"]`},
		{"b*", 0, 1, `["bookworm"]`},
		{"bookworm", 0, 100, `["bookworm"]`},
		{"b??kworm", 0, 100, `["bookworm"]`},
		{"release/[12].0", 0, 100, `["release/1.0","release/2.0"]`},
		{"release/[^1].0", 0, 100, `["release/2.0"]`},
		{`book\worm`, 0, 100, `["bookworm"]`},
		{`book\*`, 0, 100, `[]`},
		{"trixie", 0, 100, `[]`},
		{"", 0, 100, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			_, body := postGraphQL(t, s, s.Token, query, map[string]any{"pattern": tt.pattern, "offset": tt.offset, "limit": tt.limit})
			var out struct {
				Data struct {
					Projects struct {
						Nodes []struct {
							FullPath   string
							Repository struct {
								BranchNames json.RawMessage
							}
						}
					}
				}
			}
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, n := range out.Data.Projects.Nodes {
				got[n.FullPath] = string(n.Repository.BranchNames)
			}
			if got["g/app"] != tt.want {
				t.Errorf("g/app: %s, want %s (%s)", got["g/app"], tt.want, body)
			}
			if tt.pattern == "*" && tt.offset == 0 && got["g/sub/base"] != `["main"]` {
				t.Errorf("g/sub/base: %s, want its default branch alone", got["g/sub/base"])
			}
			if tt.pattern != "" && got["g/empty"] != `[]` {
				t.Errorf("g/empty: %s, want no branch", got["g/empty"])
			}
		})
	}
	// The declared 170, plus queryComplexity's 2, once for any number of
	// projects; inside projects(first: 50) it grows by half with the rest.
	for _, tt := range []struct {
		query string
		score int
	}{
		{`{ queryComplexity { score } project(fullPath: "g/app") { repository { branchNames(searchPattern: "*", offset: 0, limit: 100) } } }`, 2 + (1 + 170) + 1},
		{`{ queryComplexity { score } projects(fullPaths: ["g/app", "g/sub/base"], first: 10) { nodes { repository { branchNames(searchPattern: "*", offset: 0, limit: 100) } } } }`,
			2 + 190}, // (nodes 1 + repository 1 + 170, + 1) × 1.1 = 190.3
	} {
		_, body := postGraphQL(t, s, s.Token, tt.query, nil)
		if want := fmt.Sprintf(`"score":%d`, tt.score); !strings.Contains(body, want) {
			t.Errorf("want %s, got %s", want, body)
		}
	}
	_, body := postGraphQL(t, s, s.Token, `{ projects(fullPaths: ["g/app"], first: 50) { nodes { repository { branchNames(searchPattern: "*", offset: 0, limit: 100) } } } }`, nil)
	if want := `Query has complexity of 259, which exceeds max complexity of 250`; !strings.Contains(body, want) {
		t.Errorf("branchNames in projects(first: 50): %s, want %q", body, want)
	}
}

// A blobs field's ref must be a valid git ref name (BlobsResolver's
// validate_ref!): a wildcard asked as a ref is a field error, not an empty
// answer; a valid ref that does not exist answers no blob.
func TestGraphQLBlobsRef(t *testing.T) {
	s := seedGraphQL(t)
	if err := s.CreateBranch("g/app", "bookworm"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetFileOn("g/app", "bookworm", "Containerfile", "FROM debian:bookworm\n"); err != nil {
		t.Fatal(err)
	}
	query := `query($ref: String) { project(fullPath: "g/app") { repository { blobs(paths: ["Containerfile"], ref: $ref) { nodes { path rawTextBlob } } } } }`
	for _, tt := range []struct{ ref, want string }{
		{"bookworm", `"rawTextBlob":"FROM debian:bookworm\n"`},
		{"trixie", `"blobs":{"nodes":[]}`},
		{"release/*", `"message":"Ref is not valid"`},
		{"a..b", `"message":"Ref is not valid"`},
		{"refs/heads/bookworm", `"message":"Ref is not valid"`},
	} {
		_, body := postGraphQL(t, s, s.Token, query, map[string]any{"ref": tt.ref})
		if !strings.Contains(body, tt.want) {
			t.Errorf("ref %q: %s, want %s", tt.ref, body, tt.want)
		}
	}
}
