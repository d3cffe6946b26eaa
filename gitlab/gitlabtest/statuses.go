package gitlabtest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// External commit statuses, as GitLab keeps them (Ci::CreateCommitStatusService,
// GenericCommitStatus, CommitStatus's state machine):
//
//   - POST /projects/:id/statuses/:sha (Developer) adds an external job
//     to the newest pipeline of that commit and ref (or pipeline_id), or
//     to a new pipeline of source "external" when there is none; without
//     ref, the newest pipeline's ref, else the first branch holding the
//     commit.
//   - A status with the same name (alias context; default "default"), ref
//     and user that is still pending or running is updated; otherwise a
//     new one is made, and older ones of that name become retried (GET
//     …/statuses shows them with all=true only).
//   - The state moves by GitLab's events: pending is enqueue (from
//     created), running is enqueue then run (from pending), success,
//     failed (drop), canceled (cancel) and skipped (skip, from created or
//     pending). An event that does not apply answers 400 {"message":
//     "Cannot transition status via :run from :running (Reason(s): Status
//     cannot transition via \"run\")"}.
//   - The pipeline's status is then recomputed from its jobs' statuses as
//     GitLab's Ci::Status::Composite does (the pipeline's own jobs plus the
//     external ones not retried), and a Pipeline Hook is sent when it
//     changed: a pending or running status on a finished pipeline makes it
//     running again, and its final state follows the statuses (failed
//     fails it unless the job may fail).
//
// GET …/repository/commits/:sha/statuses lists the external statuses only,
// not the simulated pipelines' own jobs.

// commitStates are the states POST /projects/:id/statuses/:sha accepts.
var commitStates = []string{"pending", "running", "success", "failed", "canceled", "skipped"}

// statusState holds the external statuses; guarded by Server.mu.
type statusState struct {
	nextID     int64
	byPipeline map[int64][]*commitStatus
	// own is the status a pipeline's own jobs give it (what setStatus was
	// last told), "" for an external pipeline, which has none.
	own map[int64]string
	// refused counts the posts answered 400 for a transition GitLab's
	// state machine does not allow.
	refused int
}

type commitStatus struct {
	id, projectID, pipelineID int64
	sha, ref, name, status    string
	targetURL, description    *string
	coverage                  *float64
	allowFailure              bool
	user                      fakeUser
	retried                   bool
	createdAt                 time.Time
	startedAt, finishedAt     time.Time
}

// CommitStatus is an external commit status as the fake stores it.
type CommitStatus struct {
	ID, PipelineID         int64
	SHA, Ref, Name, Status string
	TargetURL, Description string
	Username               string // who posted it
	// Retried: a newer status of the same name replaced it.
	Retried                          bool
	CreatedAt, StartedAt, FinishedAt time.Time
}

func (cs *commitStatus) export() CommitStatus {
	return CommitStatus{ID: cs.id, PipelineID: cs.pipelineID, SHA: cs.sha, Ref: cs.ref, Name: cs.name, Status: cs.status,
		TargetURL: deref(cs.targetURL), Description: deref(cs.description), Username: cs.user.username,
		Retried: cs.retried, CreatedAt: cs.createdAt, StartedAt: cs.startedAt, FinishedAt: cs.finishedAt}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Statuses returns the external statuses of a commit of a project
// (retried ones included), oldest first.
func (s *Server) Statuses(projectPath, sha string) []CommitStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil
	}
	var out []CommitStatus
	for _, list := range s.statuses.byPipeline {
		for _, cs := range list {
			if cs.projectID == p.id && cs.sha == sha {
				out = append(out, cs.export())
			}
		}
	}
	slices.SortFunc(out, func(a, b CommitStatus) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// RefusedStatusTransitions counts the status posts answered 400 because
// GitLab's state machine does not allow the transition ("Cannot
// transition status via :run from :running"): a client that follows the
// state machine makes none.
func (s *Server) RefusedStatusTransitions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses.refused
}

// withExternal records status as what pl's own jobs say and returns the
// pipeline's status with its external statuses counted (Composite).
// Callers hold s.mu.
func (st *statusState) withExternal(pl *pipeline, status string) string {
	list := st.byPipeline[pl.id]
	if len(list) == 0 {
		return status
	}
	st.own[pl.id] = status
	return st.composite(pl)
}

