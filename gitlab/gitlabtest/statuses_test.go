package gitlabtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// callAs sends an API request with token (PRIVATE-TOKEN, or a Bearer
// token when it has no glpat- prefix) and a JSON body, and returns the
// status and the body.
func callAs(t *testing.T, s *Server, token, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.APIURL()+path, rd)
	switch {
	case token == "":
	case strings.HasPrefix(token, "glpat-"):
		req.Header.Set("PRIVATE-TOKEN", token)
	default:
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

type statusOut struct {
	ID         int64  `json:"id"`
	Status     string `json:"status"`
	Name       string `json:"name"`
	Ref        string `json:"ref"`
	PipelineID int64  `json:"pipeline_id"`
	TargetURL  string `json:"target_url"`
	Author     struct {
		Username string `json:"username"`
	} `json:"author"`
}

// Commit statuses follow GitLab's state machine: every transition GitLab
// allows is taken, every one it refuses answers 400 with GitLab's words,
// and a status after a final one is a new status.
func TestCommitStatusTransitions(t *testing.T) {
	tests := []struct {
		name  string
		steps []string // states posted in order
		codes []int
		final string // status of the last accepted post
		msg   string // the last refusal's message
	}{
		{"pending running success", []string{"pending", "running", "success"}, []int{201, 201, 201}, "success", ""},
		{"straight to running", []string{"running"}, []int{201}, "running", ""},
		{"running twice", []string{"running", "running"}, []int{201, 400}, "running",
			`Cannot transition status via :run from :running (Reason(s): Status cannot transition via \"run\")`},
		{"pending twice", []string{"pending", "pending"}, []int{201, 400}, "pending",
			`Cannot transition status via :enqueue from :pending (Reason(s): Status cannot transition via \"enqueue\")`},
		{"running back to pending", []string{"running", "pending"}, []int{201, 400}, "running",
			`Cannot transition status via :enqueue from :running (Reason(s): Status cannot transition via \"enqueue\")`},
		{"running skipped", []string{"running", "skipped"}, []int{201, 400}, "running",
			`Cannot transition status via :skip from :running (Reason(s): Status cannot transition via \"skip\")`},
		{"pending skipped", []string{"pending", "skipped"}, []int{201, 201}, "skipped", ""},
		{"running canceled", []string{"running", "canceled"}, []int{201, 201}, "canceled", ""},
		{"running failed", []string{"running", "failed"}, []int{201, 201}, "failed", ""},
		{"after success a new pending", []string{"success", "pending", "running", "success"}, []int{201, 201, 201, 201}, "success", ""},
		{"after failed a new failed", []string{"failed", "failed"}, []int{201, 201}, "failed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Options{})
			defer s.Close()
			seed(t, s, "g/app")
			sha := mustDo[ProjectInfo](t)(projectInfo(s, "g/app")).HeadCommit
			var last statusOut
			var lastMsg string
			for i, state := range tt.steps {
				code, body := callAs(t, s, s.Token, "POST", "/projects/g%2Fapp/statuses/"+sha,
					map[string]any{"state": state, "name": "depsd/chain", "ref": "main"})
				if code != tt.codes[i] {
					t.Fatalf("post %s (step %d): %d %s, want %d", state, i, code, body, tt.codes[i])
				}
				if code == 201 {
					last = decode[statusOut](t, body)
				} else {
					lastMsg = decode[map[string]string](t, body)["message"]
				}
			}
			if last.Status != tt.final {
				t.Errorf("status %q, want %q", last.Status, tt.final)
			}
			if want := strings.ReplaceAll(tt.msg, `\"`, `"`); lastMsg != want {
				t.Errorf("refusal %q, want %q", lastMsg, want)
			}
		})
	}
}

