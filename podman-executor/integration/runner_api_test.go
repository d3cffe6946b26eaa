package integration

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeJobsAPI answers the runner-facing part of GitLab's REST API the way
// GitLab does (lib/api/ci/runner.rb and its helpers; the runner's side is
// network/gitlab.go of GitLab Runner):
//
//   - POST /api/v4/jobs/request: 403 for a wrong runner token, 201 with a
//     job payload (GitLab Runner's common.JobResponse) when a job is
//     queued, else 204;
//   - PATCH /api/v4/jobs/:id/trace: the JOB-TOKEN header and a
//     Content-Range "start-end" (400 without it); a start that is not
//     the stored log's length answers 416 with Range "0-<length>",
//     otherwise the bytes are appended and the answer is 202 with Range
//     "0-<length>", Job-Status and X-GitLab-Trace-Update-Interval;
//   - PUT /api/v4/jobs/:id: the job token in the body; state, exit_code,
//     failure_reason and output.bytesize recorded; 200;
//   - POST /api/v4/jobs/:id/artifacts: JOB-TOKEN, a multipart form with
//     the archive in "file"; stored; 201.
//
// A job that is not running (canceled, or finished) is refused as GitLab's
// authenticate_job! refuses it: 403 with its status in Job-Status, which
// is how a runner learns that a job was canceled.
type fakeJobsAPI struct {
	t     testing.TB
	url   string // what the runner (and helper commands) are given
	token string // the runner's authentication token

	mu    sync.Mutex
	queue []*fakeJob // not yet handed to a runner
	jobs  map[int64]*fakeJob
	odd   []string // requests the fake does not know
}

// lastJobID numbers the jobs of all fakes of a test run: a job's container
// name holds its ID, and the tests share one podman service.
var (
	lastJobID     atomic.Int64
	lastJobIDOnce sync.Once
)

func nextJobID() int64 {
	lastJobIDOnce.Do(func() { lastJobID.Store(int64(uniqueID(0)) * 1000) })
	return lastJobID.Add(1)
}

// randomHex is n random bytes in hex.
func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// fakeJob is one job as the fake GitLab sees it.
type fakeJob struct {
	payload jobPayload

	mu        sync.Mutex
	status    string // pending, running, success, failed, canceling, canceled
	trace     bytes.Buffer
	updates   []jobUpdate
	artifacts []artifactUpload
	started   chan struct{} // closed when a runner took the job
	done      chan struct{} // closed at the final state update
}

// jobUpdate is the body of a PUT /jobs/:id (GitLab Runner's
// common.UpdateJobRequest).
type jobUpdate struct {
	Token         string `json:"token"`
	State         string `json:"state"`
	FailureReason string `json:"failure_reason"`
	ExitCode      int    `json:"exit_code"`
	Output        struct {
		Checksum string `json:"checksum"`
		Bytesize int    `json:"bytesize"`
	} `json:"output"`
}

// artifactUpload is one POST /jobs/:id/artifacts.
type artifactUpload struct {
	query    map[string]string // artifact_format, artifact_type, expire_in
	filename string
	body     []byte
}

