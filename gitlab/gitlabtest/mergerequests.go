package gitlabtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Merge requests (API::MergeRequests, MergeRequests::*Service): create,
// get, list, update, close and reopen, merge now or when the pipeline
// succeeds; their pipelines (source merge_request_event) and their
// Merge Request Hooks. Notes are in notes.go.

// Merge request states.
const (
	mrOpened = "opened"
	mrClosed = "closed"
	mrMerged = "merged"
)

type mergeRequest struct {
	id, iid        int64
	title, desc    string
	source, target string
	state          string
	labels         []string
	author         fakeUser
	removeSource   bool // force_remove_source_branch
	squash         bool
	sha            string // the source branch's head while open; frozen when merged or closed
	createdAt      time.Time
	updatedAt      time.Time
	mergedAt       time.Time
	closedAt       time.Time
	mergedBy       *fakeUser
	closedBy       *fakeUser
	mergeCommit    string
	squashCommit   string
	autoMerge      bool // merge when the head pipeline succeeds
	mergeUser      *fakeUser
	mergeLevel     int // mergeUser's access level
	notes          []*note
}

// draft reports a title GitLab takes for a draft (Draft:, [Draft], (Draft)).
func (mr *mergeRequest) draft() bool {
	t := strings.ToLower(strings.TrimSpace(mr.title))
	return strings.HasPrefix(t, "draft:") || strings.HasPrefix(t, "[draft]") || strings.HasPrefix(t, "(draft)")
}

// mr returns p's merge request iid, or nil.
func (p *project) mr(iid int64) *mergeRequest {
	if iid < 1 || iid > int64(len(p.mrs)) {
		return nil
	}
	return p.mrs[iid-1]
}

// headPipeline is the merge request's head pipeline: the newest pipeline of
// its head commit, on its source branch or its merge request ref. Callers
// hold s.mu.
func (s *Server) headPipeline(p *project, mr *mergeRequest) *pipeline {
	var head *pipeline
	for _, pl := range s.inst.pipelines {
		ofMR := pl.mrIID == mr.iid || (pl.mrIID == 0 && !pl.tag && pl.ref == mr.source)
		if pl.projectID != p.id || pl.sha != mr.sha || !ofMR {
			continue
		}
		if head == nil || pl.id > head.id {
			head = pl
		}
	}
	return head
}

// conflicts says whether merging mr would change a file both branches
// changed since their merge base, each differently.
func (p *project) conflicts(mr *mergeRequest) bool {
	_, ok := p.mergedFiles(mr)
	return !ok
}

// mergedFiles is the tree a merge of mr gives: the target's files with
// the source's changes since the merge base; ok is false on a conflict.
func (p *project) mergedFiles(mr *mergeRequest) (map[string]string, bool) {
	src, tgt := p.commits[p.branches[mr.source]], p.commits[p.branches[mr.target]]
	if src == nil || tgt == nil {
		return nil, false
	}
	var baseFiles map[string]string
	if b, ok := p.commits[p.mergeBase(src.sha, tgt.sha)]; ok {
		baseFiles = b.files
	}
	out := map[string]string{}
	for k, v := range tgt.files {
		out[k] = v
	}
	for path := range unionKeys(baseFiles, src.files, tgt.files) {
		bv, inBase := baseFiles[path]
		sv, inSrc := src.files[path]
		tv, inTgt := tgt.files[path]
		srcChanged := inBase != inSrc || bv != sv
		tgtChanged := inBase != inTgt || bv != tv
		if !srcChanged {
			continue
		}
		if tgtChanged && (inSrc != inTgt || sv != tv) {
			return nil, false
		}
		if inSrc {
			out[path] = sv
		} else {
			delete(out, path)
		}
	}
	return out, true
}

// detailedStatus is the merge request's detailed_merge_status. Callers
// hold s.mu.
func (s *Server) detailedStatus(p *project, mr *mergeRequest) string {
	hp := s.headPipeline(p, mr)
	switch {
	case mr.state != mrOpened:
		return "not_open"
	case mr.draft():
		return "draft_status"
	case p.branches[mr.source] == "" || p.branches[mr.target] == "":
		return "broken_status"
	case p.conflicts(mr):
		return "conflict"
	case p.pipelineMustSucceed && (hp == nil || hp.status != "success"):
		if hp != nil && !finished(hp.status) {
			return "ci_still_running"
		}
		return "ci_must_pass"
	}
	return "mergeable"
}

// mergeableState is MergeRequest#mergeable_state?: open, not a draft, its
// branches there, and, when the project says so, its pipeline succeeded
// (unless skipCI). Callers hold s.mu.
func (s *Server) mergeableState(p *project, mr *mergeRequest, skipCI bool) bool {
	if mr.state != mrOpened || mr.draft() || p.branches[mr.source] == "" || p.branches[mr.target] == "" {
		return false
	}
	if p.pipelineMustSucceed && !skipCI {
		hp := s.headPipeline(p, mr)
		return hp != nil && hp.status == "success"
	}
	return true
}

// ---- JSON

type referencesJSON struct {
	Short    string `json:"short"`
	Relative string `json:"relative"`
	Full     string `json:"full"`
}

type timeStatsJSON struct {
	TimeEstimate        int     `json:"time_estimate"`
	TotalTimeSpent      int     `json:"total_time_spent"`
	HumanTimeEstimate   *string `json:"human_time_estimate"`
	HumanTotalTimeSpent *string `json:"human_total_time_spent"`
}

type taskCompletionJSON struct {
	Count          int `json:"count"`
	CompletedCount int `json:"completed_count"`
}