// A status on a commit without a pipeline makes an external pipeline that
// follows it; a status on a finished pipeline runs it again and its end
// follows the status, each change a Pipeline Hook.
func TestCommitStatusRecomputesPipeline(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/app", "g/lib")
	rc := newReceiver(t)
	for _, p := range []string{"g/app", "g/lib"} {
		if _, err := s.AddHook(p, Hook{URL: rc.URL, Events: []string{"pipeline_events"}}); err != nil {
			t.Fatal(err)
		}
	}
	post := func(project, sha string, body map[string]any) statusOut {
		t.Helper()
		code, out := callAs(t, s, s.Token, "POST", "/projects/"+url.PathEscape(project)+"/statuses/"+sha, body)
		if code != 201 {
			t.Fatalf("post %v: %d %s", body, code, out)
		}
		return decode[statusOut](t, out)
	}
	hookStatus := func() (int64, string, string) {
		t.Helper()
		ev := pipelineEvent(t, rc.next(t))
		return ev.ObjectAttributes.ID, ev.ObjectAttributes.Status, ev.ObjectAttributes.Source
	}

	// No pipeline: an external one, owned by the poster.
	appSHA := mustDo[ProjectInfo](t)(projectInfo(s, "g/app")).HeadCommit
	st := post("g/app", appSHA, map[string]any{"state": "pending", "context": "depsd/chain", "ref": "main"})
	pls := s.Pipelines("g/app")
	if len(pls) != 1 || pls[0].Source != "external" || pls[0].ID != st.PipelineID || pls[0].Status != "pending" || st.Name != "depsd/chain" {
		t.Fatalf("pipelines %+v, status %+v: want one external pipeline, pending", pls, st)
	}
	if id, status, source := hookStatus(); id != st.PipelineID || status != "pending" || source != "external" {
		t.Fatalf("hook %d %s %s", id, status, source)
	}
	post("g/app", appSHA, map[string]any{"state": "running", "context": "depsd/chain", "ref": "main"})
	if _, status, _ := hookStatus(); status != "running" {
		t.Fatalf("hook status %s, want running", status)
	}
	post("g/app", appSHA, map[string]any{"state": "failed", "context": "depsd/chain", "ref": "main"})
	if _, status, _ := hookStatus(); status != "failed" {
		t.Fatalf("hook status %s, want failed", status)
	}

	// A finished pipeline of the lib: a running status runs it again, a
	// success ends it success, a failure fails it.
	id, err := s.AddPipeline("g/lib", "main", "push", "success")
	if err != nil {
		t.Fatal(err)
	}
	if _, status, _ := hookStatus(); status != "success" {
		t.Fatalf("hook status %s", status)
	}
	libSHA := mustDo[ProjectInfo](t)(projectInfo(s, "g/lib")).HeadCommit
	st = post("g/lib", libSHA, map[string]any{"state": "running", "name": "depsd/chain"})
	if st.PipelineID != id || st.Ref != "main" {
		t.Fatalf("status %+v: want on pipeline %d, ref main", st, id)
	}
	expect := func(want string) {
		t.Helper()
		if got, status, _ := hookStatus(); got != id || status != want {
			t.Fatalf("hook of %d %s, want %d %s", got, status, id, want)
		}
	}
	expect("running")
	post("g/lib", libSHA, map[string]any{"state": "success", "name": "depsd/chain"})
	expect("success")
	post("g/lib", libSHA, map[string]any{"state": "pending", "name": "depsd/chain"})
	expect("running")
	post("g/lib", libSHA, map[string]any{"state": "failed", "name": "depsd/chain"})
	expect("failed")
	if pl := s.Pipelines("g/lib")[0]; pl.Status != "failed" {
		t.Fatalf("pipeline %s, want failed", pl.Status)
	}
	all := s.Statuses("g/lib", libSHA)
	if len(all) != 2 || !all[0].Retried || all[1].Retried || all[1].Status != "failed" || all[0].Status != "success" {
		t.Fatalf("statuses %+v: want a retried success and a failed", all)
	}
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	rc.none(t)
}