// files lists a zip artifact's files and their contents.
func (a artifactUpload) files() (map[string]string, error) {
	zr, err := zip.NewReader(bytes.NewReader(a.body), int64(len(a.body)))
	if err != nil {
		return nil, fmt.Errorf("artifact %s is not a zip archive: %w", a.filename, err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		out[f.Name] = string(b)
	}
	return out, nil
}

// The job payload: the fields of GitLab Runner's common.JobResponse that
// these tests set, under the same JSON names.
type (
	jobPayload struct {
		ID            int64            `json:"id"`
		Token         string           `json:"token"`
		AllowGitFetch bool             `json:"allow_git_fetch"`
		JobInfo       payloadJobInfo   `json:"job_info"`
		GitInfo       payloadGitInfo   `json:"git_info"`
		RunnerInfo    payloadRunner    `json:"runner_info"`
		Variables     []payloadVar     `json:"variables"`
		Steps         []payloadStep    `json:"steps"`
		Image         payloadImage     `json:"image"`
		Services      []payloadImage   `json:"services"`
		Artifacts     []payloadArtif   `json:"artifacts"`
		Cache         []payloadCache   `json:"cache"`
		Credentials   []any            `json:"credentials"`
		Dependencies  []any            `json:"dependencies"`
		Features      payloadFeatures  `json:"features"`
		Hooks         []map[string]any `json:"hooks,omitempty"`
	}
	payloadJobInfo struct {
		Name        string `json:"name"`
		Stage       string `json:"stage"`
		ProjectID   int64  `json:"project_id"`
		ProjectName string `json:"project_name"`
	}
	payloadGitInfo struct {
		RepoURL   string   `json:"repo_url"`
		Ref       string   `json:"ref"`
		Sha       string   `json:"sha"`
		BeforeSha string   `json:"before_sha"`
		RefType   string   `json:"ref_type"`
		Refspecs  []string `json:"refspecs"`
		Depth     int      `json:"depth"`
	}
	payloadRunner struct {
		Timeout int `json:"timeout"`
	}
	payloadVar struct {
		Key    string `json:"key"`
		Value  string `json:"value"`
		Public bool   `json:"public"`
		Masked bool   `json:"masked"`
	}
	payloadStep struct {
		Name         string   `json:"name"`
		Script       []string `json:"script"`
		Timeout      int      `json:"timeout"`
		When         string   `json:"when"`
		AllowFailure bool     `json:"allow_failure"`
	}
	payloadImage struct {
		Name       string   `json:"name"`
		Alias      string   `json:"alias,omitempty"`
		Command    []string `json:"command,omitempty"`
		Entrypoint []string `json:"entrypoint,omitempty"`
	}
	payloadArtif struct {
		Name      string   `json:"name"`
		Untracked bool     `json:"untracked"`
		Paths     []string `json:"paths"`
		When      string   `json:"when"`
		Type      string   `json:"artifact_type"`
		Format    string   `json:"artifact_format"`
		ExpireIn  string   `json:"expire_in"`
	}
	payloadCache struct {
		Key       string   `json:"key"`
		Untracked bool     `json:"untracked"`
		Policy    string   `json:"policy"`
		Paths     []string `json:"paths"`
		When      string   `json:"when"`
	}
	payloadFeatures struct {
		TraceSections  bool     `json:"trace_sections"`
		FailureReasons []string `json:"failure_reasons"`
	}
)

// startJobsAPI serves the fake on 127.0.0.1 for the test's lifetime.
func startJobsAPI(t testing.TB) *fakeJobsAPI { return startJobsAPIOn(t, "127.0.0.1") }

// startJobsAPIOn serves the fake on ip (a local address) for the test's
// lifetime.
func startJobsAPIOn(t testing.TB, ip string) *fakeJobsAPI {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	// The runner's short token (its name in the driver's container
	// names and cache directory) is the 9 characters after "glrt-".
	api := &fakeJobsAPI{t: t, url: "http://" + ln.Addr().String() + "/",
		token: "glrt-" + randomHex(t, 16), jobs: map[int64]*fakeJob{}}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		api.mu.Lock()
		defer api.mu.Unlock()
		if len(api.odd) > 0 {
			t.Errorf("the runner made requests the fake GitLab does not know: %v", api.odd)
		}
	})
	return api
}