// mrBasicJSON is API::Entities::MergeRequestBasic.
type mrBasicJSON struct {
	ID                          int64              `json:"id"`
	IID                         int64              `json:"iid"`
	ProjectID                   int64              `json:"project_id"`
	Title                       string             `json:"title"`
	Description                 string             `json:"description"`
	State                       string             `json:"state"`
	CreatedAt                   string             `json:"created_at"`
	UpdatedAt                   string             `json:"updated_at"`
	MergedBy                    *userJSON          `json:"merged_by"`
	MergeUser                   *userJSON          `json:"merge_user"`
	MergedAt                    *string            `json:"merged_at"`
	ClosedBy                    *userJSON          `json:"closed_by"`
	ClosedAt                    *string            `json:"closed_at"`
	TargetBranch                string             `json:"target_branch"`
	SourceBranch                string             `json:"source_branch"`
	UserNotesCount              int                `json:"user_notes_count"`
	Upvotes                     int                `json:"upvotes"`
	Downvotes                   int                `json:"downvotes"`
	Author                      userJSON           `json:"author"`
	Assignees                   []userJSON         `json:"assignees"`
	Assignee                    *userJSON          `json:"assignee"`
	Reviewers                   []userJSON         `json:"reviewers"`
	SourceProjectID             int64              `json:"source_project_id"`
	TargetProjectID             int64              `json:"target_project_id"`
	Labels                      []string           `json:"labels"`
	Draft                       bool               `json:"draft"`
	Imported                    bool               `json:"imported"`
	ImportedFrom                string             `json:"imported_from"`
	WorkInProgress              bool               `json:"work_in_progress"`
	Milestone                   *struct{}          `json:"milestone"`
	MergeWhenPipelineSucceeds   bool               `json:"merge_when_pipeline_succeeds"`
	MergeStatus                 string             `json:"merge_status"`
	DetailedMergeStatus         string             `json:"detailed_merge_status"`
	MergeAfter                  *string            `json:"merge_after"`
	SHA                         string             `json:"sha"`
	MergeCommitSHA              *string            `json:"merge_commit_sha"`
	SquashCommitSHA             *string            `json:"squash_commit_sha"`
	DiscussionLocked            *bool              `json:"discussion_locked"`
	ShouldRemoveSourceBranch    *bool              `json:"should_remove_source_branch"`
	ForceRemoveSourceBranch     bool               `json:"force_remove_source_branch"`
	PreparedAt                  string             `json:"prepared_at"`
	Reference                   string             `json:"reference"`
	References                  referencesJSON     `json:"references"`
	WebURL                      string             `json:"web_url"`
	TimeStats                   timeStatsJSON      `json:"time_stats"`
	Squash                      bool               `json:"squash"`
	SquashOnMerge               bool               `json:"squash_on_merge"`
	TaskCompletionStatus        taskCompletionJSON `json:"task_completion_status"`
	HasConflicts                bool               `json:"has_conflicts"`
	BlockingDiscussionsResolved bool               `json:"blocking_discussions_resolved"`
}

type diffRefsJSON struct {
	BaseSHA  string `json:"base_sha"`
	HeadSHA  string `json:"head_sha"`
	StartSHA string `json:"start_sha"`
}

// mrJSON is API::Entities::MergeRequest: a single merge request.
type mrJSON struct {
	mrBasicJSON
	Subscribed                  bool              `json:"subscribed"`
	ChangesCount                *string           `json:"changes_count"`
	LatestBuildStartedAt        *string           `json:"latest_build_started_at"`
	LatestBuildFinishedAt       *string           `json:"latest_build_finished_at"`
	FirstDeployedToProductionAt *string           `json:"first_deployed_to_production_at"`
	Pipeline                    *pipelineInfoJSON `json:"pipeline"`
	HeadPipeline                *pipelineJSON     `json:"head_pipeline"`
	DiffRefs                    diffRefsJSON      `json:"diff_refs"`
	MergeError                  *string           `json:"merge_error"`
	FirstContribution           bool              `json:"first_contribution"`
	User                        struct {
		CanMerge bool `json:"can_merge"`
	} `json:"user"`
}

func (s *Server) userPtr(u *fakeUser) *userJSON {
	if u == nil {
		return nil
	}
	out := u.rest(s.URL)
	return &out
}

func (s *Server) mrBasic(p *project, mr *mergeRequest) mrBasicJSON {
	ref := "!" + strconv.FormatInt(mr.iid, 10)
	out := mrBasicJSON{
		ID: mr.id, IID: mr.iid, ProjectID: p.id, Title: mr.title, Description: mr.desc, State: mr.state,
		CreatedAt: gitlabTime(mr.createdAt), UpdatedAt: gitlabTime(mr.updatedAt),
		MergedBy: s.userPtr(mr.mergedBy), MergeUser: s.userPtr(cmpUser(mr.mergedBy, mr.mergeUser)), MergedAt: timePtr(mr.mergedAt),
		ClosedBy: s.userPtr(mr.closedBy), ClosedAt: timePtr(mr.closedAt),
		TargetBranch: mr.target, SourceBranch: mr.source,
		Author: mr.author.rest(s.URL), Assignees: []userJSON{}, Reviewers: []userJSON{},
		SourceProjectID: p.id, TargetProjectID: p.id, Labels: slices.Clone(mr.labels),
		Draft: mr.draft(), WorkInProgress: mr.draft(),
		MergeWhenPipelineSucceeds: mr.autoMerge,
		MergeStatus:               "can_be_merged",
		DetailedMergeStatus:       s.detailedStatus(p, mr),
		SHA:                       mr.sha,
		ForceRemoveSourceBranch:   mr.removeSource,
		PreparedAt:                gitlabTime(mr.createdAt),
		Reference:                 ref,
		References:                referencesJSON{Short: ref, Relative: ref, Full: p.path + ref},
		WebURL:                    s.URL + "/" + p.path + "/-/merge_requests/" + strconv.FormatInt(mr.iid, 10),
		Squash:                    mr.squash, SquashOnMerge: mr.squash,
		HasConflicts:                mr.state == mrOpened && p.conflicts(mr),
		BlockingDiscussionsResolved: true,
	}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	if out.HasConflicts {
		out.MergeStatus = "cannot_be_merged"
	}
	if mr.mergeCommit != "" {
		out.MergeCommitSHA = &mr.mergeCommit
	}
	if mr.squashCommit != "" {
		out.SquashCommitSHA = &mr.squashCommit
	}
	for _, n := range mr.notes {
		if !n.system {
			out.UserNotesCount++
		}
	}
	return out
}

