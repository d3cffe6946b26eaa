package gitlabtest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pipeline statuses GitLab reports.
var pipelineStatuses = []string{
	"created", "waiting_for_resource", "preparing", "pending", "running",
	"success", "failed", "canceled", "skipped", "manual", "scheduled",
}

func finished(status string) bool {
	switch status {
	case "success", "failed", "canceled", "skipped":
		return true
	}
	return false
}

type pipeline struct {
	id, iid, projectID int64
	ref, sha, status   string
	beforeSHA          string
	source             string
	tag                bool  // ref is a tag
	mrIID              int64 // a merge request pipeline's merge request
	vars               []variable
	inputs             map[string]any
	name               *string   // workflow:name, interpolated
	user               *fakeUser // who created it; nil: see pipelineUser
	createdAt          time.Time
	updatedAt          time.Time
	startedAt          time.Time
	finishedAt         time.Time
	requested          time.Time // full clock precision; API creates only
	// stopRun ends the pipeline's simulation; nil when none is going on.
	stopRun context.CancelFunc
	// jobs are the ids of its real jobs (Behavior.Jobs), in stage order.
	jobs []int64
	// yamlErrors says why a pipeline of real jobs failed at once.
	yamlErrors string
}

type variable struct {
	Key          string `json:"key"`
	VariableType string `json:"variable_type"`
	Value        string `json:"value"`
}

// Pipeline is a pipeline as the fake stores it, for assertions and for
// driving simulated runs.
type Pipeline struct {
	ID, ProjectID int64
	Ref, SHA      string
	Status        string
	Source        string
	// Tag: Ref is a tag. MergeRequestIID is the merge request of a
	// merge request pipeline (source merge_request_event), else 0.
	Tag             bool
	MergeRequestIID int64
	Variables       map[string]string
	// Inputs are the pipeline inputs it was created with (GitLab's
	// REST API does not show them).
	Inputs     map[string]any
	Username   string // who created it
	CreatedAt  time.Time
	UpdatedAt  time.Time
	StartedAt  time.Time // zero until it ran
	FinishedAt time.Time // zero until it finished
	// Requested is when the create request was handled, at the clock's
	// full precision (CreatedAt has GitLab's milliseconds), for
	// benchmarks timing millisecond latencies; zero unless created
	// through the API.
	Requested time.Time
}

func (s *Server) export(pl *pipeline) Pipeline {
	vars := map[string]string{}
	for _, v := range pl.vars {
		vars[v.Key] = v.Value
	}
	return Pipeline{
		ID: pl.id, ProjectID: pl.projectID, Ref: pl.ref, SHA: pl.sha, Status: pl.status,
		Source: pl.source, Tag: pl.tag, MergeRequestIID: pl.mrIID, Variables: vars, Inputs: maps.Clone(pl.inputs), Username: s.pipelineUser(pl).username, CreatedAt: pl.createdAt, UpdatedAt: pl.updatedAt,
		StartedAt: pl.startedAt, FinishedAt: pl.finishedAt, Requested: pl.requested,
	}
}

// Pipelines returns the pipelines of a project, oldest first.
func (s *Server) Pipelines(projectPath string) []Pipeline {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil
	}
	var out []Pipeline
	for _, pl := range s.inst.pipelines {
		if pl.projectID == p.id {
			out = append(out, s.export(pl))
		}
	}
	slices.SortFunc(out, func(a, b Pipeline) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// AddPipeline records a pipeline as if GitLab had created it (source "push"
// by default), e.g. a pipeline depsd did not create, directly in status.
// Unless status is "created", a Pipeline Hook event is posted for it. It is
// not simulated: see RunPipeline for that.
func (s *Server) AddPipeline(projectPath, ref, source, status string) (int64, error) {
	return s.addPipeline(projectPath, ref, source, status, nil, nil)
}

// addPipeline is AddPipeline for a pipeline created by u (nil: the
// source's default user) with variables vars.
func (s *Server) addPipeline(projectPath, ref, source, status string, u *fakeUser, vars []variable) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return 0, fmt.Errorf("add pipeline to %s: project not found", projectPath)
	}
	c, ok := p.resolve(ref)
	if !ok {
		return 0, fmt.Errorf("add pipeline to %s: ref %s not found", projectPath, ref)
	}
	if !slices.Contains(pipelineStatuses, status) {
		return 0, fmt.Errorf("add pipeline to %s: unknown status %q", projectPath, status)
	}
	pl := s.newPipeline(p, ref, c.sha, cmp.Or(source, "push"), vars)
	pl.user = u
	_, pl.tag, _ = p.refTarget(ref)
	s.setStatus(pl, status)
	return pl.id, nil
}

