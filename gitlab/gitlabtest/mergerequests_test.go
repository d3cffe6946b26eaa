package gitlabtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// mrFixture is a project g/app whose branch depsd/pins changes the
// Containerfile, with a hook receiving every event.
func mrFixture(t *testing.T, b Behavior) (*Server, *receiver, string) {
	t.Helper()
	s := New(Options{})
	t.Cleanup(s.Close)
	seed(t, s, "g/app")
	rc := newReceiver(t)
	mustDo[int64](t)(s.AddHook("g/app", Hook{URL: rc.URL, Events: []string{"push_events", "pipeline_events", "merge_requests_events"}}))
	if err := s.CreateBranch("g/app", "depsd/pins"); err != nil {
		t.Fatal(err)
	}
	mustDo[string](t)(s.SetFileOn("g/app", "depsd/pins", "Containerfile", "FROM debian@sha256:bbb\n"))
	if err := s.SetPipelineBehavior("g/app", b); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for len(rc.got) > 0 {
		<-rc.got
	}
	return s, rc, "/projects/" + pathID("g/app") + "/merge_requests"
}

// nextEvent returns the next delivery of event, skipping others.
func (rc *receiver) nextEvent(t *testing.T, event string) received {
	t.Helper()
	for {
		if r := rc.next(t); r.header.Get("X-Gitlab-Event") == event {
			return r
		}
	}
}