func cmpUser(a, b *fakeUser) *fakeUser {
	if a != nil {
		return a
	}
	return b
}

// mrEntity renders mr for a caller with this access level.
func (s *Server) mrEntity(p *project, mr *mergeRequest, level int) mrJSON {
	out := mrJSON{mrBasicJSON: s.mrBasic(p, mr)}
	changes := strconv.Itoa(len(p.changedFiles(mr)))
	out.ChangesCount = &changes
	if hp := s.headPipeline(p, mr); hp != nil {
		info, detail := s.pipelineInfo(hp), s.pipelineDetail(hp)
		out.Pipeline, out.HeadPipeline = &info, &detail
		out.LatestBuildStartedAt, out.LatestBuildFinishedAt = timePtr(hp.startedAt), timePtr(hp.finishedAt)
	}
	base := p.mergeBase(mr.sha, p.branches[mr.target])
	out.DiffRefs = diffRefsJSON{BaseSHA: base, HeadSHA: mr.sha, StartSHA: p.branches[mr.target]}
	out.User.CanMerge = p.canMerge(level, mr.target)
	return out
}

// changedFiles lists the files the merge request changes.
func (p *project) changedFiles(mr *mergeRequest) []string {
	head, ok := p.commits[mr.sha]
	if !ok {
		return nil
	}
	var baseFiles map[string]string
	if b, ok := p.commits[p.mergeBase(mr.sha, p.branches[mr.target])]; ok {
		baseFiles = b.files
	}
	var out []string
	for path := range unionKeys(baseFiles, head.files) {
		bv, inBase := baseFiles[path]
		hv, inHead := head.files[path]
		if inBase != inHead || bv != hv {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// ---- handlers

func (s *Server) requestMR(w http.ResponseWriter, r *http.Request) (*project, *mergeRequest, bool) {
	p, ok := s.requestProject(w, r)
	if !ok {
		return nil, nil, false
	}
	iid, err := strconv.ParseInt(r.PathValue("merge_request_iid"), 10, 64)
	if err != nil {
		badRequest(w, "merge_request_iid is invalid")
		return nil, nil, false
	}
	mr := p.mr(iid)
	if mr == nil {
		writeMessage(w, http.StatusNotFound, "404 Merge Request Not Found")
		return nil, nil, false
	}
	return p, mr, true
}

// labelList reads labels given as "a,b" or ["a","b"].
func labelList(v any) []string {
	var raw []string
	switch x := v.(type) {
	case string:
		raw = strings.Split(x, ",")
	case []any:
		for _, e := range x {
			raw = append(raw, fmt.Sprint(e))
		}
	}
	out := []string{}
	for _, l := range raw {
		if l = strings.TrimSpace(l); l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// openConflict returns the open merge request of p other than mr with
// the same source and target branches, as GitLab's validation finds it.
func (p *project) openConflict(mr *mergeRequest) *mergeRequest {
	for _, o := range p.mrs {
		if o != mr && o.state == mrOpened && o.source == mr.source && o.target == mr.target {
			return o
		}
	}
	return nil
}

func writeConflict(w http.ResponseWriter, o *mergeRequest) {
	writeJSON(w, http.StatusConflict, map[string]any{"message": []string{
		"Another open merge request already exists for this source branch: !" + strconv.FormatInt(o.iid, 10)}})
}

// createMR is POST /projects/:id/merge_requests with source_branch,
// target_branch, title (required), description, labels,
// remove_source_branch and squash: 201 and the merge request; 400 when a
// parameter is missing or a branch does not exist ({"message":
// {"source_branch": ["does not exist"]}}); 422 for the same branch on
// both sides; 409 when an open merge request of the same branches
// exists. A new merge request posts a Merge Request Hook (open) and, with
// Behavior.OnMergeRequest, starts its pipeline.
func (s *Server) createMR(w http.ResponseWriter, r *http.Request) {
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
	source, hasSource := prm.str("source_branch")
	target, hasTarget := prm.str("target_branch")
	title, hasTitle := prm.str("title")
	if missing := missingParams(hasSource, "source_branch", hasTarget, "target_branch", hasTitle, "title"); missing != "" {
		badRequest(w, missing)
		return
	}
	if source == target {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": []string{"You can't use same project/branch for source and target"}})
		return
	}
	invalid := map[string][]string{}
	for field, b := range map[string]string{"source_branch": source, "target_branch": target} {
		if _, ok := p.branches[b]; !ok {
			invalid[field] = []string{"does not exist"}
		}
	}
	if len(invalid) > 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": invalid})
		return
	}
	now := s.now()
	who := s.actorOf(r, p)
	mr := &mergeRequest{
		id: s.inst.id(), iid: int64(len(p.mrs)) + 1, title: title, source: source, target: target,
		state: mrOpened, author: who.user, sha: p.branches[source], createdAt: now, updatedAt: now,
		labels: labelList(prm["labels"]),
	}
	mr.desc, _ = prm.str("description")
	mr.removeSource, _ = prm.boolean("remove_source_branch")
	mr.squash, _ = prm.boolean("squash")
	if o := p.openConflict(mr); o != nil {
		writeConflict(w, o)
		return
	}
	p.mrs = append(p.mrs, mr)
	s.fireMR(p, mr, "open", who.user)
	if b, _ := s.behaviorOf(p); b.OnMergeRequest {
		s.startMRPipeline(p, mr, who.user)
	}
	s.notify()
	writeJSON(w, http.StatusCreated, s.mrEntity(p, mr, who.level))
}

func (s *Server) getMR(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, mr, ok := s.requestMR(w, r); ok {
		writeJSON(w, http.StatusOK, s.mrEntity(p, mr, s.actorOf(r, p).level))
	}
}

// listMRs is GET /projects/:id/merge_requests: state (opened, closed,
// merged, all; default all), source_branch, target_branch, labels (all of
// them; None: without labels, Any: with some), iids[], order_by
// (created_at, updated_at; default created_at), sort (default desc),
// offset pagination.
func (s *Server) listMRs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	state := cmp.Or(q.Get("state"), "all")
	if !slices.Contains([]string{"opened", "closed", "locked", "merged", "all"}, state) {
		badRequest(w, "state does not have a valid value")
		return
	}
	labels := labelList(q.Get("labels"))
	iids := q["iids[]"]
	var list []*mergeRequest
	for _, mr := range p.mrs {
		switch {
		case state != "all" && mr.state != state,
			q.Has("source_branch") && mr.source != q.Get("source_branch"),
			q.Has("target_branch") && mr.target != q.Get("target_branch"),
			len(iids) > 0 && !slices.Contains(iids, strconv.FormatInt(mr.iid, 10)),
			!labelsMatch(mr.labels, labels):
			continue
		}
		list = append(list, mr)
	}
	byUpdated := q.Get("order_by") == "updated_at"
	desc := q.Get("sort") != "asc"
	slices.SortFunc(list, func(a, b *mergeRequest) int {
		c := a.createdAt.Compare(b.createdAt)
		if byUpdated {
			c = a.updatedAt.Compare(b.updatedAt)
		}
		c = cmp.Or(c, cmp.Compare(a.iid, b.iid))
		if desc {
			return -c
		}
		return c
	})
	page := paginate(s, w, r, list)
	out := make([]mrBasicJSON, 0, len(page))
	for _, mr := range page {
		out = append(out, s.mrBasic(p, mr))
	}
	writeJSON(w, http.StatusOK, out)
}

func labelsMatch(have, want []string) bool {
	for _, l := range want {
		switch {
		case strings.EqualFold(l, "None"):
			if len(have) > 0 {
				return false
			}
		case strings.EqualFold(l, "Any"):
			if len(have) == 0 {
				return false
			}
		case !slices.Contains(have, l):
			return false
		}
	}
	return true
}

// updateMR is PUT /projects/:id/merge_requests/:merge_request_iid: title,
// description, target_branch, labels, add_labels, remove_labels,
// state_event (close, reopen), remove_source_branch, squash; at least one.
// Closing a merged merge request or reopening an open one changes
// nothing, as GitLab's state machine ignores them; reopening when another
// open merge request has the same branches answers 409.
func (s *Server) updateMR(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, ok := s.requestMR(w, r)
	if !ok {
		return
	}
	known := []string{"title", "description", "target_branch", "labels", "add_labels", "remove_labels", "state_event", "remove_source_branch", "squash"}
	if !slices.ContainsFunc(known, func(k string) bool { _, ok := prm[k]; return ok }) {
		badRequest(w, strings.Join(known, ", ")+" are missing, at least one parameter must be provided")
		return
	}
	event, _ := prm.str("state_event")
	if event != "" && event != "close" && event != "reopen" {
		badRequest(w, "state_event does not have a valid value")
		return
	}
	if title, ok := prm.str("title"); ok && title == "" {
		badRequest(w, "title is empty")
		return
	}
	if target, ok := prm.str("target_branch"); ok && mr.state == mrOpened {
		if _, exists := p.branches[target]; !exists {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": map[string][]string{"target_branch": {"does not exist"}}})
			return
		}
		if target == mr.source {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": []string{"You can't use same project/branch for source and target"}})
			return
		}
	}
	if event == "reopen" && mr.state == mrClosed {
		probe := *mr
		if t, ok := prm.str("target_branch"); ok {
			probe.target = t
		}
		if o := p.openConflict(&probe); o != nil {
			writeConflict(w, o)
			return
		}
	}
	changed := false
	set := func(dst *string, key string) {
		if v, ok := prm.str(key); ok && v != *dst {
			*dst, changed = v, true
		}
	}
	set(&mr.title, "title")
	set(&mr.desc, "description")
	if mr.state == mrOpened {
		set(&mr.target, "target_branch")
	}
	if v, ok := prm["labels"]; ok {
		mr.labels, changed = labelList(v), true
	}
	if v, ok := prm["add_labels"]; ok {
		mr.labels, changed = labelList(strings.Join(append(slices.Clone(mr.labels), labelList(v)...), ",")), true
	}
	if v, ok := prm["remove_labels"]; ok {
		drop := labelList(v)
		mr.labels, changed = slices.DeleteFunc(mr.labels, func(l string) bool { return slices.Contains(drop, l) }), true
	}
	if v, ok := prm.boolean("remove_source_branch"); ok {
		mr.removeSource, changed = v, true
	}
	if v, ok := prm.boolean("squash"); ok {
		mr.squash, changed = v, true
	}
	who := s.actorOf(r, p)
	if changed {
		mr.updatedAt = s.now()
		s.fireMR(p, mr, "update", who.user)
	}
	switch {
	case event == "close" && mr.state == mrOpened:
		s.closeMR(p, mr, who.user)
	case event == "reopen" && mr.state == mrClosed:
		s.reopenMR(p, mr, who.user)
	}
	s.notify()
	writeJSON(w, http.StatusOK, s.mrEntity(p, mr, who.level))
}

// closeMR closes mr (an automatic merge is dropped) with a system note and
// a Merge Request Hook. Callers hold s.mu.
func (s *Server) closeMR(p *project, mr *mergeRequest, by fakeUser) {
	now := s.now()
	mr.state, mr.closedAt, mr.closedBy, mr.updatedAt = mrClosed, now, &by, now
	mr.autoMerge, mr.mergeUser = false, nil
	s.systemNote(mr, by, "closed")
	s.fireMR(p, mr, "close", by)
}

// reopenMR reopens mr unless one of its branches is gone. Callers hold
// s.mu.
func (s *Server) reopenMR(p *project, mr *mergeRequest, by fakeUser) {
	if p.branches[mr.source] == "" || p.branches[mr.target] == "" {
		return
	}
	now := s.now()
	mr.state, mr.closedAt, mr.closedBy, mr.updatedAt = mrOpened, time.Time{}, nil, now
	mr.sha = p.branches[mr.source]
	s.systemNote(mr, by, "reopened")
	s.fireMR(p, mr, "reopen", by)
}

// mergeMR is PUT /projects/:id/merge_requests/:merge_request_iid/merge as
// API::MergeRequests answers it: 401 when the token's user may not merge
// into the target branch; with merge_when_pipeline_succeeds or auto_merge,
// an automatic merge while the head pipeline runs, an immediate merge when
// it succeeded; 405 when the merge request cannot be merged now (not open,
// a draft, a branch gone, no running or successful pipeline for an
// automatic merge, the project's pipeline-must-succeed check); 422 Branch
// cannot be merged on a conflict; 409 when sha is not the source branch's
// head. should_remove_source_branch, squash and merge_commit_message are
// honoured.
func (s *Server) mergeMR(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, ok := s.requestMR(w, r)
	if !ok {
		return
	}
	who := s.actorOf(r, p)
	if !p.canMerge(who.level, mr.target) {
		writeMessage(w, http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	mwps, _ := prm.boolean("merge_when_pipeline_succeeds")
	if am, ok := prm.boolean("auto_merge"); ok {
		mwps = mwps || am
	}
	hp := s.headPipeline(p, mr)
	automatically := mwps && s.mergeableState(p, mr, true) && hp != nil && !finished(hp.status)
	immediately := s.mergeableState(p, mr, false)
	if mwps {
		immediately = mr.state == mrOpened && hp != nil && hp.status == "success" && s.mergeableState(p, mr, true)
	}
	if !immediately && !automatically {
		writeMessage(w, http.StatusMethodNotAllowed, "405 Method Not Allowed")
		return
	}
	if !automatically && p.conflicts(mr) {
		writeMessage(w, http.StatusUnprocessableEntity, "Branch cannot be merged")
		return
	}
	if sha, ok := prm.str("sha"); ok && sha != mr.sha {
		writeMessage(w, http.StatusConflict, "SHA does not match HEAD of source branch: "+mr.sha)
		return
	}
	if v, ok := prm.boolean("squash"); ok && v {
		mr.squash = true
	}
	removeSource, _ := prm.boolean("should_remove_source_branch")
	message, _ := prm.str("merge_commit_message")
	if immediately {
		if !s.merge(p, mr, who, removeSource, message) {
			writeMessage(w, http.StatusUnprocessableEntity, "Branch cannot be merged")
			return
		}
	} else {
		mr.autoMerge, mr.mergeUser, mr.mergeLevel, mr.updatedAt = true, &who.user, who.level, s.now()
		mr.removeSource = mr.removeSource || removeSource
		s.systemNote(mr, who.user, "enabled an automatic merge when the pipeline for "+mr.sha+" succeeds")
		s.fireMR(p, mr, "update", who.user)
	}
	s.notify()
	writeJSON(w, http.StatusOK, s.mrEntity(p, mr, who.level))
}

// merge merges mr into its target as MergeRequests::MergeService does: a
// merge commit (after a squash commit when squash is set) pushed to the
// target (see pushed: its Push Hook and pipeline), the merge request
// merged with a system note and a Merge Request Hook, the source branch
// removed when asked. It returns false on a conflict. Callers hold s.mu.
func (s *Server) merge(p *project, mr *mergeRequest, who actor, removeSource bool, message string) bool {
	by := who.user
	files, ok := p.mergedFiles(mr)
	if !ok {
		return false
	}
	srcHead, tgtHead := p.branches[mr.source], p.branches[mr.target]
	second := srcHead
	now := s.now()
	if mr.squash {
		// One commit of the source's changes on the merge base.
		base := p.mergeBase(srcHead, tgtHead)
		sha := s.inst.newSHA(p.path + "\x00squash")
		sq := &commit{sha: sha, parent: base, message: mr.title,
			files: p.commits[srcHead].files, createdAt: now, seq: s.inst.nextCommit, pusher: &by}
		p.commits[sq.sha] = sq
		second, mr.squashCommit = sq.sha, sq.sha
	}
	if message == "" {
		message = fmt.Sprintf("Merge branch '%s' into '%s'\n\n%s\n\nSee merge request %s!%d", mr.source, mr.target, mr.title, p.path, mr.iid)
	}
	c := s.inst.commitFiles(p, mr.target, files, message, now)
	c.mergeParent, c.pusher = second, &by
	mr.state, mr.mergedAt, mr.mergedBy, mr.updatedAt = mrMerged, now, &by, now
	mr.mergeCommit, mr.sha = c.sha, srcHead
	mr.autoMerge = false
	s.systemNote(mr, by, "merged")
	s.fireMR(p, mr, "merge", by)
	s.pushed(p, mr.target, tgtHead, c)
	if removeSource || mr.removeSource {
		_, _ = s.removeBranch(p, mr.source, who)
	}
	return true
}

// refreshMR follows a push of head to mr's source branch
// (MergeRequests::RefreshService): its head moves, a system note lists the
// new commits, and an automatic merge is aborted. Callers hold s.mu.
func (s *Server) refreshMR(p *project, mr *mergeRequest, before string, head *commit) {
	mr.sha, mr.updatedAt = head.sha, s.now()
	n := len(p.commitsBetween(before, head.sha))
	noun := "commit"
	if n != 1 {
		noun = "commits"
	}
	s.systemNote(mr, head.pusherOf(), fmt.Sprintf("added %d %s", n, noun))
	if mr.autoMerge {
		mr.autoMerge, mr.mergeUser = false, nil
		s.systemNote(mr, head.pusherOf(), "aborted the automatic merge because source branch was updated")
	}
	s.fireMR(p, mr, "update", head.pusherOf())
}

// startMRPipeline starts a merge request pipeline of mr's head. Callers
// hold s.mu.
func (s *Server) startMRPipeline(p *project, mr *mergeRequest, by fakeUser) *pipeline {
	pl := s.newPipeline(p, "refs/merge-requests/"+strconv.FormatInt(mr.iid, 10)+"/head", mr.sha, "merge_request_event", nil)
	pl.mrIID, pl.user = mr.iid, &by
	s.startRun(p, pl)
	return pl
}

// autoMerge acts on a finished pipeline that is an automatic merge's head
// pipeline: success merges, anything else aborts the automatic merge.
// Called by setStatus; callers hold s.mu.
func (s *Server) autoMerge(pl *pipeline) {
	p, ok := s.inst.projects[pl.projectID]
	if !ok || !finished(pl.status) {
		return
	}
	for _, mr := range p.mrs {
		if !mr.autoMerge || mr.state != mrOpened {
			continue
		}
		if hp := s.headPipeline(p, mr); hp != pl {
			continue
		}
		by := *mr.mergeUser
		if pl.status == "success" && s.mergeableState(p, mr, false) && s.merge(p, mr, actor{by, mr.mergeLevel}, false, "") {
			continue
		}
		mr.autoMerge, mr.mergeUser = false, nil
		s.systemNote(mr, by, "aborted the automatic merge because the pipeline did not succeed")
	}
}

// sourceRef is the ref a Pipeline Hook names: the source branch of a
// merge request pipeline, else the pipeline's ref.
func (s *Server) sourceRef(p *project, pl *pipeline) string {
	if mr := p.mr(pl.mrIID); mr != nil {
		return mr.source
	}
	return pl.ref
}

// hookPipelineMRJSON is the merge_request object of a merge request
// pipeline's Pipeline Hook.
type hookPipelineMRJSON struct {
	ID                  int64  `json:"id"`
	IID                 int64  `json:"iid"`
	Title               string `json:"title"`
	SourceBranch        string `json:"source_branch"`
	SourceProjectID     int64  `json:"source_project_id"`
	TargetBranch        string `json:"target_branch"`
	TargetProjectID     int64  `json:"target_project_id"`
	State               string `json:"state"`
	MergeStatus         string `json:"merge_status"`
	DetailedMergeStatus string `json:"detailed_merge_status"`
	URL                 string `json:"url"`
}

// pipelineMR renders the merge_request object of pl's Pipeline Hook: nil
// unless pl is a merge request pipeline. Callers hold s.mu.
func (s *Server) pipelineMR(p *project, pl *pipeline) *hookPipelineMRJSON {
	mr := p.mr(pl.mrIID)
	if mr == nil {
		return nil
	}
	b := s.mrBasic(p, mr)
	return &hookPipelineMRJSON{
		ID: mr.id, IID: mr.iid, Title: mr.title, SourceBranch: mr.source, SourceProjectID: p.id,
		TargetBranch: mr.target, TargetProjectID: p.id, State: mr.state,
		MergeStatus: b.MergeStatus, DetailedMergeStatus: b.DetailedMergeStatus, URL: b.WebURL,
	}
}

// listMRPipelines is GET /projects/:id/merge_requests/:iid/pipelines: the
// merge request's pipelines (its own and its source branch's on its
// commits), newest first.
func (s *Server) listMRPipelines(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, ok := s.requestMR(w, r)
	if !ok {
		return
	}
	shas := p.ancestors(mr.sha)
	var list []*pipeline
	for _, pl := range s.inst.pipelines {
		if pl.projectID == p.id && (pl.mrIID == mr.iid || (pl.mrIID == 0 && !pl.tag && pl.ref == mr.source && shas[pl.sha])) {
			list = append(list, pl)
		}
	}
	slices.SortFunc(list, func(a, b *pipeline) int { return cmp.Compare(b.id, a.id) })
	page := paginate(s, w, r, list)
	out := make([]pipelineInfoJSON, 0, len(page))
	for _, pl := range page {
		out = append(out, s.pipelineInfo(pl))
	}
	writeJSON(w, http.StatusOK, out)
}

// ---- Merge Request Hook

// MergeRequestHook is the X-Gitlab-Event of a merge request event.
const MergeRequestHook = "Merge Request Hook"

type hookLabelJSON struct {
	ID          int64   `json:"id"`
	Title       string  `json:"title"`
	Color       string  `json:"color"`
	ProjectID   int64   `json:"project_id"`
	CreatedAt   string  `json:"created_at"`
	UpdatedAt   string  `json:"updated_at"`
	Template    bool    `json:"template"`
	Description *string `json:"description"`
	Type        string  `json:"type"`
	GroupID     *int64  `json:"group_id"`
}

type mrHookAttrsJSON struct {
	ID                          int64           `json:"id"`
	IID                         int64           `json:"iid"`
	TargetBranch                string          `json:"target_branch"`
	SourceBranch                string          `json:"source_branch"`
	SourceProjectID             int64           `json:"source_project_id"`
	AuthorID                    int64           `json:"author_id"`
	AssigneeIDs                 []int64         `json:"assignee_ids"`
	AssigneeID                  *int64          `json:"assignee_id"`
	ReviewerIDs                 []int64         `json:"reviewer_ids"`
	Title                       string          `json:"title"`
	CreatedAt                   string          `json:"created_at"`
	UpdatedAt                   string          `json:"updated_at"`
	LastEditedAt                *string         `json:"last_edited_at"`
	LastEditedByID              *int64          `json:"last_edited_by_id"`
	MilestoneID                 *int64          `json:"milestone_id"`
	StateID                     int             `json:"state_id"`
	State                       string          `json:"state"`
	BlockingDiscussionsResolved bool            `json:"blocking_discussions_resolved"`
	WorkInProgress              bool            `json:"work_in_progress"`
	Draft                       bool            `json:"draft"`
	FirstContribution           bool            `json:"first_contribution"`
	MergeStatus                 string          `json:"merge_status"`
	TargetProjectID             int64           `json:"target_project_id"`
	Description                 string          `json:"description"`
	PreparedAt                  string          `json:"prepared_at"`
	TotalTimeSpent              int             `json:"total_time_spent"`
	TimeChange                  int             `json:"time_change"`
	HumanTotalTimeSpent         *string         `json:"human_total_time_spent"`
	HumanTimeChange             *string         `json:"human_time_change"`
	HumanTimeEstimate           *string         `json:"human_time_estimate"`
	URL                         string          `json:"url"`
	Source                      pushProjectJSON `json:"source"`
	Target                      pushProjectJSON `json:"target"`
	LastCommit                  *hookCommitJSON `json:"last_commit"`
	Labels                      []hookLabelJSON `json:"labels"`
	Action                      string          `json:"action"`
	DetailedMergeStatus         string          `json:"detailed_merge_status"`
}

type mrHookRepositoryJSON struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Description string `json:"description"`
	Homepage    string `json:"homepage"`
}

type mrHookEventJSON struct {
	ObjectKind       string               `json:"object_kind"`
	EventType        string               `json:"event_type"`
	User             hookUserJSON         `json:"user"`
	Project          pushProjectJSON      `json:"project"`
	Repository       mrHookRepositoryJSON `json:"repository"`
	ObjectAttributes mrHookAttrsJSON      `json:"object_attributes"`
	Labels           []hookLabelJSON      `json:"labels"`
	Changes          map[string]any       `json:"changes"`
	Assignees        []hookUserJSON       `json:"assignees"`
	Reviewers        []hookUserJSON       `json:"reviewers"`
}

// mrStateIDs are GitLab's state ids of merge requests.
var mrStateIDs = map[string]int{mrOpened: 1, mrClosed: 2, mrMerged: 3}

// fireMR posts a Merge Request Hook of mr with action (open, close,
// reopen, update, merge) to the project's merge request hooks. changes
// carries only updated_at. Callers hold s.mu.
func (s *Server) fireMR(p *project, mr *mergeRequest, action string, by fakeUser) {
	if !s.hooked(p) {
		return
	}
	hp := s.projectHookAttrs(p)
	proj := pushProjectJSON{hookProjectJSON: hp, Homepage: hp.WebURL, URL: hp.GitSSHURL, SSHURL: hp.GitSSHURL, HTTPURL: hp.GitHTTPURL}
	b := s.mrBasic(p, mr)
	labels := []hookLabelJSON{}
	for i, l := range mr.labels {
		labels = append(labels, hookLabelJSON{ID: int64(i + 1), Title: l, Color: "#6699cc", ProjectID: p.id,
			CreatedAt: hookTime(p.createdAt), UpdatedAt: hookTime(p.createdAt), Type: "ProjectLabel"})
	}
	attrs := mrHookAttrsJSON{
		ID: mr.id, IID: mr.iid, TargetBranch: mr.target, SourceBranch: mr.source, SourceProjectID: p.id,
		AuthorID: mr.author.id, AssigneeIDs: []int64{}, ReviewerIDs: []int64{}, Title: mr.title,
		CreatedAt: hookTime(mr.createdAt), UpdatedAt: hookTime(mr.updatedAt),
		StateID: mrStateIDs[mr.state], State: mr.state, BlockingDiscussionsResolved: true,
		WorkInProgress: mr.draft(), Draft: mr.draft(), MergeStatus: b.MergeStatus, TargetProjectID: p.id,
		Description: mr.desc, PreparedAt: hookTime(mr.createdAt), URL: b.WebURL,
		Source: proj, Target: proj, Labels: labels, Action: action, DetailedMergeStatus: b.DetailedMergeStatus,
	}
	if c, ok := p.commits[mr.sha]; ok {
		hc := s.hookCommit(p, c)
		attrs.LastCommit = &hc
	}
	body, err := json.Marshal(mrHookEventJSON{
		ObjectKind: "merge_request", EventType: "merge_request", User: by.hook(s.URL), Project: proj,
		Repository:       mrHookRepositoryJSON{Name: hp.Name, URL: hp.GitHTTPURL, Description: hp.Description, Homepage: hp.WebURL},
		ObjectAttributes: attrs, Labels: labels,
		Changes:   map[string]any{"updated_at": map[string]string{"previous": hookTime(mr.createdAt), "current": hookTime(mr.updatedAt)}},
		Assignees: []hookUserJSON{}, Reviewers: []hookUserJSON{},
	})
	if err != nil {
		panic("gitlabtest: render merge request event: " + err.Error())
	}
	s.fire(p, MergeRequestHook, "merge_requests_events", nil, body, Delivery{Ref: "refs/heads/" + mr.source})
}

// ---- admin

// MergeRequest is a merge request as the fake stores it, for assertions.
type MergeRequest struct {
	IID                  int64
	Title, Description   string
	SourceBranch         string
	TargetBranch         string
	State                string // opened, closed, merged
	Labels               []string
	SHA                  string // head commit
	MergeCommitSHA       string
	AutoMerge            bool
	RemoveSourceBranch   bool
	DetailedMergeStatus  string
	Notes                []Note
	HeadPipelineID       int64
	HeadPipelineStatus   string
	MergedAt, ClosedAt   time.Time
	CreatedAt, UpdatedAt time.Time
}

// MergeRequests returns a project's merge requests by iid.
func (s *Server) MergeRequests(projectPath string) []MergeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil
	}
	out := make([]MergeRequest, 0, len(p.mrs))
	for _, mr := range p.mrs {
		m := MergeRequest{
			IID: mr.iid, Title: mr.title, Description: mr.desc, SourceBranch: mr.source, TargetBranch: mr.target,
			State: mr.state, Labels: slices.Clone(mr.labels), SHA: mr.sha, MergeCommitSHA: mr.mergeCommit,
			AutoMerge: mr.autoMerge, RemoveSourceBranch: mr.removeSource, DetailedMergeStatus: s.detailedStatus(p, mr),
			MergedAt: mr.mergedAt, ClosedAt: mr.closedAt, CreatedAt: mr.createdAt, UpdatedAt: mr.updatedAt,
		}
		for _, n := range mr.notes {
			m.Notes = append(m.Notes, n.export())
		}
		if hp := s.headPipeline(p, mr); hp != nil {
			m.HeadPipelineID, m.HeadPipelineStatus = hp.id, hp.status
		}
		out = append(out, m)
	}
	return out
}

func (s *Server) adminMR(projectPath string, iid int64, what string) (*project, *mergeRequest, error) {
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil, nil, fmt.Errorf("%s merge request !%d of %s: project not found", what, iid, projectPath)
	}
	mr := p.mr(iid)
	if mr == nil {
		return nil, nil, fmt.Errorf("%s merge request !%d of %s: not found", what, iid, projectPath)
	}
	return p, mr, nil
}

// MergeMR merges an open merge request as a developer with the right to
// would in GitLab's UI: at once, whatever its pipeline, unless it has a
// conflict.
func (s *Server) MergeMR(projectPath string, iid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, err := s.adminMR(projectPath, iid, "merge")
	if err != nil {
		return err
	}
	if mr.state != mrOpened || p.branches[mr.source] == "" {
		return fmt.Errorf("merge merge request !%d of %s: it is %s", iid, projectPath, mr.state)
	}
	if !s.merge(p, mr, developer, false, "") {
		return fmt.Errorf("merge merge request !%d of %s: conflict", iid, projectPath)
	}
	s.notify()
	return nil
}

// OpenMR opens a merge request of source into target as a developer
// would (POST …/merge_requests): a Merge Request Hook, and with
// Behavior.OnMergeRequest its pipeline. It returns its iid.
func (s *Server) OpenMR(projectPath, source, target, title string, labels ...string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return 0, fmt.Errorf("open merge request in %s: project not found", projectPath)
	}
	if p.branches[source] == "" || p.branches[target] == "" || source == target {
		return 0, fmt.Errorf("open merge request %s into %s in %s: no such branches", source, target, projectPath)
	}
	now := s.now()
	mr := &mergeRequest{
		id: s.inst.id(), iid: int64(len(p.mrs)) + 1, title: title, source: source, target: target,
		state: mrOpened, author: devUser, sha: p.branches[source], createdAt: now, updatedAt: now,
		labels: slices.Clone(labels),
	}
	if o := p.openConflict(mr); o != nil {
		return 0, fmt.Errorf("open merge request %s into %s in %s: !%d is open", source, target, projectPath, o.iid)
	}
	p.mrs = append(p.mrs, mr)
	s.fireMR(p, mr, "open", devUser)
	if b, _ := s.behaviorOf(p); b.OnMergeRequest {
		s.startMRPipeline(p, mr, devUser)
	}
	s.notify()
	return mr.iid, nil
}