// newJob returns a job of project projectID with GitLab's predefined
// variables, a script step and the busybox test image, not yet queued:
// the caller adjusts it, then calls enqueue.
func (api *fakeJobsAPI) newJob(projectID int64, script ...string) *fakeJob {
	id := nextJobID()
	token := "glcbt-" + randomHex(api.t, 16)
	host := strings.TrimSuffix(strings.TrimPrefix(api.url, "http://"), "/")
	path := fmt.Sprintf("group/project-%d", projectID)
	repo := fmt.Sprintf("http://gitlab-ci-token:%s@%s/%s.git", token, host, path)
	sha := fmt.Sprintf("%040x", id)
	vars := []payloadVar{
		{Key: "CI_JOB_ID", Value: strconv.FormatInt(id, 10), Public: true},
		{Key: "CI_JOB_TOKEN", Value: token, Masked: true},
		{Key: "CI_JOB_NAME", Value: "test", Public: true},
		{Key: "CI_JOB_STAGE", Value: "test", Public: true},
		{Key: "CI_PROJECT_ID", Value: strconv.FormatInt(projectID, 10), Public: true},
		{Key: "CI_PROJECT_PATH", Value: path, Public: true},
		{Key: "CI_PROJECT_NAME", Value: fmt.Sprintf("project-%d", projectID), Public: true},
		{Key: "CI_SERVER_URL", Value: strings.TrimSuffix(api.url, "/"), Public: true},
		{Key: "CI_REPOSITORY_URL", Value: repo},
		{Key: "CI_COMMIT_SHA", Value: sha, Public: true},
		{Key: "CI_COMMIT_REF_NAME", Value: "main", Public: true},
		{Key: "CI_PIPELINE_ID", Value: strconv.FormatInt(id, 10), Public: true},
		{Key: "GIT_STRATEGY", Value: "none", Public: true},
	}
	p := jobPayload{
		ID: id, Token: token, AllowGitFetch: true,
		JobInfo:    payloadJobInfo{Name: "test", Stage: "test", ProjectID: projectID, ProjectName: fmt.Sprintf("project-%d", projectID)},
		GitInfo:    payloadGitInfo{RepoURL: repo, Ref: "main", Sha: sha, BeforeSha: strings.Repeat("0", 40), RefType: "branch", Refspecs: []string{"+refs/heads/main:refs/remotes/origin/main"}, Depth: 20},
		RunnerInfo: payloadRunner{Timeout: 600},
		Variables:  vars,
		Steps:      []payloadStep{{Name: "script", Script: script, Timeout: 600, When: "on_success"}},
		Image:      payloadImage{Name: shared.image},
		Services:   []payloadImage{},
		Features: payloadFeatures{TraceSections: true,
			FailureReasons: []string{"unknown_failure", "script_failure", "api_failure", "stuck_or_timeout_failure",
				"runner_system_failure", "job_execution_timeout", "image_pull_failure"}},
	}
	return &fakeJob{payload: p, status: "pending", started: make(chan struct{}), done: make(chan struct{})}
}

// setVar sets (or adds) a public job variable.
func (j *fakeJob) setVar(key, value string) {
	for i := range j.payload.Variables {
		if j.payload.Variables[i].Key == key {
			j.payload.Variables[i].Value = value
			return
		}
	}
	j.payload.Variables = append(j.payload.Variables, payloadVar{Key: key, Value: value, Public: true})
}

// enqueue makes j the next job a runner gets.
func (api *fakeJobsAPI) enqueue(jobs ...*fakeJob) {
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, j := range jobs {
		api.queue = append(api.queue, j)
		api.jobs[j.payload.ID] = j
	}
}

// cancel cancels a running job as GitLab does. status "canceled": at once
// (GitLab before graceful cancel, or a runner without the
// cancel_gracefully feature): every later trace or update request of the
// runner is refused with Job-Status: canceled. status "canceling" (GitLab
// 17.x, runners announcing cancel_gracefully, as 17.9 does): the runner's
// requests are still accepted, with Job-Status: canceling, until its final
// update, after which the job is canceled.
func (j *fakeJob) cancel(status string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.status = status
}

// log is the job log received so far.
func (j *fakeJob) log() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.trace.String()
}

// final is the job's last state update and the whole log, once the runner
// reported the end.
func (j *fakeJob) final() (jobUpdate, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.updates) == 0 {
		return jobUpdate{}, j.trace.String()
	}
	return j.updates[len(j.updates)-1], j.trace.String()
}

// uploads are the artifacts the job uploaded.
func (j *fakeJob) uploads() []artifactUpload {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]artifactUpload(nil), j.artifacts...)
}

