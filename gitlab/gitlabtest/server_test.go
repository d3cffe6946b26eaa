package gitlabtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, s *Server, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.APIURL()+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestServerShapes(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	for i := range 45 {
		if _, err := s.AddProject(Project{Path: "g/sub/p" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Files: map[string]string{"f": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddProject(Project{Path: "g/empty", EmptyRepo: true}); err != nil {
		t.Fatal(err)
	}
	auth := map[string]string{"PRIVATE-TOKEN": s.Token}

	tests := []struct {
		name       string
		path       string
		hdr        map[string]string
		wantStatus int
		wantBody   string
		headers    map[string]string
	}{
		{"no token", "/groups/g", nil, 401, `{"message":"401 Unauthorized"}`, nil},
		{"wrong token", "/groups/g", map[string]string{"PRIVATE-TOKEN": "x"}, 401, `{"message":"401 Unauthorized"}`, nil},
		{"bearer", "/groups/g", map[string]string{"Authorization": "Bearer " + s.Token}, 200, `"full_path":"g"`, nil},
		{"group by encoded path", "/groups/g%2Fsub", auth, 200, `"full_path":"g/sub"`, nil},
		{"unknown project", "/projects/nope%2Fx", auth, 404, `{"message":"404 Project Not Found"}`, nil},
		{"unknown group", "/groups/nope", auth, 404, `{"message":"404 Group Not Found"}`, nil},
		{"unknown route", "/nothing", auth, 404, `{"error":"404 Not Found"}`, nil},
		{"missing file", "/projects/g%2Fsub%2Fpa/repository/files/nope/raw?ref=main", auth, 404, `{"message":"404 File Not Found"}`, nil},
		{"empty repo file", "/projects/g%2Fempty/repository/files/f/raw?ref=main", auth, 404, `404`, nil},
		{"empty repo branch", "/projects/g%2Fempty/repository/branches/main", auth, 404, `{"message":"404 Branch Not Found"}`, nil},
		{"empty repo keeps default branch", "/projects/g%2Fempty", auth, 200, `"default_branch":"main"`, nil},
		{"raw file", "/projects/g%2Fsub%2Fpa/repository/files/f/raw", auth, 200, "x", map[string]string{"X-Gitlab-Size": "1"}},
		{"first page", "/groups/g/projects?include_subgroups=true&per_page=20", auth, 200, `"container_registry_image_prefix":"registry.example.com/g/sub/`,
			map[string]string{"X-Page": "1", "X-Per-Page": "20", "X-Total": "46", "X-Total-Pages": "3", "X-Next-Page": "2", "X-Prev-Page": ""}},
		{"last page", "/groups/g/projects?include_subgroups=true&per_page=20&page=3", auth, 200, `"path_with_namespace"`,
			map[string]string{"X-Page": "3", "X-Next-Page": "", "X-Prev-Page": "2"}},
		{"no subgroups", "/groups/g/projects", auth, 200, `[{"id"`, map[string]string{"X-Total": "1"}},
		{"simple drops fields", "/groups/g/projects?simple=true", auth, 200, `"path_with_namespace":"g/empty"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, s, tt.path, tt.hdr)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Fatalf("%d %s; want %d containing %s", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			for k, v := range tt.headers {
				if got, ok := resp.Header[k]; !ok || got[0] != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if tt.name == "simple drops fields" && strings.Contains(body, "empty_repo") {
				t.Error("simple=true returned empty_repo")
			}
			if strings.HasPrefix(tt.name, "first page") && !strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
				t.Errorf("Link = %q", resp.Header.Get("Link"))
			}
		})
	}
	if n := s.Requests("GET /groups/:id/projects"); n != 4 {
		t.Errorf("counted %d group project requests, want 4", n)
	}
}

func TestServerHooksNeverReturnToken(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if _, err := s.AddProject(Project{Path: "g/a"}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", s.APIURL()+"/projects/g%2Fa/hooks",
		strings.NewReader(`{"url":"https://x.example/h","token":"tok-123","pipeline_events":true}`))
	req.Header.Set("PRIVATE-TOKEN", s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil || resp.StatusCode != 201 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if strings.Contains(string(b), "tok-123") || h["token_present"] != true || h["push_events"] != true || h["enable_ssl_verification"] != true {
		t.Fatalf("hook = %s", b)
	}
	_, list := get(t, s, "/projects/g%2Fa/hooks", map[string]string{"PRIVATE-TOKEN": s.Token})
	if strings.Contains(list, "tok-123") {
		t.Fatal("token returned by list")
	}
	if got := s.Hooks("g/a"); len(got) != 1 || got[0].Token != "tok-123" {
		t.Fatalf("stored hooks = %+v", got)
	}
}

func TestServerFaults(t *testing.T) {
	now := time.Unix(1700000000, 0)
	s := New(Options{Now: func() time.Time { return now }})
	defer s.Close()
	s.Fail(Fault{Endpoint: "GET /groups/:id", Status: 429, RetryAfter: 1500 * time.Millisecond})
	resp, _ := get(t, s, "/groups/x", nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("RateLimit-Reset") != "1700000002" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = get(t, s, "/groups/x", nil)
	if resp.StatusCode != 401 {
		t.Fatalf("fault not consumed: %d", resp.StatusCode)
	}
	s.Fail(Fault{Status: 503, Times: 2})
	for range 2 {
		if resp, _ := get(t, s, "/projects/1", nil); resp.StatusCode != 503 {
			t.Fatalf("%d", resp.StatusCode)
		}
	}
	if s.TotalRequests() != 4 || s.Requests("GET /projects/:id") != 2 {
		t.Fatalf("counts %v", s.RequestCounts())
	}
}

func TestServerPipelineErrors(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if _, err := s.AddProject(Project{Path: "g/a", Files: map[string]string{"f": "x"}}); err != nil {
		t.Fatal(err)
	}
	post := func(body string) (int, string) {
		req, _ := http.NewRequest("POST", s.APIURL()+"/projects/g%2Fa/pipeline", strings.NewReader(body))
		req.Header.Set("PRIVATE-TOKEN", s.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if code, body := post(`{"ref":"nope"}`); code != 400 || body != `{"message":{"base":["Reference not found"]}}` {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := post(`{"ref":"main","variables":[{"key":"A","value":"1","variable_type":"env_var"}]}`); code != 201 || !strings.Contains(body, `"source":"api"`) {
		t.Fatalf("%d %s", code, body)
	}
	if ps := s.Pipelines("g/a"); len(ps) != 1 || ps[0].Variables["A"] != "1" {
		t.Fatalf("%+v", ps)
	}
}