// composite is Gitlab::Ci::Status::Composite#status over pl's own status
// and its latest external statuses. Callers hold s.mu.
func (st *statusState) composite(pl *pipeline) string {
	set := map[string]bool{}
	if own := st.own[pl.id]; own != "" {
		set[own] = true
	}
	for _, cs := range st.byPipeline[pl.id] {
		switch {
		case cs.retried:
		case cs.allowFailure && (cs.status == "failed" || cs.status == "canceled"):
			set["success_with_warnings"] = true
		case cs.allowFailure && cs.status == "manual":
			set["ignored"] = true
		default:
			set[cs.status] = true
		}
	}
	only := func(names ...string) bool {
		n := 0
		for _, name := range names {
			if set[name] {
				n++
			}
		}
		return n > 0 && n == len(set)
	}
	anyOf := func(names ...string) bool { return slices.ContainsFunc(names, func(n string) bool { return set[n] }) }
	switch {
	case len(set) == 0:
		return pl.status
	case only("skipped", "ignored"):
		return "skipped"
	case only("success", "skipped", "success_with_warnings", "ignored"):
		return "success"
	case only("created", "success_with_warnings", "ignored"):
		return "created"
	case only("preparing", "success_with_warnings", "ignored"):
		return "preparing"
	case only("canceled", "success", "skipped", "success_with_warnings", "ignored"):
		return "canceled"
	case only("pending", "created", "skipped", "success_with_warnings", "ignored"):
		return "pending"
	case anyOf("running", "pending"):
		return "running"
	case anyOf("waiting_for_resource"):
		return "waiting_for_resource"
	case anyOf("manual"):
		return "manual"
	case anyOf("scheduled"):
		return "scheduled"
	case anyOf("preparing"):
		return "preparing"
	case anyOf("created"):
		return "running"
	}
	return "failed"
}

// transitionError is the 400 message of GitLab's state machine for an
// event that does not apply (StateMachines::InvalidTransition).
func transitionError(event, from string) string {
	return fmt.Sprintf("Cannot transition status via :%s from :%s (Reason(s): Status cannot transition via %q)", event, from, event)
}

// applyState moves cs to state by GitLab's events (Ci::CreateCommitStatusService#apply_job_state!),
// or says why it cannot.
func applyState(cs *commitStatus, state string, now time.Time) string {
	from := cs.status
	to := ""
	switch state {
	case "pending": // enqueue!
		if !slices.Contains([]string{"created", "skipped", "manual", "scheduled"}, from) {
			return transitionError("enqueue", from)
		}
		to = "pending"
	case "running": // enqueue (allowed to fail), then run!
		if slices.Contains([]string{"created", "skipped", "manual", "scheduled"}, from) {
			from = "pending"
		}
		if from != "pending" {
			return transitionError("run", from)
		}
		to = "running"
	case "success":
		if !slices.Contains([]string{"created", "waiting_for_resource", "preparing", "pending", "running"}, from) {
			return transitionError("success", from)
		}
		to = "success"
	case "failed": // drop!
		if !slices.Contains([]string{"created", "waiting_for_resource", "preparing", "pending", "running", "manual", "scheduled"}, from) {
			return transitionError("drop", from)
		}
		to = "failed"
	case "canceled": // cancel!
		if !slices.Contains([]string{"created", "waiting_for_resource", "preparing", "pending", "running", "scheduled", "manual"}, from) {
			return transitionError("cancel", from)
		}
		to = "canceled"
	case "skipped": // skip!
		if !slices.Contains([]string{"created", "waiting_for_resource", "preparing", "pending"}, from) {
			return transitionError("skip", from)
		}
		to = "skipped"
	}
	if to == "running" && cs.startedAt.IsZero() {
		cs.startedAt = now
	}
	if to == "success" || to == "failed" || to == "canceled" {
		cs.finishedAt = now
	}
	cs.status = to
	return ""
}

