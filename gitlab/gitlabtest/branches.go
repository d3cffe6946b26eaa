package gitlabtest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
)

// Branches and protected branches: GET/POST /projects/:id/repository/branches,
// GET/DELETE …/branches/:branch (API::Branches, Branches::CreateService,
// Branches::DeleteService), GET /projects/:id/protected_branches.

// branchJSON is API::Entities::Branch.
type branchJSON struct {
	Name               string     `json:"name"`
	Commit             commitJSON `json:"commit"`
	Merged             bool       `json:"merged"`
	Protected          bool       `json:"protected"`
	DevelopersCanPush  bool       `json:"developers_can_push"`
	DevelopersCanMerge bool       `json:"developers_can_merge"`
	CanPush            bool       `json:"can_push"`
	Default            bool       `json:"default"`
	WebURL             string     `json:"web_url"`
}

// branchEntity renders branch for a caller with this access level.
// merged says whether its head is in the default branch without being its
// head (Repository#merged_branch_names). Callers hold s.mu.
func (s *Server) branchEntity(p *project, name string, level int) branchJSON {
	sha := p.branches[name]
	def := p.branches[p.defaultBranch]
	developers := func(level func(*protectedBranch) int) bool {
		for _, pb := range p.protections(name) {
			if level(pb) == accessDeveloper {
				return true
			}
		}
		return false
	}
	return branchJSON{
		Name:               name,
		Commit:             s.commitEntity(p, p.commits[sha]),
		Merged:             name != p.defaultBranch && sha != def && p.ancestors(def)[sha],
		Protected:          p.isProtected(name),
		DevelopersCanPush:  developers(func(pb *protectedBranch) int { return pb.push }),
		DevelopersCanMerge: developers(func(pb *protectedBranch) int { return pb.merge }),
		CanPush:            p.canPush(level, name),
		Default:            name == p.defaultBranch,
		WebURL:             s.URL + "/" + p.path + "/-/tree/" + name,
	}
}

