package gitlabtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runnerCall sends one request of the runner-facing API and returns the
// answer's status, headers and body.
func runnerCall(t *testing.T, s *Server, method, path string, hdr map[string]string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.APIURL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createAPIPipeline creates a pipeline through the REST API, as depsd does.
func createAPIPipeline(t *testing.T, s *Server, project string) int64 {
	t.Helper()
	return createPipelineWithVars(t, s, project, nil)
}

const twoStageCI = `stages: [build, push]
image: localhost/job:latest
build:
  stage: build
  script: [echo building $CI_PROJECT_PATH]
push:
  stage: push
  script: [echo pushing]
`

// TestJobsAPIAsTheRunnerSeesIt walks a two-stage pipeline through the
// jobs API with the requests GitLab Runner sends, and checks GitLab's
// answers: the runner token, the job payload, the trace's ranges, the
// update that ends a job, and the pipeline's status and webhooks following
// the jobs.
func TestJobsAPIAsTheRunnerSeesIt(t *testing.T) {
	s := New(Options{Pipelines: Behavior{Jobs: true}, JobsLongPoll: 50 * time.Millisecond})
	defer s.Close()
	if _, err := s.AddProject(Project{Path: "g/base", Files: map[string]string{".gitlab-ci.yml": twoStageCI, "Containerfile": "FROM scratch\n"}}); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	if _, err := s.AddHook("g/base", Hook{URL: rc.URL, Events: []string{"pipeline_events"}}); err != nil {
		t.Fatal(err)
	}

	if code, _, _ := runnerCall(t, s, "POST", "/jobs/request", nil, jsonBody(t, map[string]string{"token": "glrt-wrong"})); code != http.StatusForbidden {
		t.Errorf("unknown runner token: got %d, want 403", code)
	}
	if code, hdr, _ := runnerCall(t, s, "POST", "/jobs/request", nil, jsonBody(t, map[string]string{"token": DefaultRunnerToken})); code != http.StatusNoContent || hdr.Get("X-GitLab-Last-Update") == "" {
		t.Errorf("no job: got %d (X-GitLab-Last-Update %q), want 204 with the header", code, hdr.Get("X-GitLab-Last-Update"))
	}

	plID := createAPIPipeline(t, s, "g/base")
	if st := s.Pipelines("g/base")[0].Status; st != "pending" {
		t.Errorf("pipeline with queued jobs: status %q, want pending", st)
	}

	take := func() jobResponseJSON {
		t.Helper()
		code, _, body := runnerCall(t, s, "POST", "/jobs/request", nil, jsonBody(t, map[string]string{"token": DefaultRunnerToken}))
		if code != http.StatusCreated {
			t.Fatalf("request job: got %d %s, want 201", code, body)
		}
		var j jobResponseJSON
		if err := json.Unmarshal(body, &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	build := take()
	vars := map[string]string{}
	for _, v := range build.Variables {
		vars[v.Key] = v.Value
	}
	pl := s.Pipelines("g/base")[0]
	for k, want := range map[string]string{
		"CI_PROJECT_PATH": "g/base", "CI_PIPELINE_SOURCE": "api", "CI_COMMIT_SHA": pl.SHA, "CI_JOB_TOKEN": build.Token,
		"CI_REGISTRY_IMAGE": DefaultRegistryHost + "/g/base", "CI_JOB_NAME": "build", "CI_SERVER_URL": s.URL,
	} {
		if vars[k] != want {
			t.Errorf("job variable %s = %q, want %q", k, vars[k], want)
		}
	}
	if build.JobInfo.Name != "build" || build.Image.Name != "localhost/job:latest" || len(build.Steps) != 1 || build.Steps[0].Script[0] != "echo building $CI_PROJECT_PATH" {
		t.Errorf("job payload: %+v", build)
	}
	if pl.Status != "running" {
		t.Errorf("pipeline with a running job: status %q, want running", pl.Status)
	}
	if code, _, _ := runnerCall(t, s, "POST", "/jobs/request", nil, jsonBody(t, map[string]string{"token": DefaultRunnerToken})); code != http.StatusNoContent {
		t.Errorf("the next stage waits for the first: got %d, want 204", code)
	}

	jobTok := map[string]string{"JOB-TOKEN": build.Token, "Content-Range": "0-5"}
	if code, hdr, _ := runnerCall(t, s, "PATCH", "/jobs/"+jobPath(build.ID)+"/trace", jobTok, []byte("hello\n")); code != http.StatusAccepted || hdr.Get("Range") != "0-6" || hdr.Get("Job-Status") != "running" {
		t.Errorf("trace: got %d Range %q Job-Status %q, want 202 0-6 running", code, hdr.Get("Range"), hdr.Get("Job-Status"))
	}
	jobTok["Content-Range"] = "3-5"
	if code, hdr, _ := runnerCall(t, s, "PATCH", "/jobs/"+jobPath(build.ID)+"/trace", jobTok, []byte("xyz")); code != http.StatusRequestedRangeNotSatisfiable || hdr.Get("Range") != "0-6" {
		t.Errorf("trace at the wrong offset: got %d Range %q, want 416 0-6", code, hdr.Get("Range"))
	}
	if code, _, _ := runnerCall(t, s, "PATCH", "/jobs/"+jobPath(build.ID)+"/trace", map[string]string{"JOB-TOKEN": "nope", "Content-Range": "6-6"}, []byte("x")); code != http.StatusForbidden {
		t.Errorf("trace with a wrong job token: got %d, want 403", code)
	}
	if code, _, _ := runnerCall(t, s, "PUT", "/jobs/"+jobPath(build.ID), nil, jsonBody(t, map[string]any{"token": build.Token, "state": "success"})); code != http.StatusOK {
		t.Errorf("job success: got %d, want 200", code)
	}
	if code, _, _ := runnerCall(t, s, "PUT", "/jobs/"+jobPath(build.ID), nil, jsonBody(t, map[string]any{"token": build.Token, "state": "success"})); code != http.StatusForbidden {
		t.Errorf("update of a finished job: got %d, want 403", code)
	}

	push := take()
	if push.JobInfo.Name != "push" {
		t.Fatalf("second job: %q, want push", push.JobInfo.Name)
	}
	if code, _, _ := runnerCall(t, s, "PUT", "/jobs/"+jobPath(push.ID), nil, jsonBody(t, map[string]any{"token": push.Token, "state": "failed", "failure_reason": "script_failure", "exit_code": 3})); code != http.StatusOK {
		t.Errorf("job failed: got %d, want 200", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := s.WaitPipeline(ctx, plID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "failed" {
		t.Errorf("pipeline whose last job failed: %q, want failed", got.Status)
	}
	jobs := s.Jobs(plID)
	if jobs[0].Trace != "hello\n" || jobs[1].ExitCode != 3 || jobs[1].FailureReason != "script_failure" {
		t.Errorf("jobs as stored: %+v", jobs)
	}
	if err := s.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var statuses []string
	var last []string
	for range 3 {
		ev := pipelineEvent(t, rc.next(t))
		statuses = append(statuses, ev.ObjectAttributes.Status)
		last = last[:0]
		for _, b := range ev.Builds {
			last = append(last, b.Name+":"+b.Status)
		}
	}
	if got, want := strings.Join(last, " "), "build:success push:failed"; got != want {
		t.Errorf("the last hook's builds: %q, want %q", got, want)
	}
	rc.none(t)
	if got, want := strings.Join(statuses, " "), "pending running failed"; got != want {
		t.Errorf("pipeline hooks: %q, want %q", got, want)
	}
}

// TestJobsPipelineWithoutCIConfigFails: GitLab fails a pipeline whose
// configuration it cannot run, with yaml_errors.
func TestJobsPipelineWithoutCIConfigFails(t *testing.T) {
	s := New(Options{Pipelines: Behavior{Jobs: true}})
	defer s.Close()
	if _, err := s.AddProject(Project{Path: "g/base", Files: map[string]string{"Containerfile": "FROM scratch\n"}}); err != nil {
		t.Fatal(err)
	}
	id := createAPIPipeline(t, s, "g/base")
	_, body := get(t, s, "/projects/g%2Fbase/pipelines/"+strconv.FormatInt(id, 10), map[string]string{"PRIVATE-TOKEN": s.Token})
	if !strings.Contains(body, `"status":"failed"`) || !strings.Contains(body, `"yaml_errors":"Missing .gitlab-ci.yml file"`) {
		t.Errorf("pipeline without .gitlab-ci.yml: %s", body)
	}
}

func jobPath(id int64) string { return strconv.FormatInt(id, 10) }

// createPipelineWithVars creates a pipeline with variables through the
// REST API, as depsd does.
func createPipelineWithVars(t *testing.T, s *Server, project string, vars map[string]string) int64 {
	t.Helper()
	body := map[string]any{"ref": "main"}
	var list []map[string]string
	for k, v := range vars {
		list = append(list, map[string]string{"key": k, "value": v})
	}
	if list != nil {
		body["variables"] = list
	}
	code, _, b := apiCall(t, s, "POST", "/projects/"+url.PathEscape(project)+"/pipeline", jsonBody(t, body))
	var pl struct{ ID int64 }
	if err := json.Unmarshal(b, &pl); err != nil || code != http.StatusCreated {
		t.Fatalf("create pipeline: %d %s", code, b)
	}
	return pl.ID
}

func apiCall(t *testing.T, s *Server, method, path string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	return runnerCall(t, s, method, path, map[string]string{"PRIVATE-TOKEN": s.Token, "Content-Type": "application/json"}, body)
}

// A job of a tag pipeline and of a merge request pipeline gets what GitLab
// gives it: CI_COMMIT_TAG (and no CI_COMMIT_BRANCH) with the tag's refspec
// and ref_type tag; the merge request's variables, CI_COMMIT_REF_NAME the
// source branch and only the pipeline's persistent ref. The clone has
// the tag.
func TestJobsOnTagAndMergeRequestPipelines(t *testing.T) {
	s := New(Options{JobsLongPoll: 50 * time.Millisecond})
	defer s.Close()
	if _, err := s.AddProject(Project{Path: "g/base", Files: map[string]string{".gitlab-ci.yml": twoStageCI}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPipelineBehavior("g/base", Behavior{Jobs: true, OnTag: true, OnMergeRequest: true}); err != nil {
		t.Fatal(err)
	}
	take := func() (jobResponseJSON, map[string]string) {
		t.Helper()
		code, _, body := runnerCall(t, s, "POST", "/jobs/request", nil, jsonBody(t, map[string]string{"token": DefaultRunnerToken}))
		if code != http.StatusCreated {
			t.Fatalf("request job: got %d %s, want 201", code, body)
		}
		var j jobResponseJSON
		if err := json.Unmarshal(body, &j); err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{}
		for _, v := range j.Variables {
			vars[v.Key] = v.Value
		}
		return j, vars
	}
	if err := s.CreateTag("g/base", "v1.2.0", "main"); err != nil {
		t.Fatal(err)
	}
	j, vars := take()
	pl := s.Pipelines("g/base")[0]
	if _, ok := vars["CI_COMMIT_BRANCH"]; ok || vars["CI_COMMIT_TAG"] != "v1.2.0" || vars["CI_COMMIT_REF_NAME"] != "v1.2.0" ||
		j.GitInfo.RefType != "tag" || j.GitInfo.Ref != "v1.2.0" ||
		strings.Join(j.GitInfo.Refspecs, " ") != "+refs/pipelines/"+strconv.FormatInt(pl.ID, 10)+":refs/pipelines/"+strconv.FormatInt(pl.ID, 10)+" +refs/tags/v1.2.0:refs/tags/v1.2.0" {
		t.Fatalf("tag job: %+v %v", j.GitInfo, vars)
	}
	info, _ := s.Project("g/base")
	out, err := exec.Command("git", "--git-dir", s.gitRepoDir(&project{path: info.Path}), "rev-parse", "refs/tags/v1.2.0").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != j.GitInfo.Sha {
		t.Fatalf("refs/tags/v1.2.0 in the clone: %s %v, want %s", out, err, j.GitInfo.Sha)
	}

	if err := s.CreateBranch("g/base", "feature"); err != nil {
		t.Fatal(err)
	}
	code, body := apiJSON(t, s, "POST", "/projects/"+pathID("g/base")+"/merge_requests", map[string]any{"source_branch": "feature", "target_branch": "main", "title": "t"})
	if code != 201 {
		t.Fatalf("create MR: %d %v", code, body)
	}
	j, vars = take()
	pls := s.Pipelines("g/base")
	mrp := pls[len(pls)-1]
	id := strconv.FormatInt(mrp.ID, 10)
	if _, ok := vars["CI_COMMIT_BRANCH"]; ok || vars["CI_MERGE_REQUEST_IID"] != "1" || vars["CI_MERGE_REQUEST_SOURCE_BRANCH_NAME"] != "feature" ||
		vars["CI_MERGE_REQUEST_TARGET_BRANCH_NAME"] != "main" || vars["CI_COMMIT_REF_NAME"] != "feature" || vars["CI_PIPELINE_SOURCE"] != "merge_request_event" ||
		j.GitInfo.Ref != "refs/merge-requests/1/head" || strings.Join(j.GitInfo.Refspecs, " ") != "+refs/pipelines/"+id+":refs/pipelines/"+id {
		t.Fatalf("merge request job: %+v %v", j.GitInfo, vars)
	}
}

// A job knows whether its ref is protected (CI_COMMIT_REF_PROTECTED) and,
// in a pipeline of a branch with open merge requests or of one of them,
// which (CI_OPEN_MERGE_REQUESTS: up to four, path!iid), as GitLab's
// predefined variables say.
func TestJobsProtectedRefAndOpenMergeRequests(t *testing.T) {
	s := New(Options{JobsLongPoll: 50 * time.Millisecond})
	defer s.Close()
	if _, err := s.AddProject(Project{Path: "g/base", Files: map[string]string{".gitlab-ci.yml": "build:\n  script: echo\n"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPipelineBehavior("g/base", Behavior{Jobs: true, OnMergeRequest: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBranch("g/base", "feature"); err != nil {
		t.Fatal(err)
	}
	vars := func(ref string) map[string]string {
		t.Helper()
		if _, err := s.RunPipeline("g/base", ref, "push"); err != nil {
			t.Fatal(err)
		}
		_, v := takeJob(t, s)
		return v
	}
	if v := vars("main"); v["CI_COMMIT_REF_PROTECTED"] != "true" || v["CI_OPEN_MERGE_REQUESTS"] != "" {
		t.Errorf("default branch: protected %q, open MRs %q; want true and none", v["CI_COMMIT_REF_PROTECTED"], v["CI_OPEN_MERGE_REQUESTS"])
	}
	if v, ok := vars("feature")["CI_OPEN_MERGE_REQUESTS"]; ok {
		t.Errorf("a branch without a merge request: CI_OPEN_MERGE_REQUESTS %q, want none", v)
	}
	code, body := apiJSON(t, s, "POST", "/projects/"+pathID("g/base")+"/merge_requests", map[string]any{"source_branch": "feature", "target_branch": "main", "title": "t"})
	if code != 201 {
		t.Fatalf("create MR: %d %v", code, body)
	}
	_, mr := takeJob(t, s) // its merge request pipeline
	if mr["CI_OPEN_MERGE_REQUESTS"] != "g/base!1" || mr["CI_MERGE_REQUEST_IID"] != "1" {
		t.Errorf("merge request pipeline: CI_OPEN_MERGE_REQUESTS %q, want g/base!1", mr["CI_OPEN_MERGE_REQUESTS"])
	}
	if v := vars("feature"); v["CI_OPEN_MERGE_REQUESTS"] != "g/base!1" || v["CI_COMMIT_REF_PROTECTED"] != "false" {
		t.Errorf("branch with an open merge request: open MRs %q, protected %q; want g/base!1 and false", v["CI_OPEN_MERGE_REQUESTS"], v["CI_COMMIT_REF_PROTECTED"])
	}
	if err := s.CloseMR("g/base", 1); err != nil {
		t.Fatal(err)
	}
	if v, ok := vars("feature")["CI_OPEN_MERGE_REQUESTS"]; ok {
		t.Errorf("after the merge request was closed: CI_OPEN_MERGE_REQUESTS %q, want none", v)
	}
}
