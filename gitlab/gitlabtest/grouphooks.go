package gitlabtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Group hooks (GitLab Premium): GET/POST /groups/:id/hooks, GET/PUT/DELETE
// /groups/:id/hooks/:hook_id and POST /groups/:id/hooks/:hook_id/test/:trigger,
// for the Owner role. A group hook gets the events of every project of the
// group and its subgroups (fire).
//
// Access, as the fake answers it: an unknown group is 404 "404 Group Not
// Found"; an instance without Premium (SetPremium) answers 404 "404 Not
// Found", as a Free instance has no such endpoint; a group where the
// token's user is not Owner (SetGroupOwner) answers 403 "403 Forbidden".

// SetPremium makes the instance Premium (group hooks exist) or Free (the
// default: they do not).
func (s *Server) SetPremium(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.premium = on
}

// SetGroupOwner says whether the token's user has the Owner role on the
// group (and, as GitLab inherits it, on its subgroups). By default it does
// everywhere.
func (s *Server) SetGroupOwner(groupPath string, owner bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.notOwner == nil {
		s.notOwner = map[string]bool{}
	}
	s.notOwner[strings.ToLower(groupPath)] = !owner
}

// owner says whether the token's user is Owner of g: not when g or one of
// its ancestors was denied and no nearer group granted it. Callers hold
// s.mu.
func (s *Server) owner(g *group) bool {
	for cur := g; cur != nil; cur = s.inst.groups[cur.parentID] {
		if denied, ok := s.notOwner[strings.ToLower(cur.path)]; ok {
			return !denied
		}
	}
	return true
}

// ancestors are the groups a project is in: its namespace, then up to the
// top-level group. Callers hold s.mu.
func (in *instance) ancestors(p *project) []*group {
	var out []*group
	g, ok := in.groupPath[strings.ToLower(p.namespace())]
	for ok {
		out = append(out, g)
		g, ok = in.groups[g.parentID]
	}
	return out
}

// GroupHooks returns the hooks of a group ordered by id, tokens included.
func (s *Server) GroupHooks(groupPath string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.inst.findGroup(groupPath)
	if !ok {
		return nil
	}
	out := make([]Hook, 0, len(g.hooks))
	for _, h := range g.hooks {
		out = append(out, h.export())
	}
	return out
}

// requestGroup finds the group of the request's :id and checks that group
// hooks may be used there, answering as GitLab does when not. The caller
// holds s.mu.
func (s *Server) requestGroup(w http.ResponseWriter, r *http.Request) (*group, bool) {
	g, ok := s.inst.findGroup(r.PathValue("id"))
	switch {
	case !ok:
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
	case !s.premium:
		writeMessage(w, http.StatusNotFound, "404 Not Found")
	case !s.owner(g):
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
	default:
		return g, true
	}
	return nil, false
}

func (s *Server) findGroupHook(w http.ResponseWriter, r *http.Request) (*group, int, bool) {
	g, ok := s.requestGroup(w, r)
	if !ok {
		return nil, 0, false
	}
	id, err := strconv.ParseInt(r.PathValue("hook_id"), 10, 64)
	if err == nil {
		for i, h := range g.hooks {
			if h.id == id {
				return g, i, true
			}
		}
	}
	writeMessage(w, http.StatusNotFound, "404 Not found")
	return nil, 0, false
}

// groupHookBody is a project hook's body with group_id for project_id.
func (s *Server) groupHookBody(g *group, h *hook) map[string]any {
	out := s.hookBody(0, h, s.now())
	delete(out, "project_id")
	out["group_id"] = g.id
	out["subgroup_events"] = false
	return out
}

func (s *Server) listGroupHooks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.requestGroup(w, r)
	if !ok {
		return
	}
	page := paginate(s, w, r, g.hooks)
	out := make([]map[string]any, 0, len(page))
	for _, h := range page {
		out = append(out, s.groupHookBody(g, h))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getGroupHook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, i, ok := s.findGroupHook(w, r); ok {
		writeJSON(w, http.StatusOK, s.groupHookBody(g, g.hooks[i]))
	}
}