// CloseMR closes an open merge request as a developer would.
func (s *Server) CloseMR(projectPath string, iid int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, err := s.adminMR(projectPath, iid, "close")
	if err != nil {
		return err
	}
	if mr.state != mrOpened {
		return fmt.Errorf("close merge request !%d of %s: it is %s", iid, projectPath, mr.state)
	}
	s.closeMR(p, mr, devUser)
	s.notify()
	return nil
}

// PushToMR pushes a commit setting file to content to the merge request's
// source branch, as a developer would (see SetFileOn): its head moves, an
// automatic merge is aborted, and with Behavior.OnMergeRequest a new
// merge request pipeline starts. It returns the commit id.
func (s *Server) PushToMR(projectPath string, iid int64, file, content string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, err := s.adminMR(projectPath, iid, "push to")
	if err != nil {
		return "", err
	}
	if _, ok := p.branches[mr.source]; !ok {
		return "", fmt.Errorf("push to merge request !%d of %s: source branch %s is gone", iid, projectPath, mr.source)
	}
	return s.pushTo(p, mr.source, "Update "+file, func(files map[string]string) { files[file] = content })
}

// SetPipelineMustSucceed sets the project's "Pipelines must succeed"
// merge check (only_allow_merge_if_pipeline_succeeds).
func (s *Server) SetPipelineMustSucceed(projectPath string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("set merge checks of %s: project not found", projectPath)
	}
	p.pipelineMustSucceed = on
	return nil
}
