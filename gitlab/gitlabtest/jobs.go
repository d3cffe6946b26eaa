package gitlabtest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pipelines of a project whose Behavior has Jobs are made of real jobs:
// the jobs of the .gitlab-ci.yml of the pipeline's commit (the subset
// parseCIConfig reads), handed to real GitLab Runners through GitLab's
// runner-facing jobs API (POST /jobs/request, PATCH /jobs/:id/trace, PUT
// /jobs/:id), with the request and answer shapes of GitLab Runner's
// common/network.go. The pipeline's status follows its jobs (pending,
// running, success, failed, canceled) and posts the same webhooks as a
// simulated pipeline. Stages run in order; a failed job skips the stages
// after it.

// DefaultRunnerToken is the runner authentication token the server accepts
// when Options.RunnerToken is empty (GitLab's glrt- prefix).
const DefaultRunnerToken = "glrt-gitlabtest-runner-0123456789"

// DefaultJobsLongPoll is how long POST /jobs/request waits for a job
// before answering 204 when Options.JobsLongPoll is zero: GitLab
// Workhorse holds a runner's request in the same way (50 s there), so a
// runner starts a new job at once instead of at its next poll.
const DefaultJobsLongPoll = 5 * time.Second

// job is one job of a pipeline.
type job struct {
	id, pipelineID, projectID int64
	spec                      ciJob
	status                    string // created, pending, running, success, failed, canceled, skipped
	token                     string
	trace                     []byte
	exitCode                  int
	failureReason             string
	createdAt                 time.Time
	startedAt                 time.Time
	finishedAt                time.Time
}

// Job is a job as the fake stores it, for assertions.
type Job struct {
	ID, PipelineID int64
	Name, Stage    string
	Status         string
	// ExitCode is the script's exit code the runner reported (0 unless
	// it failed).
	ExitCode      int
	FailureReason string
	Trace         string
}

func (j *job) export() Job {
	return Job{ID: j.id, PipelineID: j.pipelineID, Name: j.spec.Name, Stage: j.spec.Stage, Status: j.status,
		ExitCode: j.exitCode, FailureReason: j.failureReason, Trace: string(j.trace)}
}

// Jobs returns the jobs of a pipeline in stage order.
func (s *Server) Jobs(pipelineID int64) []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Job
	for _, j := range s.jobsOf(pipelineID) {
		out = append(out, j.export())
	}
	return out
}

// jobsOf returns pl's jobs in stage order. Callers hold s.mu.
func (s *Server) jobsOf(pipelineID int64) []*job {
	pl, ok := s.inst.pipelines[pipelineID]
	if !ok {
		return nil
	}
	out := make([]*job, 0, len(pl.jobs))
	for _, id := range pl.jobs {
		out = append(out, s.jobs[id])
	}
	return out
}

// jobByToken finds a job by its CI_JOB_TOKEN. Callers hold s.mu.
func (s *Server) jobByToken(token string) (*job, bool) {
	for _, j := range s.jobs {
		if subtle.ConstantTimeCompare([]byte(j.token), []byte(token)) == 1 {
			return j, true
		}
	}
	return nil, false
}

// startJobs creates pl's jobs from its commit's CI configuration and
// queues the first stage. A configuration the fake cannot run fails the
// pipeline, as GitLab fails a push pipeline with yaml_errors. Callers
// hold s.mu.
func (s *Server) startJobs(p *project, pl *pipeline) {
	root, err := s.ciRootAt(s.ciContextOf(p, pl), pl.inputs)
	var cfg ciConfig
	if err == nil {
		cfg, err = parseCIRoot(root)
	}
	if err != nil {
		pl.yamlErrors = err.Error()
		s.setStatus(pl, "failed")
		return
	}
	now := s.now()
	for _, spec := range cfg.Jobs {
		s.nextJob++
		j := &job{id: s.nextJob, pipelineID: pl.id, projectID: p.id, spec: spec, status: "created",
			token: newJobToken(), createdAt: now}
		s.jobs[j.id] = j
		pl.jobs = append(pl.jobs, j.id)
	}
	s.advanceJobs(pl)
}

func newJobToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "glcbt-" + hex.EncodeToString(b[:])
}

// advanceJobs queues the next stage when the current one succeeded, skips
// what is left after a failure, and sets the pipeline's status from its
// jobs. Callers hold s.mu.
func (s *Server) advanceJobs(pl *pipeline) {
	jobs := s.jobsOf(pl.id)
	failed, canceled, active := false, false, false
	for _, j := range jobs {
		switch j.status {
		case "failed":
			failed = true
		case "canceled":
			canceled = true
		case "pending", "running":
			active = true
		}
	}
	if !active {
		// The first stage with jobs still to run starts, unless something failed.
		for _, j := range jobs {
			if j.status != "created" {
				continue
			}
			if failed || canceled {
				j.status = "skipped"
				continue
			}
			stage := j.spec.Stage
			for _, k := range jobs {
				if k.status == "created" && k.spec.Stage == stage {
					k.status = "pending"
					active = true
				}
			}
			break
		}
	}
	status := "success"
	switch {
	case slices.ContainsFunc(jobs, func(j *job) bool { return j.status == "running" }):
		status = "running"
	case active && pl.startedAt.IsZero():
		status = "pending"
	case active:
		status = "running" // between two stages
	case failed:
		status = "failed"
	case canceled:
		status = "canceled"
	}
	if pl.status != status {
		s.setStatus(pl, status)
	} else {
		s.notify()
	}
}

// CancelPipeline cancels a pipeline as GitLab's "Cancel" does: jobs not
// started are canceled at once, running ones are told at their runner's
// next trace or status update (Job-Status: canceled), and the pipeline
// ends canceled. A simulated pipeline simply ends canceled.
func (s *Server) CancelPipeline(pipelineID int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.inst.pipelines[pipelineID]
	if !ok {
		return fmt.Errorf("cancel pipeline %d: not found", pipelineID)
	}
	if finished(pl.status) {
		return nil
	}
	s.cancelLocked(pl)
	return nil
}

// cancelLocked cancels pl, which has not finished. Callers hold s.mu.
func (s *Server) cancelLocked(pl *pipeline) {
	s.stopRun(pl)
	now := s.now()
	for _, j := range s.jobsOf(pl.id) {
		if !finished(j.status) {
			j.status, j.finishedAt = "canceled", now
		}
	}
	s.setStatus(pl, "canceled")
}

// jobVariable is one entry of a job payload's variables (common.JobVariable).
type jobVariable struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Public bool   `json:"public"`
	Masked bool   `json:"masked"`
	File   bool   `json:"file"`
	Raw    bool   `json:"raw"`
}