func (s *Server) addGroupHook(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.requestGroup(w, r)
	if !ok {
		return
	}
	h, ok := s.newHook(w, prm)
	if !ok {
		return
	}
	g.hooks = append(g.hooks, h)
	writeJSON(w, http.StatusCreated, s.groupHookBody(g, h))
}

func (s *Server) editGroupHook(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, i, ok := s.findGroupHook(w, r)
	if !ok {
		return
	}
	if s.updateHook(w, g.hooks[i], prm) {
		writeJSON(w, http.StatusOK, s.groupHookBody(g, g.hooks[i]))
	}
}

func (s *Server) deleteGroupHook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, i, ok := s.findGroupHook(w, r)
	if !ok {
		return
	}
	g.hooks = slices.Delete(g.hooks, i, i+1)
	w.WriteHeader(http.StatusNoContent)
}

// testGroupHook is POST /groups/:id/hooks/:hook_id/test/:trigger: as the
// project test, synchronously, with a Push Hook of the group's first
// project (by id, subgroups included) that has a commit. Only push_events
// is implemented.
func (s *Server) testGroupHook(w http.ResponseWriter, r *http.Request) {
	trigger := r.PathValue("trigger")
	if trigger != "push_events" {
		badRequest(w, "gitlabtest: only the push_events test is implemented")
		return
	}
	s.mu.Lock()
	g, i, ok := s.findGroupHook(w, r)
	if !ok {
		s.mu.Unlock()
		return
	}
	h := g.hooks[i]
	var p *project
	prefix := strings.ToLower(g.path) + "/"
	for _, cand := range s.inst.projects {
		if strings.HasPrefix(strings.ToLower(cand.path), prefix) && !cand.emptyRepo && (p == nil || cand.id < p.id) {
			if _, ok := cand.resolve(cand.defaultBranch); ok {
				p = cand
			}
		}
	}
	if p == nil {
		s.mu.Unlock()
		writeMessage(w, http.StatusUnprocessableEntity, "Ensure the group has a project with at least one commit.")
		return
	}
	c, _ := p.resolve(p.defaultBranch)
	var before map[string]string
	if parent, ok := p.commits[c.parent]; ok {
		before = parent.files
	}
	body, err := json.Marshal(s.pushEvent(p, p.defaultBranch, c, diffFiles(before, c.files)))
	if err != nil {
		s.mu.Unlock()
		panic("gitlabtest: render push event: " + err.Error())
	}
	d := &Delivery{
		ProjectID: p.id, GroupID: g.id, HookID: h.id, Event: PushHook, URL: h.url,
		IdempotencyKey: newUUID(), EventUUID: newUUID(), Ref: "refs/heads/" + p.defaultBranch,
		Payload: body, QueuedAt: s.now(),
	}
	s.enqueue(d)
	s.mu.Unlock()
	s.answerTest(w, r, d)
}

// AddGroupHook installs a group hook directly (as if its Owner made it in
// the UI), whatever the tier, and returns its id.
func (s *Server) AddGroupHook(groupPath string, h Hook) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.inst.findGroup(groupPath)
	if !ok {
		return 0, fmt.Errorf("add hook to group %s: not found", groupPath)
	}
	nh := &hook{
		id: s.inst.id(), url: h.URL, token: h.Token, signingToken: h.SigningToken, events: map[string]bool{},
		branchFilter: h.PushEventsBranchFilter, enableSSL: h.EnableSSLVerification,
		alertStatus: cmp.Or(h.AlertStatus, "executable"), disabledUntil: h.DisabledUntil, createdAt: s.now(),
	}
	for _, e := range h.Events {
		if !slices.Contains(hookEvents, e) {
			return 0, fmt.Errorf("add hook to group %s: unknown event %q", groupPath, e)
		}
		nh.events[e] = true
	}
	g.hooks = append(g.hooks, nh)
	return nh.id, nil
}