// containsCommit says whether branch's history holds sha. Callers hold s.mu.
func containsCommit(p *project, branch, sha string) bool {
	for cur := p.branches[branch]; cur != ""; {
		if cur == sha {
			return true
		}
		c, ok := p.commits[cur]
		if !ok {
			return false
		}
		cur = c.parent
	}
	return false
}

// postStatus is POST /projects/:id/statuses/:sha.
func (s *Server) postStatus(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	state, ok := prm.str("state")
	if !ok {
		badRequest(w, "state is missing")
		return
	}
	if !slices.Contains(commitStates, state) {
		badRequest(w, "state does not have a valid value")
		return
	}
	var pipelineID int64
	if v, ok := prm.str("pipeline_id"); ok {
		if pipelineID, err = strconv.ParseInt(v, 10, 64); err != nil {
			badRequest(w, "pipeline_id is invalid")
			return
		}
	}
	var coverage *float64
	if v, ok := prm.str("coverage"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			badRequest(w, "coverage is invalid")
			return
		}
		coverage = &f
	}
	optional := func(key string) *string {
		if v, ok := prm.str(key); ok {
			return &v
		}
		return nil
	}
	targetURL, description := optional("target_url"), optional("description")
	for key, v := range map[string]*string{"target_url": targetURL, "description": description} {
		if v != nil && len(*v) > 255 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": map[string][]string{key: {"is too long (maximum is 255 characters)"}}})
			return
		}
	}
	name := cmp.Or(deref(optional("name")), deref(optional("context")), "default")
	paramRef := deref(optional("ref"))

	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	c, ok := p.resolve(r.PathValue("sha"))
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Commit Not Found")
		return
	}
	sha := c.sha
	// first_matching_pipeline: the newest of the commit (and ref, and id).
	var match *pipeline
	for _, pl := range s.inst.pipelines {
		if pl.projectID != p.id || pl.sha != sha || (paramRef != "" && pl.ref != paramRef) || (pipelineID != 0 && pl.id != pipelineID) {
			continue
		}
		if match == nil || pl.id > match.id {
			match = pl
		}
	}
	if pipelineID != 0 && match == nil {
		writeMessage(w, http.StatusNotFound, "404 Pipeline for pipeline_id, sha and ref Not Found")
		return
	}
	ref := paramRef
	if ref == "" && match != nil {
		ref = match.ref
	}
	if ref == "" {
		var names []string
		for b := range p.branches {
			if containsCommit(p, b, sha) {
				names = append(names, b)
			}
		}
		if len(names) == 0 {
			writeMessage(w, http.StatusNotFound, "404 References for commit Not Found")
			return
		}
		slices.Sort(names)
		ref = names[0]
	}
	st := &s.statuses
	if st.byPipeline == nil {
		st.byPipeline = map[int64][]*commitStatus{}
		st.own = map[int64]string{}
	}
	user := callerOf(r).user
	pl := match
	if pl == nil {
		pl = s.newPipeline(p, ref, sha, "external", nil)
		pl.user = &user
		st.own[pl.id] = ""
	} else if _, ok := st.own[pl.id]; !ok {
		st.own[pl.id] = pl.status
	}
	// An existing status is one still pending or running, of this name,
	// ref and user.
	var cs *commitStatus
	for _, old := range st.byPipeline[pl.id] {
		if !old.retried && old.name == name && old.ref == ref && old.user.id == user.id &&
			(old.status == "pending" || old.status == "running") {
			cs = old
		}
	}
	now := s.now()
	next := commitStatus{projectID: p.id, pipelineID: pl.id, sha: sha, ref: ref, name: name, status: "created",
		user: user, createdAt: now}
	if cs != nil {
		next = *cs
	}
	if targetURL != nil {
		next.targetURL = targetURL
	}
	if description != nil {
		next.description = description
	}
	if coverage != nil {
		next.coverage = coverage
	}
	if msg := applyState(&next, state, now); msg != "" {
		st.refused++
		writeMessage(w, http.StatusBadRequest, msg)
		return
	}
	if cs == nil {
		st.nextID++
		next.id = 5000 + st.nextID
		cs = &next
		for _, old := range st.byPipeline[pl.id] {
			if old.name == name {
				old.retried = true
			}
		}
		st.byPipeline[pl.id] = append(st.byPipeline[pl.id], cs)
	} else {
		*cs = next
	}
	s.setStatus(pl, st.own[pl.id])
	s.notify()
	writeJSON(w, http.StatusCreated, s.statusJSON(cs))
}