// The statuses list shows the latest per name unless all=true, filters by
// ref and name, and 404s an unknown commit or project.
func TestListCommitStatuses(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/app")
	if err := s.CreateBranch("g/app", "dev"); err != nil {
		t.Fatal(err)
	}
	sha := mustDo[ProjectInfo](t)(projectInfo(s, "g/app")).HeadCommit
	for _, b := range []map[string]any{
		{"state": "success", "name": "a", "ref": "main", "target_url": "https://ci/1"},
		{"state": "failed", "name": "a", "ref": "main"},
		{"state": "running", "name": "b", "ref": "main"},
		{"state": "pending", "name": "a", "ref": "dev"},
	} {
		if code, body := callAs(t, s, s.Token, "POST", "/projects/g%2Fapp/statuses/"+sha, b); code != 201 {
			t.Fatalf("post %v: %d %s", b, code, body)
		}
	}
	list := func(q string) []string {
		t.Helper()
		code, body := callAs(t, s, s.Token, "GET", "/projects/g%2Fapp/repository/commits/"+sha+"/statuses"+q, nil)
		if code != 200 {
			t.Fatalf("list %s: %d %s", q, code, body)
		}
		var out []string
		for _, st := range decode[[]statusOut](t, body) {
			out = append(out, st.Name+":"+st.Ref+":"+st.Status)
		}
		return out
	}
	for q, want := range map[string]string{
		"":                     "a:main:failed b:main:running a:dev:pending",
		"?all=true":            "a:main:success a:main:failed b:main:running a:dev:pending",
		"?ref=main":            "a:main:failed b:main:running",
		"?name=a&sort=desc":    "a:dev:pending a:main:failed",
		"?name=a&ref=dev":      "a:dev:pending",
		"?all=true&per_page=1": "a:main:success",
	} {
		if got := strings.Join(list(q), " "); got != want {
			t.Errorf("list%s = %s, want %s", q, got, want)
		}
	}
	for path, want := range map[string]string{
		"/projects/g%2Fapp/repository/commits/" + strings.Repeat("0", 40) + "/statuses": "404 Commit Not Found",
		"/projects/g%2Fnone/repository/commits/" + sha + "/statuses":                    "404 Project Not Found",
	} {
		code, body := callAs(t, s, s.Token, "GET", path, nil)
		if code != 404 || decode[map[string]string](t, body)["message"] != want {
			t.Errorf("GET %s: %d %s, want 404 %s", path, code, body, want)
		}
	}
}

// The POST refuses what GitLab refuses: a missing or unknown state, an
// unknown commit, a pipeline_id of another commit, a commit on no branch
// without ref; and a Reporter (403).
func TestCommitStatusRefusals(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "g/app", "g/other")
	sha := mustDo[ProjectInfo](t)(projectInfo(s, "g/app")).HeadCommit
	other, err := s.AddPipeline("g/other", "main", "push", "success")
	if err != nil {
		t.Fatal(err)
	}
	rep := mustDo[User](t)(s.AddUser("rep"))
	dev := mustDo[User](t)(s.AddUser("dev"))
	if err := s.AddMember("g/app", "rep", AccessReporter); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember("g", "dev", AccessDeveloper); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, token, sha string
		body             map[string]any
		code             int
		want             string
	}{
		{"no state", s.Token, sha, map[string]any{"name": "x"}, 400, `{"error":"state is missing"}`},
		{"unknown state", s.Token, sha, map[string]any{"state": "error"}, 400, `{"error":"state does not have a valid value"}`},
		{"unknown commit", s.Token, strings.Repeat("1", 40), map[string]any{"state": "pending"}, 404, `{"message":"404 Commit Not Found"}`},
		{"pipeline of another project", s.Token, sha, map[string]any{"state": "pending", "pipeline_id": other}, 404,
			`{"message":"404 Pipeline for pipeline_id, sha and ref Not Found"}`},
		{"reporter", rep.Token, sha, map[string]any{"state": "pending"}, 403, `{"message":"403 Forbidden"}`},
		{"developer through the group", dev.Token, sha, map[string]any{"state": "pending"}, 201, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := callAs(t, s, tt.token, "POST", "/projects/g%2Fapp/statuses/"+tt.sha, tt.body)
			if code != tt.code || (tt.want != "" && strings.TrimSpace(body) != tt.want) {
				t.Fatalf("%d %s, want %d %s", code, body, tt.code, tt.want)
			}
		})
	}
	if st := s.Statuses("g/app", sha); len(st) != 1 || st[0].Username != "dev" || st[0].Name != "default" {
		t.Fatalf("statuses %+v: want dev's one, named default", st)
	}
}