// Create, get, list, update, close and reopen as GitLab answers them, with
// their refusals and Merge Request Hooks.
func TestMergeRequestsAPI(t *testing.T) {
	s, rc, mrs := mrFixture(t, Behavior{})
	head := s.Branches("g/app")["depsd/pins"]
	code, out := apiJSON(t, s, "POST", mrs, map[string]any{
		"source_branch": "depsd/pins", "target_branch": "main", "title": "Move pins", "description": "from chain 7",
		"labels": "depsd,pins", "remove_source_branch": true,
	})
	m, _ := out.(map[string]any)
	if code != 201 || m["iid"] != 1.0 || m["state"] != "opened" || m["sha"] != head || toJSON(m["labels"]) != `["depsd","pins"]` ||
		m["force_remove_source_branch"] != true || m["detailed_merge_status"] != "mergeable" || m["merge_status"] != "can_be_merged" ||
		m["head_pipeline"] != nil || m["changes_count"] != "1" || m["description"] != "from chain 7" ||
		m["web_url"] != s.URL+"/g/app/-/merge_requests/1" || m["author"].(map[string]any)["username"] != TokenUsername ||
		toJSON(m["references"]) != `{"full":"g/app!1","relative":"!1","short":"!1"}` {
		t.Fatalf("create: %d %v", code, out)
	}
	r := rc.nextEvent(t, MergeRequestHook)
	ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypeMergeRequest, r.body)).(*gl.MergeEvent)
	if ev.ObjectAttributes.Action != "open" || ev.ObjectAttributes.IID != 1 || ev.ObjectAttributes.LastCommit.ID != head {
		t.Fatalf("hook: %s", r.body)
	}

	for _, tt := range []struct {
		body map[string]any
		code int
		want string
	}{
		{map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "again"}, 409, `{"message":["Another open merge request already exists for this source branch: !1"]}`},
		{map[string]any{"source_branch": "nope", "target_branch": "main", "title": "x"}, 400, `{"message":{"source_branch":["does not exist"]}}`},
		{map[string]any{"source_branch": "main", "target_branch": "main", "title": "x"}, 422, `{"message":["You can't use same project/branch for source and target"]}`},
		{map[string]any{"source_branch": "depsd/pins"}, 400, `{"error":"target_branch is missing, title is missing"}`},
	} {
		if code, out := apiJSON(t, s, "POST", mrs, tt.body); code != tt.code || toJSON(out) != tt.want {
			t.Errorf("create %v: %d %s, want %d %s", tt.body, code, toJSON(out), tt.code, tt.want)
		}
	}
	if code, out := apiJSON(t, s, "GET", mrs+"/9", nil); code != 404 || toJSON(out) != `{"message":"404 Merge Request Not Found"}` {
		t.Errorf("get a missing one: %d %v", code, out)
	}

	// A second, closed one, to list.
	if err := s.CreateBranch("g/app", "other"); err != nil {
		t.Fatal(err)
	}
	code, out = apiJSON(t, s, "POST", mrs, map[string]any{"source_branch": "other", "target_branch": "main", "title": "Draft: other"})
	if code != 201 || out.(map[string]any)["draft"] != true || out.(map[string]any)["detailed_merge_status"] != "draft_status" {
		t.Fatalf("create a draft: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/2", map[string]any{"state_event": "close"}); code != 200 || out.(map[string]any)["state"] != "closed" ||
		out.(map[string]any)["closed_by"] == nil || out.(map[string]any)["closed_at"] == nil {
		t.Fatalf("close: %d %v", code, out)
	}
	iids := func(query string) []float64 {
		t.Helper()
		code, _, out := apiGet(t, s, mrs+query)
		if code != 200 {
			t.Fatalf("list %s: %d %v", query, code, out)
		}
		var got []float64
		for _, x := range out.([]any) {
			got = append(got, x.(map[string]any)["iid"].(float64))
		}
		return got
	}
	for _, tt := range []struct {
		query string
		want  []float64
	}{
		{"", []float64{2, 1}},
		{"?sort=asc", []float64{1, 2}},
		{"?state=opened", []float64{1}},
		{"?state=closed", []float64{2}},
		{"?source_branch=depsd/pins", []float64{1}},
		{"?source_branch=depsd/pins&state=closed", nil},
		{"?target_branch=main", []float64{2, 1}},
		{"?labels=depsd", []float64{1}},
		{"?labels=depsd,nope", nil},
		{"?labels=None", []float64{2}},
		{"?labels=Any", []float64{1}},
		{"?iids[]=2", []float64{2}},
	} {
		if got := iids(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("list %s: %v, want %v", tt.query, got, tt.want)
		}
	}

	code, out = apiJSON(t, s, "PUT", mrs+"/1", map[string]any{"title": "Move 2 pins", "description": "d2", "labels": "depsd", "add_labels": "x"})
	if m := out.(map[string]any); code != 200 || m["title"] != "Move 2 pins" || m["description"] != "d2" || toJSON(m["labels"]) != `["depsd","x"]` {
		t.Fatalf("update: %d %v", code, out)
	}
	if r := rc.nextEvent(t, MergeRequestHook); !strings.Contains(string(r.body), `"action":"open"`) {
		t.Fatalf("second open hook: %s", r.body)
	}
	rc.nextEvent(t, MergeRequestHook) // close of !2
	if r := rc.nextEvent(t, MergeRequestHook); !strings.Contains(string(r.body), `"action":"update"`) || !strings.Contains(string(r.body), `"title":"Move 2 pins"`) {
		t.Fatalf("update hook: %s", r.body)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/1", map[string]any{}); code != 400 || !strings.Contains(toJSON(out), "at least one parameter must be provided") {
		t.Errorf("empty update: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/1", map[string]any{"state_event": "close"}); code != 200 || out.(map[string]any)["state"] != "closed" {
		t.Fatalf("close !1: %d %v", code, out)
	}
	// Reopening !2 is fine; reopening !1 as well; a third on depsd/pins
	// then conflicts with !1, and reopening !1 after it would too.
	if code, out := apiJSON(t, s, "PUT", mrs+"/1", map[string]any{"state_event": "reopen"}); code != 200 || out.(map[string]any)["state"] != "opened" {
		t.Fatalf("reopen !1: %d %v", code, out)
	}
	apiJSON(t, s, "PUT", mrs+"/1", map[string]any{"state_event": "close"})
	if code, _ := apiJSON(t, s, "POST", mrs, map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "third"}); code != 201 {
		t.Fatalf("a new one after closing !1: %d", code)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/1", map[string]any{"state_event": "reopen"}); code != 409 ||
		toJSON(out) != `{"message":["Another open merge request already exists for this source branch: !3"]}` {
		t.Fatalf("reopen !1 beside !3: %d %v", code, out)
	}
	got := s.MergeRequests("g/app")
	if len(got) != 3 || got[0].State != "closed" || got[2].State != "opened" || !slices.ContainsFunc(got[0].Notes, func(n Note) bool { return n.System && n.Body == "reopened" }) {
		t.Fatalf("stored: %+v", got)
	}
}

// A merge now: a merge commit on the target with both heads as parents,
// its Push Hook and default-branch pipeline (OnPush), the source branch
// removed when asked; and the refusals: 401 without the right to merge
// into the target, 405 when not open, 409 for a stale sha, 422 on a
// conflict.
func TestMergeRequestMerge(t *testing.T) {
	s, rc, mrs := mrFixture(t, Behavior{OnPush: true})
	apiJSON(t, s, "POST", mrs, map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "Move pins"})
	head := s.Branches("g/app")["depsd/pins"]
	main := s.Branches("g/app")["main"]

	if code, out := apiJSON(t, s, "PUT", mrs+"/1/merge", nil); code != 401 || toJSON(out) != `{"message":"401 Unauthorized"}` {
		t.Fatalf("a Developer merging into protected main: %d %v", code, out)
	}
	if err := s.SetCISettings("g/app", CISettings{TokenRole: RoleMaintainer}); err != nil {
		t.Fatal(err)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/1/merge", map[string]any{"merge_when_pipeline_succeeds": true}); code != 405 {
		t.Fatalf("auto-merge without a pipeline: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/1/merge", map[string]any{"sha": main}); code != 409 ||
		toJSON(out) != `{"message":"SHA does not match HEAD of source branch: `+head+`"}` {
		t.Fatalf("stale sha: %d %v", code, out)
	}
	code, out := apiJSON(t, s, "PUT", mrs+"/1/merge", map[string]any{"sha": head, "should_remove_source_branch": true})
	m, _ := out.(map[string]any)
	if code != 200 || m["state"] != "merged" || m["merge_commit_sha"] == nil || m["merged_by"].(map[string]any)["username"] != TokenUsername || m["merged_at"] == nil {
		t.Fatalf("merge: %d %v", code, out)
	}
	merge := m["merge_commit_sha"].(string)
	if s.Branches("g/app")["main"] != merge || s.Branches("g/app")["depsd/pins"] != "" || s.Files("g/app", "main")["Containerfile"] != "FROM debian@sha256:bbb\n" {
		t.Fatalf("after the merge: branches %v, files %v", s.Branches("g/app"), s.Files("g/app", "main"))
	}
	rc.nextEvent(t, MergeRequestHook) // open
	r := rc.nextEvent(t, MergeRequestHook)
	if !strings.Contains(string(r.body), `"action":"merge"`) || !strings.Contains(string(r.body), `"state":"merged"`) {
		t.Fatalf("merge hook: %s", r.body)
	}
	r = rc.nextEvent(t, PushHook)
	ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePush, r.body)).(*gl.PushEvent)
	if ev.Ref != "refs/heads/main" || ev.Before != main || ev.After != merge || ev.TotalCommitsCount != 2 || ev.Commits[1].ID != merge ||
		!strings.HasPrefix(ev.Commits[1].Message, "Merge branch 'depsd/pins' into 'main'") {
		t.Fatalf("push of the merge: %s", r.body)
	}
	pls := s.Pipelines("g/app")
	if last := pls[len(pls)-1]; last.Ref != "main" || last.SHA != merge || last.Source != "push" {
		t.Fatalf("the merge's pipeline: %+v", last)
	}
	r = rc.nextEvent(t, PushHook)
	if ev := mustDo[any](t)(gl.ParseWebhook(gl.EventTypePush, r.body)).(*gl.PushEvent); ev.Ref != "refs/heads/depsd/pins" || ev.After != zeroSHA {
		t.Fatalf("push of the removed source branch: %s", r.body)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/1/merge", nil); code != 405 || toJSON(out) != `{"message":"405 Method Not Allowed"}` {
		t.Fatalf("merge a merged one: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/1", map[string]any{"state_event": "close"}); code != 200 || out.(map[string]any)["state"] != "merged" {
		t.Fatalf("close a merged one: %d %v", code, out)
	}

	// A conflict: both sides changed the Containerfile since they parted.
	if err := s.CreateBranch("g/app", "conflict"); err != nil {
		t.Fatal(err)
	}
	mustDo[string](t)(s.SetFileOn("g/app", "conflict", "Containerfile", "FROM debian@sha256:ccc\n"))
	mustDo[string](t)(s.SetFile("g/app", "Containerfile", "FROM debian@sha256:ddd\n"))
	code, out = apiJSON(t, s, "POST", mrs, map[string]any{"source_branch": "conflict", "target_branch": "main", "title": "c"})
	if code != 201 || out.(map[string]any)["has_conflicts"] != true || out.(map[string]any)["detailed_merge_status"] != "conflict" {
		t.Fatalf("conflicting MR: %d %v", code, out)
	}
	if code, out := apiJSON(t, s, "PUT", mrs+"/2/merge", nil); code != 422 || toJSON(out) != `{"message":"Branch cannot be merged"}` {
		t.Fatalf("merge a conflict: %d %v", code, out)
	}
	if err := s.MergeMR("g/app", 2); err == nil {
		t.Fatal("MergeMR merged a conflict")
	}
}