func (api *fakeJobsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/api/v4/jobs")
	if path == r.URL.Path {
		api.unknown(w, r)
		return
	}
	if path == "/request" && r.Method == http.MethodPost {
		api.request(w, r)
		return
	}
	idText, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		api.unknown(w, r)
		return
	}
	api.mu.Lock()
	j := api.jobs[id]
	api.mu.Unlock()
	if j == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Not found"})
		return
	}
	switch {
	case rest == "" && r.Method == http.MethodPut:
		j.update(w, r)
	case rest == "trace" && r.Method == http.MethodPatch:
		j.patchTrace(w, r)
	case rest == "artifacts" && r.Method == http.MethodPost:
		j.uploadArtifacts(w, r)
	default:
		api.unknown(w, r)
	}
}

func (api *fakeJobsAPI) unknown(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	api.odd = append(api.odd, r.Method+" "+r.URL.Path)
	api.mu.Unlock()
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "404 Not Found"})
}

func (api *fakeJobsAPI) request(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "token is missing"})
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(api.token)) != 1 {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "403 Forbidden"})
		return
	}
	api.mu.Lock()
	var j *fakeJob
	if len(api.queue) > 0 {
		j, api.queue = api.queue[0], api.queue[1:]
	}
	api.mu.Unlock()
	if j == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	j.mu.Lock()
	j.status = "running"
	j.mu.Unlock()
	close(j.started)
	writeJSON(w, http.StatusCreated, j.payload)
}

// authorized checks the job token and that the job runs, answering as
// GitLab's authenticate_job! when not; false when it answered.
func (j *fakeJob) authorized(w http.ResponseWriter, token string) bool {
	if subtle.ConstantTimeCompare([]byte(token), []byte(j.payload.Token)) != 1 {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "403 Forbidden"})
		return false
	}
	if j.status != "running" && j.status != "canceling" {
		w.Header().Set("Job-Status", j.status)
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "403 Forbidden  - Job is not running"})
		return false
	}
	return true
}

func (j *fakeJob) patchTrace(w http.ResponseWriter, r *http.Request) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.authorized(w, r.Header.Get("JOB-TOKEN")) {
		return
	}
	cr := r.Header.Get("Content-Range")
	if cr == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "400 Missing header Content-Range"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": err.Error()})
		return
	}
	startText, _, _ := strings.Cut(cr, "-")
	start, err := strconv.Atoi(startText)
	if err != nil || start != j.trace.Len() {
		w.Header().Set("Range", fmt.Sprintf("0-%d", j.trace.Len()))
		writeJSON(w, http.StatusRequestedRangeNotSatisfiable, map[string]string{"message": "416 Range Not Satisfiable"})
		return
	}
	j.trace.Write(body)
	w.Header().Set("Job-Status", j.status)
	w.Header().Set("Range", fmt.Sprintf("0-%d", j.trace.Len()))
	// GitLab's interval while someone watches the log (30 s otherwise).
	w.Header().Set("X-GitLab-Trace-Update-Interval", "3")
	w.WriteHeader(http.StatusAccepted)
}

func (j *fakeJob) update(w http.ResponseWriter, r *http.Request) {
	var u jobUpdate
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&u); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.authorized(w, u.Token) {
		return
	}
	u.Token = ""
	j.updates = append(j.updates, u)
	switch {
	case j.status == "canceling" && (u.State == "success" || u.State == "failed"):
		w.Header().Set("Job-Status", j.status)
		j.status = "canceled"
		close(j.done)
	case u.State == "success" || u.State == "failed":
		j.status = u.State
		close(j.done)
	}
	w.Header().Set("X-GitLab-Trace-Update-Interval", "3")
	writeJSON(w, http.StatusOK, "200")
}

func (j *fakeJob) uploadArtifacts(w http.ResponseWriter, r *http.Request) {
	j.mu.Lock()
	ok := j.authorized(w, r.Header.Get("JOB-TOKEN"))
	j.mu.Unlock()
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<20)
	f, hdr, err := r.FormFile("file")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "file is missing"})
		return
	}
	defer f.Close()
	body, err := io.ReadAll(f)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	q := map[string]string{}
	for k := range r.URL.Query() {
		q[k] = r.URL.Query().Get(k)
	}
	j.mu.Lock()
	j.artifacts = append(j.artifacts, artifactUpload{query: q, filename: hdr.Filename, body: body})
	j.mu.Unlock()
	writeJSON(w, http.StatusCreated, "201")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