func (s *Server) getBranch(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	name := r.PathValue("branch")
	if _, ok := p.branches[name]; !ok {
		writeMessage(w, http.StatusNotFound, "404 Branch Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.branchEntity(p, name, s.actorOf(r, p).level))
}

// listBranches is GET /projects/:id/repository/branches: search (see
// refSearch), sort (name_asc, the default; updated_asc, updated_desc by
// the head commit's date), offset pagination. An empty repository has
// no branches.
func (s *Server) listBranches(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	sort := cmp.Or(q.Get("sort"), "name_asc")
	if !slices.Contains([]string{"name_asc", "updated_asc", "updated_desc"}, sort) {
		badRequest(w, "sort does not have a valid value")
		return
	}
	rs := newRefSearch(q.Get("search"))
	var names []string
	for name := range p.branches {
		if rs.match(name) {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if sort == "name_asc" {
			return cmp.Compare(a, b)
		}
		ca, cb := p.commits[p.branches[a]], p.commits[p.branches[b]]
		c := cmp.Or(ca.createdAt.Compare(cb.createdAt), cmp.Compare(ca.seq, cb.seq), cmp.Compare(a, b))
		if sort == "updated_desc" {
			return -c
		}
		return c
	})
	names = exactFirst(rs, names, func(n string) string { return n })
	page := paginate(s, w, r, names)
	out := make([]branchJSON, 0, len(page))
	for _, name := range page {
		out = append(out, s.branchEntity(p, name, s.actorOf(r, p).level))
	}
	writeJSON(w, http.StatusOK, out)
}

// postBranch is POST /projects/:id/repository/branches with branch and
// ref (a branch, tag or commit id): 201 and the branch, or 400 with
// Branches::CreateService's message. The new branch is pushed (a Push
// Hook; a pipeline with Behavior.OnPush).
func (s *Server) postBranch(w http.ResponseWriter, r *http.Request) {
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
	name, hasName := prm.str("branch")
	ref, hasRef := prm.str("ref")
	if missing := missingParams(hasName && name != "", "branch", hasRef && ref != "", "ref"); missing != "" {
		badRequest(w, missing)
		return
	}
	who := s.actorOf(r, p)
	if msg := s.createBranch(p, name, ref, who); msg != "" {
		writeMessage(w, http.StatusBadRequest, msg)
		return
	}
	writeJSON(w, http.StatusCreated, s.branchEntity(p, name, who.level))
}

// createBranch is Branches::CreateService: "" when the branch was made.
// Callers hold s.mu.
func (s *Server) createBranch(p *project, name, ref string, by actor) string {
	switch {
	case !validRefName(name):
		return msgBranchNameInvalid
	case p.branches[name] != "":
		return msgBranchExists
	}
	c, ok := p.resolve(ref)
	if !ok {
		return "Invalid reference name: " + ref
	}
	if p.isProtected(name) && !p.canMerge(by.level, name) && !p.canPush(by.level, name) {
		return msgCreateProtectedBranch
	}
	p.branches[name] = c.sha
	s.touch(p, s.now())
	s.firePush(p, "refs/heads/"+name, zeroSHA, c.sha, nil, by.user)
	if b, _ := s.behaviorOf(p); b.OnPush {
		pl := s.newPipeline(p, name, c.sha, "push", nil)
		pl.user = &by.user
		s.startRun(p, pl)
	}
	s.notify()
	return ""
}

// deleteBranch is DELETE /projects/:id/repository/branches/:branch: 204;
// 404 Branch Not Found; 400 for the default branch, and for a protected
// branch unless the token's user is a Maintainer (GitLab's branch
// checks). Open merge requests from the branch stay open.
func (s *Server) deleteBranch(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	name := r.PathValue("branch")
	if msg, status := s.removeBranch(p, name, s.actorOf(r, p)); status != http.StatusNoContent {
		writeMessage(w, status, msg)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// removeBranch deletes a branch as GitLab's delete service does, with the
// Push Hook of a deleted ref; it answers the status (204 when deleted)
// and the refusal. Callers hold s.mu.
func (s *Server) removeBranch(p *project, name string, by actor) (string, int) {
	sha, ok := p.branches[name]
	switch {
	case !ok:
		return "404 Branch Not Found", http.StatusNotFound
	case name == p.defaultBranch:
		return msgDeleteDefaultBranch, http.StatusBadRequest
	case p.isProtected(name) && by.level < accessMaintainer:
		return msgDeleteProtectedBranch, http.StatusBadRequest
	}
	delete(p.branches, name)
	s.firePush(p, "refs/heads/"+name, sha, zeroSHA, nil, by.user)
	s.notify()
	return "", http.StatusNoContent
}

type accessLevelJSON struct {
	ID                     int64  `json:"id"`
	AccessLevel            int    `json:"access_level"`
	AccessLevelDescription string `json:"access_level_description"`
	DeployKeyID            *int64 `json:"deploy_key_id"`
	UserID                 *int64 `json:"user_id"`
	GroupID                *int64 `json:"group_id"`
}

// protectedBranchJSON is API::Entities::ProtectedBranch.
type protectedBranchJSON struct {
	ID                        int64             `json:"id"`
	Name                      string            `json:"name"`
	PushAccessLevels          []accessLevelJSON `json:"push_access_levels"`
	MergeAccessLevels         []accessLevelJSON `json:"merge_access_levels"`
	UnprotectAccessLevels     []accessLevelJSON `json:"unprotect_access_levels"`
	AllowForcePush            bool              `json:"allow_force_push"`
	CodeOwnerApprovalRequired bool              `json:"code_owner_approval_required"`
}

func protectedBranchEntity(pb *protectedBranch) protectedBranchJSON {
	level := func(offset int64, l int) []accessLevelJSON {
		return []accessLevelJSON{{ID: pb.id*10 + offset, AccessLevel: l, AccessLevelDescription: accessDescription(l)}}
	}
	return protectedBranchJSON{
		ID: pb.id, Name: pb.name,
		PushAccessLevels: level(1, pb.push), MergeAccessLevels: level(2, pb.merge),
		UnprotectAccessLevels: []accessLevelJSON{}, AllowForcePush: pb.allowForcePush,
	}
}

// listProtectedBranches is GET /projects/:id/protected_branches: the rules
// by name, search a substring, offset pagination.
func (s *Server) listProtectedBranches(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	rs := refSearch{term: r.URL.Query().Get("search")}
	var list []*protectedBranch
	for _, pb := range p.protected {
		if rs.match(pb.name) {
			list = append(list, pb)
		}
	}
	slices.SortFunc(list, func(a, b *protectedBranch) int { return cmp.Compare(a.name, b.name) })
	page := paginate(s, w, r, list)
	out := make([]protectedBranchJSON, 0, len(page))
	for _, pb := range page {
		out = append(out, protectedBranchEntity(pb))
	}
	writeJSON(w, http.StatusOK, out)
}

// Protection is a protected-branch rule for ProtectBranch: who may push
// and merge (RoleDeveloper, RoleMaintainer — the default — or
// RoleNoOneAllowed) and whether force pushes are allowed.
type Protection struct {
	Push, Merge    string
	AllowForcePush bool
}

func protectionLevel(role string) (int, error) {
	switch role {
	case "", RoleMaintainer:
		return accessMaintainer, nil
	case RoleDeveloper:
		return accessDeveloper, nil
	case RoleNoOneAllowed:
		return accessNoOne, nil
	}
	return 0, fmt.Errorf("unknown access %q", role)
}

// ProtectBranch protects the branches name (a branch or a wildcard such
// as release/*) matches, replacing an existing rule of that name. A
// project's default branch is protected from its creation (Maintainers
// push and merge), as on GitLab.
func (s *Server) ProtectBranch(projectPath, name string, pr Protection) error {
	push, err := protectionLevel(pr.Push)
	if err != nil {
		return fmt.Errorf("protect %s in %s: %w", name, projectPath, err)
	}
	merge, err := protectionLevel(pr.Merge)
	if err != nil {
		return fmt.Errorf("protect %s in %s: %w", name, projectPath, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("protect %s in %s: project not found", name, projectPath)
	}
	p.protected = slices.DeleteFunc(p.protected, func(pb *protectedBranch) bool { return pb.name == name })
	p.protected = append(p.protected, &protectedBranch{id: s.inst.id(), name: name, push: push, merge: merge, allowForcePush: pr.AllowForcePush})
	return nil
}

// UnprotectBranch removes the rule named name.
func (s *Server) UnprotectBranch(projectPath, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("unprotect %s in %s: project not found", name, projectPath)
	}
	p.protected = slices.DeleteFunc(p.protected, func(pb *protectedBranch) bool { return pb.name == name })
	return nil
}

// SetFileOn pushes a commit to branch that sets file to content: SetFile
// on any branch (a Push Hook; with Behavior.OnPush a branch pipeline, or
// with OnMergeRequest a merge request pipeline where the branch is an
// open merge request's source). It returns the new commit id.
func (s *Server) SetFileOn(projectPath, branch, file, content string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return "", fmt.Errorf("push to %s: project not found", projectPath)
	}
	if _, ok := p.branches[branch]; !ok {
		return "", fmt.Errorf("push to %s: branch %s not found", projectPath, branch)
	}
	return s.pushTo(p, branch, "Update "+file, func(files map[string]string) { files[file] = content })
}

// Branches lists a project's branches by name with their head commits.
func (s *Server) Branches(projectPath string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for name, sha := range p.branches {
		out[name] = sha
	}
	return out
}

// Files returns the files of a project at ref (a branch, tag or commit
// id), or nil when the ref does not exist.
func (s *Server) Files(projectPath, ref string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil
	}
	c, ok := p.resolve(ref)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for k, v := range c.files {
		out[k] = v
	}
	return out
}