// Merge request pipelines (OnMergeRequest): on creation and on each push
// to the source branch, source merge_request_event, REST ref
// refs/merge-requests/:iid/head, the Pipeline Hook's ref the source branch
// and its merge_request object; the head pipeline; an automatic merge that
// waits for it, is aborted by a push or a failure, and merges on success
// with the target's pipeline after.
func TestMergeRequestPipelinesAndAutoMerge(t *testing.T) {
	s, rc, mrs := mrFixture(t, Behavior{OnPush: true, OnMergeRequest: true})
	if err := s.SetCISettings("g/app", CISettings{TokenRole: RoleMaintainer}); err != nil {
		t.Fatal(err)
	}
	code, out := apiJSON(t, s, "POST", mrs, map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "Move pins"})
	if code != 201 {
		t.Fatalf("create: %d %v", code, out)
	}
	pls := s.Pipelines("g/app")
	mrPipe := pls[len(pls)-1]
	if mrPipe.Source != "merge_request_event" || mrPipe.Ref != "refs/merge-requests/1/head" || mrPipe.MergeRequestIID != 1 || mrPipe.SHA != s.Branches("g/app")["depsd/pins"] {
		t.Fatalf("MR pipeline: %+v", mrPipe)
	}
	hp := out.(map[string]any)["head_pipeline"].(map[string]any)
	if hp["id"] != float64(mrPipe.ID) || hp["ref"] != "refs/merge-requests/1/head" || hp["source"] != "merge_request_event" {
		t.Fatalf("head pipeline: %v", hp)
	}
	if err := s.SetPipelineStatus(mrPipe.ID, "running"); err != nil {
		t.Fatal(err)
	}
	r := rc.nextEvent(t, PipelineHook)
	var ev struct {
		ObjectAttributes struct {
			Ref    string `json:"ref"`
			Source string `json:"source"`
		} `json:"object_attributes"`
		MergeRequest *struct {
			IID          int64  `json:"iid"`
			SourceBranch string `json:"source_branch"`
			TargetBranch string `json:"target_branch"`
			State        string `json:"state"`
			URL          string `json:"url"`
		} `json:"merge_request"`
	}
	if err := json.Unmarshal(r.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ObjectAttributes.Ref != "depsd/pins" || ev.ObjectAttributes.Source != "merge_request_event" || ev.MergeRequest == nil ||
		ev.MergeRequest.IID != 1 || ev.MergeRequest.TargetBranch != "main" || ev.MergeRequest.State != "opened" {
		t.Fatalf("MR pipeline hook: %s", r.body)
	}

	// Auto-merge, then a push: aborted, a new MR pipeline, no branch pipeline.
	code, out = apiJSON(t, s, "PUT", mrs+"/1/merge", map[string]any{"auto_merge": true})
	if code != 200 || out.(map[string]any)["merge_when_pipeline_succeeds"] != true || out.(map[string]any)["state"] != "opened" ||
		out.(map[string]any)["merge_user"].(map[string]any)["username"] != TokenUsername {
		t.Fatalf("auto-merge: %d %v", code, out)
	}
	before := len(s.Pipelines("g/app"))
	sha := mustDo[string](t)(s.PushToMR("g/app", 1, "Containerfile", "FROM debian@sha256:eee\n"))
	pls = s.Pipelines("g/app")
	mr := s.MergeRequests("g/app")[0]
	if len(pls) != before+1 || pls[len(pls)-1].Source != "merge_request_event" || pls[len(pls)-1].SHA != sha || mr.AutoMerge || mr.SHA != sha ||
		mr.HeadPipelineID != pls[len(pls)-1].ID {
		t.Fatalf("after a push: pipelines %+v, MR %+v", pls[before:], mr)
	}
	mrPipe = pls[len(pls)-1]

	// Auto-merge again; the pipeline fails: aborted.
	apiJSON(t, s, "PUT", mrs+"/1/merge", map[string]any{"merge_when_pipeline_succeeds": true})
	if err := s.SetPipelineStatus(mrPipe.ID, "failed"); err != nil {
		t.Fatal(err)
	}
	if mr := s.MergeRequests("g/app")[0]; mr.AutoMerge || mr.State != "opened" {
		t.Fatalf("after a failed pipeline: %+v", mr)
	}

	// A new pipeline of the MR (as a retry would), auto-merge, success:
	// merged, and main's pipeline runs on the merge commit.
	id := mustDo[int64](t)(s.AddPipeline("g/app", "depsd/pins", "push", "running"))
	code, out = apiJSON(t, s, "PUT", mrs+"/1/merge", map[string]any{"merge_when_pipeline_succeeds": true, "sha": sha})
	if code != 200 || out.(map[string]any)["merge_when_pipeline_succeeds"] != true {
		t.Fatalf("auto-merge on a branch pipeline: %d %v", code, out)
	}
	if err := s.SetPipelineStatus(id, "success"); err != nil {
		t.Fatal(err)
	}
	mr = s.MergeRequests("g/app")[0]
	pls = s.Pipelines("g/app")
	last := pls[len(pls)-1]
	if mr.State != "merged" || mr.MergeCommitSHA == "" || last.Ref != "main" || last.SHA != mr.MergeCommitSHA || last.Source != "push" {
		t.Fatalf("after success: MR %+v, last pipeline %+v", mr, last)
	}
	var bodies []string
	for _, n := range mr.Notes {
		bodies = append(bodies, n.Body)
	}
	for _, want := range []string{"added 1 commit", "aborted the automatic merge because source branch was updated",
		"enabled an automatic merge when the pipeline for " + sha + " succeeds",
		"aborted the automatic merge because the pipeline did not succeed"} {
		if !slices.Contains(bodies, want) {
			t.Errorf("no note %q in %q", want, bodies)
		}
	}
	if bodies[len(bodies)-1] != "merged" {
		t.Errorf("last note %q, want merged", bodies[len(bodies)-1])
	}
}