// TokenUsername is the username of the API token's user (GET /user): the
// user of the pipelines created through the API.
const TokenUsername = "depsd"

// AddPipelineAs is AddPipeline for a pipeline created by username:
// TokenUsername (the API token's user, as if another program used the
// token) or "author" (a developer).
func (s *Server) AddPipelineAs(projectPath, ref, source, status, username string) (int64, error) {
	u, err := userNamed(username)
	if err != nil {
		return 0, fmt.Errorf("add pipeline to %s: %w", projectPath, err)
	}
	return s.addPipeline(projectPath, ref, source, status, &u, nil)
}

// AddAPIPipelineAs records an api pipeline created by username (as for
// AddPipelineAs) with pipeline variables, as another program or person
// creating one through the API would: a developer who copied depsd's
// DEPSD_ACTION_ID into a pipeline of theirs, say.
func (s *Server) AddAPIPipelineAs(projectPath, ref, status, username string, vars map[string]string) (int64, error) {
	u, err := userNamed(username)
	if err != nil {
		return 0, fmt.Errorf("add pipeline to %s: %w", projectPath, err)
	}
	var list []variable
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		list = append(list, variable{Key: k, Value: vars[k], VariableType: "env_var"})
	}
	return s.addPipeline(projectPath, ref, "api", status, &u, list)
}

// userNamed is the fake user with username: TokenUsername or "author".
func userNamed(username string) (fakeUser, error) {
	switch username {
	case botUser.username:
		return botUser, nil
	case devUser.username:
		return devUser, nil
	}
	return fakeUser{}, fmt.Errorf("unknown user %q", username)
}

// AddPastPipeline records a pipeline that ran before now, as history: it
// was created and started at started and ended in status (success, failed
// or canceled) at finished, so the API reports its `duration` (whole
// seconds between start and end, as GitLab does for a pipeline whose jobs
// ran back to back). No webhook is posted for it. It returns its id.
func (s *Server) AddPastPipeline(projectPath, ref, source, status string, started, ended time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return 0, fmt.Errorf("add past pipeline to %s: project not found", projectPath)
	}
	ref = cmp.Or(ref, p.defaultBranch)
	c, ok := p.resolve(ref)
	if !ok {
		return 0, fmt.Errorf("add past pipeline to %s: ref %s not found", projectPath, ref)
	}
	if !finished(status) || status == "skipped" {
		return 0, fmt.Errorf("add past pipeline to %s: status %q is not success, failed or canceled", projectPath, status)
	}
	if started.After(ended) || ended.After(s.now()) {
		return 0, fmt.Errorf("add past pipeline to %s: want started <= ended <= now, got %s and %s", projectPath, started, ended)
	}
	pl := s.newPipeline(p, ref, c.sha, cmp.Or(source, "push"), nil)
	_, pl.tag, _ = p.refTarget(ref)
	pl.status = status
	pl.createdAt, pl.startedAt = started.UTC(), started.UTC()
	pl.finishedAt, pl.updatedAt = ended.UTC(), ended.UTC()
	s.notify()
	return pl.id, nil
}

