package gitlabtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// Pipelines on tags as GitLab makes them: POST /pipeline with a tag as ref,
// RunPipeline on a tag, and the tag pipeline a new tag starts with OnTag,
// each with tag true and the tag's name as ref in the REST answer and in
// the Pipeline Hook.
func TestTagPipelines(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/base")
	rc := newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/base", Hook{URL: rc.URL, Events: []string{"pipeline_events", "tag_push_events"}}))
	if err := s.CreateTag("g/base", "v1.0.0", "main"); err != nil {
		t.Fatal(err)
	}
	if r := rc.next(t); r.header.Get("X-Gitlab-Event") != TagPushHook {
		t.Fatalf("first delivery %s: %s", r.header.Get("X-Gitlab-Event"), r.body)
	}
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	rc.none(t) // no tag pipeline without OnTag

	code, out := apiJSON(t, s, "POST", "/projects/"+pathID("g/base")+"/pipeline", map[string]any{"ref": "v1.0.0"})
	if code != http.StatusCreated {
		t.Fatalf("create on a tag: %d %v", code, out)
	}
	if m := out.(map[string]any); m["tag"] != true || m["ref"] != "v1.0.0" || m["sha"] != s.Tags("g/base")["v1.0.0"] {
		t.Fatalf("created: %v", m)
	}
	id := int64(out.(map[string]any)["id"].(float64))
	if err := s.SetPipelineStatus(id, "success"); err != nil {
		t.Fatal(err)
	}
	r := rc.next(t)
	ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePipeline, r.body)).(*gl.PipelineEvent)
	if !ev.ObjectAttributes.Tag || ev.ObjectAttributes.Ref != "v1.0.0" || ev.ObjectAttributes.Status != "success" {
		t.Fatalf("hook: %s", r.body)
	}

	run := mustDo[int64](t)(s.RunPipeline("g/base", "v1.0.0", ""))
	if err := s.SetPipelineStatus(run, "running"); err != nil {
		t.Fatal(err)
	}
	if r := rc.next(t); !json.Valid(r.body) || !hookTag(t, r.body) {
		t.Fatalf("RunPipeline on a tag: %s", r.body)
	}

	if err := s.SetPipelineBehavior("g/base", Behavior{Duration: 10 * time.Millisecond, OnTag: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAnnotatedTag("g/base", "v1.1.0", "main", "Release 1.1.0"); err != nil {
		t.Fatal(err)
	}
	if r := rc.next(t); r.header.Get("X-Gitlab-Event") != TagPushHook {
		t.Fatalf("tag push: %s", r.body)
	}
	for range 3 { // pending, running, success
		r := rc.next(t)
		ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePipeline, r.body)).(*gl.PipelineEvent)
		if !ev.ObjectAttributes.Tag || ev.ObjectAttributes.Ref != "v1.1.0" || ev.ObjectAttributes.Source != "push" ||
			ev.ObjectAttributes.BeforeSHA != zeroSHA {
			t.Fatalf("tag pipeline hook: %s", r.body)
		}
	}
	pls := s.Pipelines("g/base")
	if last := pls[len(pls)-1]; last.Ref != "v1.1.0" || last.Status != "success" || !last.Tag {
		t.Fatalf("tag pipeline: %+v", last)
	}
}