// The fake's merge request hook, tag push and merge request pipeline
// payloads have the keys of GitLab's documented examples.
func TestMergeRequestPayloadShapes(t *testing.T) {
	s, rc, mrs := mrFixture(t, Behavior{OnMergeRequest: true, Duration: time.Millisecond})
	mustDo[int64](t)(s.AddHook("g/app", Hook{URL: rc.URL, Events: []string{"tag_push_events"}}))
	apiJSON(t, s, "POST", mrs, map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "Move pins", "labels": "depsd"})
	if err := s.CreateTag("g/app", "v1.2.0", "main"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitIdle(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	fake := map[string][]byte{}
	for len(rc.got) > 0 {
		r := <-rc.got
		fake[r.header.Get("X-Gitlab-Event")] = r.body
	}
	for _, tt := range []struct{ fixture, event string }{
		{"merge_request.json", MergeRequestHook},
		{"push_tag.json", TagPushHook},
		{"pipeline_merge_request.json", PipelineHook},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(fixtureDir, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(fake[tt.event], &got); err != nil {
				t.Fatalf("fake %s: %v", tt.event, err)
			}
			want, got = dropKeys(want, "changes"), dropKeys(got, "changes")
			for _, d := range shapeDiff("", want, got) {
				t.Error(d)
			}
		})
	}
}