// SetPipelineStatus changes a pipeline's status, stamping updated_at,
// started_at and finished_at as GitLab would, and posts a Pipeline Hook
// event when the status changed. A simulated pipeline is taken over: its
// simulation stops, so tests can drive exact interleavings. A success
// first pushes the project's images (SetImages), or fails when it cannot.
func (s *Server) SetPipelineStatus(pipelineID int64, status string) error {
	if status == "success" && s.publishFor(s.ctx, pipelineID) != nil {
		status = "failed" // a job whose push fails fails its pipeline (images.go)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.inst.pipelines[pipelineID]
	if !ok {
		return fmt.Errorf("set status of pipeline %d: not found", pipelineID)
	}
	if !slices.Contains(pipelineStatuses, status) {
		return fmt.Errorf("set status of pipeline %d: unknown status %q", pipelineID, status)
	}
	s.stopRun(pl)
	s.setStatus(pl, status)
	return nil
}

// setStatus is the one place a pipeline's status changes. Like GitLab, it
// posts a Pipeline Hook event on every change but not when the status
// stays the same. Callers hold s.mu.
func (s *Server) setStatus(pl *pipeline, status string) {
	status = s.statuses.withExternal(pl, status) // its commit statuses count (statuses.go)
	now := s.now()
	changed := pl.status != status
	pl.status = status
	pl.updatedAt = now
	if status == "running" && pl.startedAt.IsZero() {
		pl.startedAt = now
	}
	if finished(status) {
		pl.finishedAt = now
	}
	if changed {
		s.pipelineHooks(pl)
		s.autoMerge(pl)
		s.notify()
	}
}

func (s *Server) newPipeline(p *project, ref, sha, source string, vars []variable) *pipeline {
	now := s.now()
	s.inst.nextPipe++
	p.nextIID++
	pl := &pipeline{
		id: s.inst.nextPipe, iid: p.nextIID, projectID: p.id,
		ref: ref, sha: sha, status: "created", source: source, vars: vars,
		beforeSHA: zeroSHA, createdAt: now, updatedAt: now,
	}
	// A push pipeline knows the commit before the push; others do not.
	if c, ok := p.commits[sha]; ok && source == "push" && c.parent != "" {
		pl.beforeSHA = c.parent
	}
	s.inst.pipelines[pl.id] = pl
	return pl
}

type pipelineInfoJSON struct {
	ID        int64   `json:"id"`
	IID       int64   `json:"iid"`
	ProjectID int64   `json:"project_id"`
	SHA       string  `json:"sha"`
	Ref       string  `json:"ref"`
	Status    string  `json:"status"`
	Source    string  `json:"source"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
	WebURL    string  `json:"web_url"`
	Name      *string `json:"name"`
}

type userJSON struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Username  string `json:"username"`
	State     string `json:"state"`
	AvatarURL string `json:"avatar_url"`
	WebURL    string `json:"web_url"`
}

type detailedStatusJSON struct {
	Icon        string `json:"icon"`
	Text        string `json:"text"`
	Label       string `json:"label"`
	Group       string `json:"group"`
	Tooltip     string `json:"tooltip"`
	HasDetails  bool   `json:"has_details"`
	DetailsPath string `json:"details_path"`
}

type pipelineJSON struct {
	pipelineInfoJSON
	BeforeSHA      string             `json:"before_sha"`
	Tag            bool               `json:"tag"`
	YamlErrors     *string            `json:"yaml_errors"`
	User           userJSON           `json:"user"`
	StartedAt      *string            `json:"started_at"`
	FinishedAt     *string            `json:"finished_at"`
	CommittedAt    *string            `json:"committed_at"`
	Duration       *int64             `json:"duration"`
	QueuedDuration *int64             `json:"queued_duration"`
	Coverage       *string            `json:"coverage"`
	DetailedStatus detailedStatusJSON `json:"detailed_status"`
}

func (s *Server) pipelineInfo(pl *pipeline) pipelineInfoJSON {
	path := ""
	if p, ok := s.inst.projects[pl.projectID]; ok {
		path = p.path
	}
	return pipelineInfoJSON{
		ID: pl.id, IID: pl.iid, ProjectID: pl.projectID, SHA: pl.sha, Ref: pl.ref, Name: pl.name,
		Status: pl.status, Source: pl.source,
		CreatedAt: gitlabTime(pl.createdAt), UpdatedAt: gitlabTime(pl.updatedAt),
		WebURL: s.URL + "/" + path + "/-/pipelines/" + strconv.FormatInt(pl.id, 10),
	}
}

func (s *Server) pipelineDetail(pl *pipeline) pipelineJSON {
	info := s.pipelineInfo(pl)
	out := pipelineJSON{
		pipelineInfoJSON: info,
		BeforeSHA:        pl.beforeSHA,
		Tag:              pl.tag,
		YamlErrors:       stringPtr(pl.yamlErrors),
		User:             s.pipelineUser(pl).rest(s.URL),
		StartedAt:        timePtr(pl.startedAt),
		FinishedAt:       timePtr(pl.finishedAt),
		CommittedAt:      nil,
		DetailedStatus: detailedStatusJSON{
			Icon: "status_" + pl.status, Text: pl.status, Label: pl.status, Group: pl.status,
			Tooltip: pl.status, HasDetails: true, DetailsPath: info.WebURL[len(s.URL):],
		},
	}
	if !pl.startedAt.IsZero() {
		q := int64(pl.startedAt.Sub(pl.createdAt).Seconds())
		out.QueuedDuration = &q
		if !pl.finishedAt.IsZero() {
			d := int64(pl.finishedAt.Sub(pl.startedAt).Seconds())
			out.Duration = &d
		}
	}
	return out
}

// createPipeline is POST /projects/:id/pipeline with ref and variables.
func (s *Server) createPipeline(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	ref, ok := prm.str("ref")
	if !ok || ref == "" {
		badRequest(w, "ref is missing")
		return
	}
	if p.archived {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	var inputs map[string]any
	if raw, ok := prm["inputs"]; ok {
		if inputs, ok = raw.(map[string]any); !ok {
			badRequest(w, "inputs is invalid")
			return
		}
	}
	if list, _ := prm["variables"].([]any); len(list) > 0 && !p.ci.mayPassVariables() {
		refuseCreate(w, msgVariablesRefused)
		return
	}
	sha, isTag, ok := p.refTarget(ref)
	if !ok {
		refuseCreate(w, "Reference not found")
		return
	}
	if msg := checkInputs(p.commits[sha].files, inputs); msg != "" {
		refuseCreate(w, msg)
		return
	}
	if s.throttledCreate(p, sha) {
		writeTooManyPipelines(w)
		return
	}
	var vars []variable
	if raw, ok := prm["variables"]; ok {
		list, ok := raw.([]any)
		if !ok {
			badRequest(w, "variables is invalid")
			return
		}
		for _, item := range list {
			m, ok := item.(map[string]any)
			key, _ := m["key"].(string)
			if !ok || key == "" {
				badRequest(w, "variables[key] is missing")
				return
			}
			value, _ := m["value"].(string)
			typ, _ := m["variable_type"].(string)
			if typ == "" {
				typ = "env_var"
			}
			if typ != "env_var" && typ != "file" {
				badRequest(w, "variables[variable_type] does not have a valid value")
				return
			}
			vars = append(vars, variable{Key: key, Value: value, VariableType: typ})
		}
	}
	user := botUser
	if c := callerOf(r); !c.admin {
		user = c.user
	}
	root, err := s.ciRootAt(ciContext{project: p, sha: sha, ref: ref, user: user, vars: vars}, inputs)
	if isIncludeError(err) {
		refuseCreate(w, err.Error())
		return
	}
	pl := s.newPipeline(p, ref, sha, "api", vars)
	pl.tag = isTag
	pl.inputs = inputs
	if user.id != botUser.id {
		pl.user = &user
	}
	if err == nil {
		pl.name = workflowName(root)
	}
	pl.requested = s.preciseNow()
	s.startRun(p, pl)
	writeJSON(w, http.StatusCreated, s.pipelineDetail(pl))
}

// SetIgnoredPipelineFilters makes GET /projects/:id/pipelines ignore the
// named query parameters (created_after, updated_after, username, ...), as
// a GitLab that does not know them does: the list then holds pipelines the
// filter would have left out, and a client must check what it relies on.
func (s *Server) SetIgnoredPipelineFilters(params ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoredPipelineFilters = slices.Clone(params)
}

// listPipelines honours ref, sha, status, source, scope, username (who
// created it), updated_after, updated_before, created_after,
// created_before, order_by (id, status, ref, updated_at; default id), sort
// (default desc) and pagination, less those SetIgnoredPipelineFilters
// names.
func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	for _, k := range s.ignoredPipelineFilters {
		q.Del(k)
	}
	var after, before, createdAfter, createdBefore time.Time
	for key, dst := range map[string]*time.Time{"updated_after": &after, "updated_before": &before,
		"created_after": &createdAfter, "created_before": &createdBefore} {
		if v := q.Get(key); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				badRequest(w, key+" is invalid")
				return
			}
			*dst = t
		}
	}
	var list []*pipeline
	for _, pl := range s.inst.pipelines {
		switch {
		case pl.projectID != p.id,
			q.Has("ref") && pl.ref != q.Get("ref"),
			q.Has("sha") && pl.sha != q.Get("sha"),
			q.Has("status") && pl.status != q.Get("status"),
			q.Has("source") && pl.source != q.Get("source"),
			q.Get("scope") == "finished" && !finished(pl.status),
			q.Get("scope") == "running" && pl.status != "running",
			q.Get("scope") == "pending" && pl.status != "pending",
			q.Has("username") && s.pipelineUser(pl).username != q.Get("username"),
			!after.IsZero() && !pl.updatedAt.After(after),
			!before.IsZero() && !pl.updatedAt.Before(before),
			!createdAfter.IsZero() && !pl.createdAt.After(createdAfter),
			!createdBefore.IsZero() && !pl.createdAt.Before(createdBefore):
			continue
		}
		list = append(list, pl)
	}
	desc := q.Get("sort") != "asc"
	orderBy := q.Get("order_by")
	slices.SortFunc(list, func(a, b *pipeline) int {
		var c int
		switch orderBy {
		case "status":
			c = cmp.Compare(a.status, b.status)
		case "ref":
			c = cmp.Compare(a.ref, b.ref)
		case "updated_at":
			c = a.updatedAt.Compare(b.updatedAt)
		}
		c = cmp.Or(c, cmp.Compare(a.id, b.id))
		if desc {
			return -c
		}
		return c
	})
	page := paginate(s, w, r, list)
	out := make([]pipelineInfoJSON, 0, len(page))
	for _, pl := range page {
		out = append(out, s.pipelineInfo(pl))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) findPipeline(w http.ResponseWriter, r *http.Request) (*pipeline, bool) {
	p, ok := s.requestProject(w, r)
	if !ok {
		return nil, false
	}
	id, err := strconv.ParseInt(r.PathValue("pipeline_id"), 10, 64)
	if err != nil {
		badRequest(w, "pipeline_id is invalid")
		return nil, false
	}
	pl, ok := s.inst.pipelines[id]
	if !ok || pl.projectID != p.id {
		writeMessage(w, http.StatusNotFound, "404 Not found")
		return nil, false
	}
	return pl, true
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pl, ok := s.findPipeline(w, r); ok {
		writeJSON(w, http.StatusOK, s.pipelineDetail(pl))
	}
}

func (s *Server) getPipelineVariables(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pl, ok := s.findPipeline(w, r); ok {
		out := append([]variable{}, pl.vars...)
		writeJSON(w, http.StatusOK, out)
	}
}

// cancelPipeline is POST /projects/:id/pipelines/:pipeline_id/cancel
// (API::Ci::Pipelines, Ci::CancelPipelineService): the pipeline and its
// jobs not yet finished are canceled (CancelPipeline) and the pipeline is
// answered. A pipeline that already ended is not cancelable: GitLab 18.0
// and later answer 422 "Pipeline is not cancelable", earlier versions 200
// with the pipeline as it is.
func (s *Server) cancelPipeline(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.findPipeline(w, r)
	if !ok {
		return
	}
	if finished(pl.status) {
		if versionAtLeast(s.version, 18) {
			writeMessage(w, http.StatusUnprocessableEntity, "Pipeline is not cancelable")
			return
		}
		writeJSON(w, http.StatusOK, s.pipelineDetail(pl))
		return
	}
	s.cancelLocked(pl)
	writeJSON(w, http.StatusOK, s.pipelineDetail(pl))
}

// versionAtLeast reports whether GitLab version v (MAJOR.MINOR.PATCH) is
// of major version major or later.
func versionAtLeast(v string, major int) bool {
	m, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(m)
	return err == nil && n >= major
}