type commitStatusJSON struct {
	ID           int64    `json:"id"`
	SHA          string   `json:"sha"`
	Ref          string   `json:"ref"`
	Status       string   `json:"status"`
	Name         string   `json:"name"`
	TargetURL    *string  `json:"target_url"`
	Description  *string  `json:"description"`
	CreatedAt    string   `json:"created_at"`
	StartedAt    *string  `json:"started_at"`
	FinishedAt   *string  `json:"finished_at"`
	AllowFailure bool     `json:"allow_failure"`
	Coverage     *float64 `json:"coverage"`
	PipelineID   int64    `json:"pipeline_id"`
	Author       userJSON `json:"author"`
}

func (s *Server) statusJSON(cs *commitStatus) commitStatusJSON {
	return commitStatusJSON{ID: cs.id, SHA: cs.sha, Ref: cs.ref, Status: cs.status, Name: cs.name,
		TargetURL: cs.targetURL, Description: cs.description, CreatedAt: gitlabTime(cs.createdAt),
		StartedAt: timePtr(cs.startedAt), FinishedAt: timePtr(cs.finishedAt), AllowFailure: cs.allowFailure,
		Coverage: cs.coverage, PipelineID: cs.pipelineID, Author: cs.user.rest(s.URL)}
}

// listStatuses is GET /projects/:id/repository/commits/:sha/statuses with
// ref, name, stage, pipeline_id, all, order_by (id, pipeline_id), sort
// (default asc) and pagination.
func (s *Server) listStatuses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	c, ok := p.resolve(r.PathValue("sha"))
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Commit Not Found")
		return
	}
	q := r.URL.Query()
	orderBy, sort := cmp.Or(q.Get("order_by"), "id"), cmp.Or(q.Get("sort"), "asc")
	if orderBy != "id" && orderBy != "pipeline_id" {
		badRequest(w, "order_by does not have a valid value")
		return
	}
	if sort != "asc" && sort != "desc" {
		badRequest(w, "sort does not have a valid value")
		return
	}
	all := q.Get("all") == "true"
	var list []*commitStatus
	for _, statuses := range s.statuses.byPipeline {
		for _, cs := range statuses {
			switch {
			case cs.projectID != p.id || cs.sha != c.sha,
				cs.retried && !all,
				q.Get("ref") != "" && cs.ref != q.Get("ref"),
				q.Get("name") != "" && cs.name != q.Get("name"),
				q.Get("stage") != "" && q.Get("stage") != "external",
				q.Get("pipeline_id") != "" && strconv.FormatInt(cs.pipelineID, 10) != q.Get("pipeline_id"):
				continue
			}
			list = append(list, cs)
		}
	}
	slices.SortFunc(list, func(a, b *commitStatus) int {
		k := cmp.Compare(a.id, b.id)
		if orderBy == "pipeline_id" {
			k = cmp.Or(cmp.Compare(a.pipelineID, b.pipelineID), k)
		}
		if sort == "desc" {
			return -k
		}
		return k
	})
	page := paginate(s, w, r, list)
	out := make([]commitStatusJSON, 0, len(page))
	for _, cs := range page {
		out = append(out, s.statusJSON(cs))
	}
	writeJSON(w, http.StatusOK, out)
}

// externalHook adjusts a Pipeline Hook payload for external statuses: a
// pipeline of source external has no builds of its own, and a pipeline
// with statuses has the stage "external". Callers hold s.mu.
func (s *Server) externalHook(pl *pipeline, attrs *pipelineAttrsJSON, builds *[]hookBuildJSON) {
	if pl.source == "external" {
		*builds = []hookBuildJSON{}
		attrs.Stages = []string{}
	}
	if len(s.statuses.byPipeline[pl.id]) > 0 && !slices.Contains(attrs.Stages, "external") {
		attrs.Stages = append(attrs.Stages, "external")
	}
}