// dropKeys removes top-level keys whose content varies by event.
func dropKeys(v any, keys ...string) any {
	if m, ok := v.(map[string]any); ok {
		for _, k := range keys {
			delete(m, k)
		}
	}
	return v
}

// With users' own tokens, the repository side follows the caller: its
// role decides pushes and merges (a Maintainer member may push to main
// while the server token is a Developer), the roles GitLab's routes need
// hold (a Reporter may read branches, not commit or open merge requests),
// and what the caller makes is theirs (the commit's pusher, the merge
// request's author, the note's author).
func TestRepositoryFollowsTheCaller(t *testing.T) {
	s, _, mrs := mrFixture(t, Behavior{})
	maint := mustDo[User](t)(s.AddUser("maud"))
	rep := mustDo[User](t)(s.AddUser("rex"))
	for _, err := range []error{s.AddMember("g/app", "maud", AccessMaintainer), s.AddMember("g/app", "rex", AccessReporter)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	commits := "/projects/" + pathID("g/app") + "/repository/commits"
	toMain := map[string]any{"branch": "main", "commit_message": "m", "actions": []any{map[string]any{"action": "create", "file_path": "x", "content": "x"}}}
	if code, body := callAs(t, s, s.Token, "POST", commits, toMain); code != 403 {
		t.Fatalf("the server token (a Developer) to main: %d %s", code, body)
	}
	if code, body := callAs(t, s, maint.Token, "POST", commits, toMain); code != 201 || !strings.Contains(body, `"committer_name":"maud"`) {
		t.Fatalf("a Maintainer member to main: %d %s", code, body)
	}
	if code, body := callAs(t, s, rep.Token, "GET", "/projects/"+pathID("g/app")+"/repository/branches", nil); code != 200 {
		t.Fatalf("a Reporter lists branches: %d %s", code, body)
	}
	toFeature := map[string]any{"branch": "f", "start_branch": "main", "commit_message": "m", "actions": []any{map[string]any{"action": "create", "file_path": "y", "content": "y"}}}
	for _, tt := range []struct {
		path string
		body map[string]any
		want string
	}{
		{commits, toFeature, `{"message":"403 Forbidden - You are not allowed to push into this branch"}`},
		{mrs, map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "t"}, `{"message":"403 Forbidden"}`},
		{"/projects/" + pathID("g/app") + "/repository/tags", map[string]any{"tag_name": "v1", "ref": "main"}, `{"message":"403 Forbidden"}`},
		{"/projects/" + pathID("g/app") + "/repository/branches", map[string]any{"branch": "b", "ref": "main"}, `{"message":"403 Forbidden"}`},
	} {
		if code, body := callAs(t, s, rep.Token, "POST", tt.path, tt.body); code != 403 || strings.TrimSpace(body) != tt.want {
			t.Errorf("a Reporter's POST %s: %d %s, want 403 %s", tt.path, code, body, tt.want)
		}
	}
	code, body := callAs(t, s, maint.Token, "POST", mrs, map[string]any{"source_branch": "depsd/pins", "target_branch": "main", "title": "t"})
	if code != 201 || !strings.Contains(body, `"username":"maud"`) || !strings.Contains(body, `"can_merge":true`) {
		t.Fatalf("a Maintainer opens one: %d %s", code, body)
	}
	if code, body := callAs(t, s, maint.Token, "POST", mrs+"/1/notes", map[string]any{"body": "hi"}); code != 201 || !strings.Contains(body, `"username":"maud"`) {
		t.Fatalf("a Maintainer's note: %d %s", code, body)
	}
	if code, body := callAs(t, s, s.Token, "PUT", mrs+"/1/merge", nil); code != 401 {
		t.Fatalf("the server token (a Developer) merges into main: %d %s", code, body)
	}
	if code, body := callAs(t, s, maint.Token, "PUT", mrs+"/1/merge", nil); code != 200 || !strings.Contains(body, `"state":"merged"`) {
		t.Fatalf("a Maintainer merges: %d %s", code, body)
	}
}