func hookTag(t *testing.T, body []byte) bool {
	t.Helper()
	var ev struct {
		ObjectAttributes struct {
			Tag bool   `json:"tag"`
			Ref string `json:"ref"`
		} `json:"object_attributes"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.ObjectAttributes.Tag && ev.ObjectAttributes.Ref == "v1.0.0"
}

// apiGet is a GET returning status, headers and the decoded body.
func apiGet(t *testing.T, s *Server, path string) (int, http.Header, any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.APIURL()+path, nil)
	req.Header.Set("PRIVATE-TOKEN", s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET %s: %d: %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode, resp.Header, out
}

// names lists the "name" of each object of a JSON list.
func names(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(map[string]any)["name"].(string))
	}
	return out
}

// The tags API as GitLab answers it: search with ^ and $, order_by name,
// updated (the default) and version, sort, pagination headers, a tag's
// shape (lightweight and annotated), Tags::CreateService's refusals, 404s.
func TestTagsAPI(t *testing.T) {
	clock := newFakeClock()
	s := New(Options{Now: clock.Now})
	defer s.Close()
	seed(t, s, "g/base")
	tags := "/projects/" + pathID("g/base") + "/repository/tags"
	for _, name := range []string{"v1.9.0", "v1.10.0", "v1.2.0", "rc-v1", "V2"} {
		clock.Advance(time.Minute)
		mustDo[string](t)(s.SetFile("g/base", "f", name))
		if err := s.CreateTag("g/base", name, "main"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"V2", "rc-v1", "v1.2.0", "v1.10.0", "v1.9.0"}}, // updated desc
		{"?order_by=updated&sort=asc", []string{"v1.9.0", "v1.10.0", "v1.2.0", "rc-v1", "V2"}},
		{"?order_by=name&sort=asc", []string{"V2", "rc-v1", "v1.10.0", "v1.2.0", "v1.9.0"}},
		{"?order_by=version&sort=desc", []string{"v1.10.0", "v1.9.0", "v1.2.0", "rc-v1", "V2"}},
		{"?search=^v1&order_by=version&sort=asc", []string{"v1.2.0", "v1.9.0", "v1.10.0"}},
		{"?search=v1&order_by=name&sort=asc", []string{"rc-v1", "v1.10.0", "v1.2.0", "v1.9.0"}},
		{"?search=0$&order_by=name", []string{"v1.9.0", "v1.2.0", "v1.10.0"}},
		{"?search=rc-V1", []string{"rc-v1"}},
		{"?search=v2", []string{"V2"}},
	} {
		code, _, out := apiGet(t, s, tags+tt.query)
		if got := names(out); code != 200 || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %d %v, want %v", tt.query, code, got, tt.want)
		}
	}
	_, h, out := apiGet(t, s, tags+"?per_page=2&page=2")
	if len(out.([]any)) != 2 || h.Get("X-Total") != "5" || h.Get("X-Total-Pages") != "3" || h.Get("X-Next-Page") != "3" || h.Get("X-Prev-Page") != "1" {
		t.Errorf("page 2: %v %v", out, h)
	}
	if code, out := apiJSON(t, s, "GET", tags+"?order_by=date", nil); code != 400 {
		t.Errorf("bad order_by: %d %v", code, out)
	}

	head := s.Files("g/base", "main")["f"]
	code, out := apiJSON(t, s, "POST", tags, map[string]any{"tag_name": "v3.0.0", "ref": "main", "message": " Release 3 "})
	m, _ := out.(map[string]any)
	commit, _ := m["commit"].(map[string]any)
	if code != 201 || m["name"] != "v3.0.0" || m["message"] != "Release 3" || m["target"] == s.Tags("g/base")["v3.0.0"] ||
		m["created_at"] == nil || m["protected"] != false || m["release"] != nil || commit["id"] != s.Tags("g/base")["v3.0.0"] || head != "V2" {
		t.Fatalf("create annotated: %d %v", code, out)
	}
	code, out = apiJSON(t, s, "GET", tags+"/v1.2.0", nil)
	if m := out.(map[string]any); code != 200 || m["message"] != nil || m["target"] != s.Tags("g/base")["v1.2.0"] || m["created_at"] != nil {
		t.Fatalf("get lightweight: %d %v", code, out)
	}
	for _, tt := range []struct {
		body map[string]any
		code int
		want string
	}{
		{map[string]any{"tag_name": "v1.2.0", "ref": "main"}, 400, `{"message":"Tag v1.2.0 already exists"}`},
		{map[string]any{"tag_name": "v4", "ref": "nope"}, 400, `{"message":"Target nope is invalid"}`},
		{map[string]any{"tag_name": "v4", "ref": ""}, 400, `{"message":"Target is empty"}`},
		{map[string]any{"tag_name": "v 4", "ref": "main"}, 400, `{"message":"Tag name invalid"}`},
		{map[string]any{"tag_name": "a..b", "ref": "main"}, 400, `{"message":"Tag name invalid"}`},
		{map[string]any{}, 400, `{"error":"tag_name is missing, ref is missing"}`},
	} {
		if code, out := apiJSON(t, s, "POST", tags, tt.body); code != tt.code || toJSON(out) != tt.want {
			t.Errorf("create %v: %d %s, want %d %s", tt.body, code, toJSON(out), tt.code, tt.want)
		}
	}
	// A tag made from a tag or a commit id points at its commit.
	sha := s.Tags("g/base")["v1.2.0"]
	for _, ref := range []string{"v1.2.0", sha} {
		name := "from-" + ref[:6]
		if code, out := apiJSON(t, s, "POST", tags, map[string]any{"tag_name": name, "ref": ref}); code != 201 || s.Tags("g/base")[name] != sha {
			t.Errorf("tag from %s: %d %v", ref, code, out)
		}
	}
	if code, _ := apiJSON(t, s, "DELETE", tags+"/v1.2.0", nil); code != 204 || s.Tags("g/base")["v1.2.0"] != "" {
		t.Fatalf("delete: %d", code)
	}
	for _, method := range []string{"GET", "DELETE"} {
		if code, out := apiJSON(t, s, method, tags+"/v1.2.0", nil); code != 404 || toJSON(out) != `{"message":"404 Tag Not Found"}` {
			t.Errorf("%s a deleted tag: %d %v", method, code, out)
		}
	}
	// A tag name with a slash, escaped in the path as client-go does.
	if err := s.CreateTag("g/base", "release/1", "main"); err != nil {
		t.Fatal(err)
	}
	if code, out := apiJSON(t, s, "GET", tags+"/release%2F1", nil); code != 200 || out.(map[string]any)["name"] != "release/1" {
		t.Errorf("get release/1: %d %v", code, out)
	}
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