type jobImageJSON struct {
	Name       string   `json:"name"`
	Alias      string   `json:"alias,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Command    []string `json:"command,omitempty"`
}

type jobStepJSON struct {
	Name         string   `json:"name"`
	Script       []string `json:"script"`
	Timeout      int      `json:"timeout"`
	When         string   `json:"when"`
	AllowFailure bool     `json:"allow_failure"`
}

// jobResponseJSON is the job payload of POST /jobs/request (GitLab
// Runner's common.JobResponse; fields the fake never sets are left out or
// empty as GitLab sends them for a job without them).
type jobResponseJSON struct {
	ID            int64  `json:"id"`
	Token         string `json:"token"`
	AllowGitFetch bool   `json:"allow_git_fetch"`
	JobInfo       struct {
		Name        string `json:"name"`
		Stage       string `json:"stage"`
		ProjectID   int64  `json:"project_id"`
		ProjectName string `json:"project_name"`
	} `json:"job_info"`
	GitInfo struct {
		RepoURL   string   `json:"repo_url"`
		Ref       string   `json:"ref"`
		Sha       string   `json:"sha"`
		BeforeSha string   `json:"before_sha"`
		RefType   string   `json:"ref_type"`
		Refspecs  []string `json:"refspecs"`
		Depth     int      `json:"depth"`
	} `json:"git_info"`
	RunnerInfo struct {
		Timeout int `json:"timeout"`
	} `json:"runner_info"`
	Variables    []jobVariable  `json:"variables"`
	Steps        []jobStepJSON  `json:"steps"`
	Image        jobImageJSON   `json:"image"`
	Services     []jobImageJSON `json:"services"`
	Artifacts    []struct{}     `json:"artifacts"`
	Cache        []struct{}     `json:"cache"`
	Credentials  []struct{}     `json:"credentials"`
	Dependencies []struct{}     `json:"dependencies"`
	Features     struct {
		TraceSections  bool     `json:"trace_sections"`
		FailureReasons []string `json:"failure_reasons"`
	} `json:"features"`
}

// jobTimeout is the job timeout GitLab gives by default (1 hour).
const jobTimeout = 3600

// jobPayload renders the job a runner receives. Callers hold s.mu.
func (s *Server) jobPayload(p *project, pl *pipeline, j *job, gitSHA string) jobResponseJSON {
	var out jobResponseJSON
	out.ID, out.Token, out.AllowGitFetch = j.id, j.token, true
	out.JobInfo.Name, out.JobInfo.Stage = j.spec.Name, j.spec.Stage
	out.JobInfo.ProjectID, out.JobInfo.ProjectName = p.id, p.name()
	u, _ := url.Parse(s.URL)
	repo := *u
	repo.User = url.UserPassword("gitlab-ci-token", j.token)
	repo.Path = "/" + p.path + ".git"
	out.GitInfo.RepoURL = repo.String()
	out.GitInfo.Ref, out.GitInfo.Sha, out.GitInfo.BeforeSha = pl.ref, gitSHA, zeroSHA
	out.GitInfo.RefType = "branch"
	// Ci::BuildRunnerPresenter#refspecs: the persistent ref, and the
	// branch's or the tag's (none for a merge request pipeline).
	pipelineRef := "refs/pipelines/" + strconv.FormatInt(pl.id, 10)
	out.GitInfo.Refspecs = []string{"+" + pipelineRef + ":" + pipelineRef}
	switch {
	case pl.tag:
		out.GitInfo.RefType = "tag"
		out.GitInfo.Refspecs = append(out.GitInfo.Refspecs, "+refs/tags/"+pl.ref+":refs/tags/"+pl.ref)
	case pl.mrIID == 0:
		out.GitInfo.Refspecs = append(out.GitInfo.Refspecs, "+refs/heads/"+pl.ref+":refs/remotes/origin/"+pl.ref)
	}
	out.GitInfo.Depth = 20
	out.RunnerInfo.Timeout = jobTimeout
	out.Variables = s.jobVariables(p, pl, j)
	out.Steps = []jobStepJSON{{Name: "script", Script: append(slices.Clone(j.spec.BeforeScript), j.spec.Script...), Timeout: jobTimeout, When: "on_success"}}
	if len(j.spec.AfterScript) > 0 {
		out.Steps = append(out.Steps, jobStepJSON{Name: "after_script", Script: j.spec.AfterScript, Timeout: jobTimeout, When: "always"})
	}
	out.Image = jobImageJSON{Name: j.spec.Image.Name, Entrypoint: j.spec.Image.Entrypoint}
	out.Services = []jobImageJSON{}
	for _, svc := range j.spec.Services {
		out.Services = append(out.Services, jobImageJSON(svc))
	}
	out.Artifacts, out.Cache, out.Credentials, out.Dependencies = []struct{}{}, []struct{}{}, []struct{}{}, []struct{}{}
	out.Features.TraceSections = true
	out.Features.FailureReasons = []string{"unknown_failure", "script_failure", "runner_system_failure", "job_execution_timeout", "image_pull_failure"}
	return out
}

// jobVariables are the predefined variables GitLab gives a job (the ones
// a build uses: CI_COMMIT_REF_PROTECTED, and CI_OPEN_MERGE_REQUESTS in a
// pipeline of a branch with open merge requests or of one of them), then the pipeline's variables, then the job's own from
// .gitlab-ci.yml. Callers hold s.mu.
func (s *Server) jobVariables(p *project, pl *pipeline, j *job) []jobVariable {
	u, _ := url.Parse(s.URL)
	registry := s.registryHost
	image := registry + "/" + strings.ToLower(p.path)
	pub := func(k, v string) jobVariable { return jobVariable{Key: k, Value: v, Public: true} }
	vars := []jobVariable{
		pub("CI", "true"),
		pub("GITLAB_CI", "true"),
		pub("CI_SERVER_URL", s.URL),
		pub("CI_SERVER_FQDN", u.Host),
		pub("CI_SERVER_HOST", u.Hostname()),
		pub("CI_SERVER_PORT", u.Port()),
		pub("CI_SERVER_PROTOCOL", u.Scheme),
		pub("CI_SERVER_VERSION", s.version),
		pub("CI_API_V4_URL", s.URL+"/api/v4"),
		pub("CI_JOB_ID", strconv.FormatInt(j.id, 10)),
		pub("CI_JOB_NAME", j.spec.Name),
		pub("CI_JOB_STAGE", j.spec.Stage),
		pub("CI_JOB_URL", s.URL+"/"+p.path+"/-/jobs/"+strconv.FormatInt(j.id, 10)),
		{Key: "CI_JOB_TOKEN", Value: j.token, Masked: true},
		pub("CI_PIPELINE_ID", strconv.FormatInt(pl.id, 10)),
		pub("CI_PIPELINE_IID", strconv.FormatInt(pl.iid, 10)),
		pub("CI_PIPELINE_SOURCE", pl.source),
		pub("CI_PIPELINE_URL", s.URL+"/"+p.path+"/-/pipelines/"+strconv.FormatInt(pl.id, 10)),
		pub("CI_PROJECT_ID", strconv.FormatInt(p.id, 10)),
		pub("CI_PROJECT_NAME", p.name()),
		pub("CI_PROJECT_PATH", p.path),
		pub("CI_PROJECT_PATH_SLUG", slug(p.path)),
		pub("CI_PROJECT_NAMESPACE", p.namespace()),
		pub("CI_PROJECT_URL", s.URL+"/"+p.path),
		pub("CI_DEFAULT_BRANCH", p.defaultBranch),
		pub("CI_COMMIT_SHA", pl.sha),
		pub("CI_COMMIT_SHORT_SHA", pl.sha[:8]),
		pub("CI_COMMIT_BEFORE_SHA", pl.beforeSHA),
		pub("CI_COMMIT_REF_NAME", s.sourceRef(p, pl)),
		pub("CI_COMMIT_REF_SLUG", slug(s.sourceRef(p, pl))),
		pub("CI_REGISTRY", registry),
		pub("CI_REGISTRY_IMAGE", image),
		pub("CI_REGISTRY_USER", "gitlab-ci-token"),
		{Key: "CI_REGISTRY_PASSWORD", Value: j.token, Masked: true},
	}
	protected := !pl.tag && p.isProtected(s.sourceRef(p, pl))
	vars = append(vars, pub("CI_COMMIT_REF_PROTECTED", strconv.FormatBool(protected)))
	if !pl.tag {
		var open []string
		for _, mr := range p.mrs {
			if mr.state == mrOpened && mr.source == s.sourceRef(p, pl) && len(open) < 4 {
				open = append(open, p.path+"!"+strconv.FormatInt(mr.iid, 10))
			}
		}
		if len(open) > 0 {
			vars = append(vars, pub("CI_OPEN_MERGE_REQUESTS", strings.Join(open, ",")))
		}
	}
	switch mr := p.mr(pl.mrIID); {
	case pl.tag:
		vars = append(vars, pub("CI_COMMIT_TAG", pl.ref))
	case mr != nil:
		vars = append(vars,
			pub("CI_MERGE_REQUEST_IID", strconv.FormatInt(mr.iid, 10)),
			pub("CI_MERGE_REQUEST_TITLE", mr.title),
			pub("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", mr.source),
			pub("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", mr.target),
			pub("CI_MERGE_REQUEST_PROJECT_PATH", p.path),
			pub("CI_MERGE_REQUEST_EVENT_TYPE", "detached"))
	default:
		vars = append(vars, pub("CI_COMMIT_BRANCH", pl.ref))
	}
	for _, v := range pl.vars {
		vars = append(vars, jobVariable{Key: v.Key, Value: v.Value, File: v.VariableType == "file"})
	}
	for _, kv := range j.spec.Variables {
		vars = append(vars, pub(kv[0], kv[1]))
	}
	return vars
}

// slug is GitLab's *_SLUG: lower case, anything but a-z and 0-9 replaced
// by "-", at most 63 bytes, no leading or trailing "-".
func slug(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "-")
}

// jobRequestJSON is the body of POST /jobs/request (common.JobRequest).
type jobRequestJSON struct {
	Token string `json:"token"`
}

// requestJob answers POST /jobs/request: 201 with the oldest pending job,
// or 204 once none came within the long poll; 403 for an unknown runner
// token.
func (s *Server) requestJob(w http.ResponseWriter, r *http.Request) {
	var req jobRequestJSON
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		badRequest(w, "token is missing")
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.runnerToken)) != 1 {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.jobsLongPoll)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close ends a long poll at once
	defer stop()
	var payload jobResponseJSON
	var failure error
	found := false
	_ = s.waitFor(ctx, func() bool {
		j := s.nextPendingJob()
		if j == nil {
			return false
		}
		pl := s.inst.pipelines[j.pipelineID]
		p := s.inst.projects[j.projectID]
		ref := "refs/heads/" + pl.ref
		if pl.tag {
			ref = "refs/tags/" + pl.ref
		} else if pl.mrIID != 0 {
			ref = pl.ref // refs/merge-requests/<iid>/head
		}
		gitSHA, err := s.writeCommit(p, p.commits[pl.sha], ref, pl.id)
		if err != nil {
			failure = err
			return true
		}
		now := s.now()
		j.status, j.startedAt = "running", now
		payload, found = s.jobPayload(p, pl, j, gitSHA), true
		s.advanceJobs(pl)
		return true
	})
	switch {
	case failure != nil:
		writeMessage(w, http.StatusInternalServerError, "500 Internal Server Error: "+failure.Error())
	case found:
		writeJSON(w, http.StatusCreated, payload)
	default:
		w.Header().Set("X-GitLab-Last-Update", strconv.FormatInt(s.now().UnixNano(), 36))
		w.WriteHeader(http.StatusNoContent)
	}
}

// nextPendingJob is the pending job created first. Callers hold s.mu.
func (s *Server) nextPendingJob() *job {
	var next *job
	for _, j := range s.jobs {
		if j.status == "pending" && (next == nil || j.id < next.id) {
			next = j
		}
	}
	return next
}

// jobFromRequest finds the job of a /jobs/:id request and checks its
// JOB-TOKEN (or the token in the body for PUT). Callers hold s.mu.
func (s *Server) jobFromRequest(w http.ResponseWriter, r *http.Request, token string) (*job, bool) {
	id, err := strconv.ParseInt(r.PathValue("job_id"), 10, 64)
	j, ok := s.jobs[id]
	if err != nil || !ok {
		writeMessage(w, http.StatusNotFound, "404 Not Found")
		return nil, false
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(j.token)) != 1 {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return nil, false
	}
	return j, true
}

// appendTrace answers PATCH /jobs/:id/trace: the chunk must start where
// the stored log ends (416 with the stored Range otherwise); 202 with the
// new Range, and Job-Status telling the runner whether the job was
// canceled meanwhile.
func (s *Server) appendTrace(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		badRequest(w, "body could not be read")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobFromRequest(w, r, r.Header.Get("JOB-TOKEN"))
	if !ok {
		return
	}
	w.Header().Set("Job-Status", j.status)
	if j.status != "running" {
		writeMessage(w, http.StatusForbidden, "403 Forbidden  - Job is not running")
		return
	}
	start, _, ok := strings.Cut(r.Header.Get("Content-Range"), "-")
	from, err := strconv.Atoi(start)
	if !ok || err != nil || from != len(j.trace) {
		w.Header().Set("Range", "0-"+strconv.Itoa(len(j.trace)))
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return
	}
	j.trace = append(j.trace, body...)
	s.notify()
	w.Header().Set("Range", "0-"+strconv.Itoa(len(j.trace)))
	w.Header().Set("X-GitLab-Trace-Update-Interval", traceUpdateInterval)
	w.WriteHeader(http.StatusAccepted)
}

// traceUpdateInterval is the X-GitLab-Trace-Update-Interval GitLab sends
// while someone watches the job's log (3 s; 60 s otherwise): the runner
// then sends its log, and learns of a cancel, that often.
const traceUpdateInterval = "3"

// updateJobJSON is the body of PUT /jobs/:id (common.UpdateJobRequest).
type updateJobJSON struct {
	Token         string `json:"token"`
	State         string `json:"state"`
	FailureReason string `json:"failure_reason"`
	ExitCode      int    `json:"exit_code"`
}

// updateJob answers PUT /jobs/:id: "running" is a keep-alive, "success"
// and "failed" end the job and move its pipeline on.
func (s *Server) updateJob(w http.ResponseWriter, r *http.Request) {
	var req updateJobJSON
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		badRequest(w, "token is missing")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobFromRequest(w, r, req.Token)
	if !ok {
		return
	}
	w.Header().Set("Job-Status", j.status)
	w.Header().Set("X-GitLab-Trace-Update-Interval", traceUpdateInterval)
	if j.status != "running" {
		writeMessage(w, http.StatusForbidden, "403 Forbidden  - Job is not running")
		return
	}
	switch req.State {
	case "running":
	case "success", "failed":
		j.status, j.finishedAt = req.State, s.now()
		j.exitCode, j.failureReason = req.ExitCode, req.FailureReason
		if req.State == "failed" && j.failureReason == "" {
			j.failureReason = "unknown_failure"
		}
		s.advanceJobs(s.inst.pipelines[j.pipelineID])
	default:
		badRequest(w, "state does not have a valid value")
		return
	}
	w.Header().Set("Job-Status", j.status)
	writeJSON(w, http.StatusOK, map[string]any{})
}

// stringPtr is nil for "", as GitLab renders an absent text.
func stringPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// hookBuilds renders a pipeline's real jobs as a Pipeline Hook's builds,
// and its stages in order. Callers hold s.mu.
func (s *Server) hookBuilds(pl *pipeline, user hookUserJSON) ([]hookBuildJSON, []string) {
	var builds []hookBuildJSON
	var stages []string
	for _, j := range s.jobsOf(pl.id) {
		if !slices.Contains(stages, j.spec.Stage) {
			stages = append(stages, j.spec.Stage)
		}
		b := hookBuildJSON{
			ID: j.id, Stage: j.spec.Stage, Name: j.spec.Name, Status: j.status,
			CreatedAt: hookTime(j.createdAt), StartedAt: hookTimePtr(j.startedAt),
			FinishedAt: hookTimePtr(j.finishedAt), When: "on_success", User: user,
		}
		if !j.startedAt.IsZero() {
			q := j.startedAt.Sub(j.createdAt).Seconds()
			b.QueuedDuration = &q
			b.Runner = &hookRunnerJSON{ID: 1, Description: "gitlab-runner", RunnerType: "instance_type",
				Active: true, IsShared: true, Tags: []string{}}
			if !j.finishedAt.IsZero() {
				d := j.finishedAt.Sub(j.startedAt).Seconds()
				b.Duration = &d
			}
		}
		if j.failureReason != "" {
			reason := j.failureReason
			b.FailureReason = &reason
		}
		builds = append(builds, b)
	}
	return builds, stages
}
