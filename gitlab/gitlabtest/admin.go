package gitlabtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Project describes a project to create with AddProject.
type Project struct {
	// Path is the path_with_namespace, e.g. "g/sub/app". Missing groups
	// are created.
	Path string
	// DefaultBranch defaults to "main".
	DefaultBranch string
	// Files are committed to the default branch as the initial commit.
	Files map[string]string
	// Archived projects are listed only when asked for.
	Archived bool
	// EmptyRepo projects have no commits: default_branch is still
	// reported, but files and branches answer 404.
	EmptyRepo bool
	// SharedWith lists groups (full paths) the project is shared with; it
	// then appears in their project lists unless with_shared=false.
	SharedWith []string
	// LastActivityAt defaults to 24 hours before the server's clock, so a
	// freshly seeded instance looks settled rather than just pushed to.
	LastActivityAt time.Time
	// CI is who may pass pipeline variables (see CISettings; also
	// Server.SetCISettings).
	CI CISettings
}

// ProjectInfo is what the fake knows about a project, for assertions.
type ProjectInfo struct {
	ID             int64
	Path           string
	DefaultBranch  string
	HeadCommit     string // empty for an empty repository
	LastActivityAt time.Time
	Archived       bool
}

// AddGroup creates a group and any missing ancestors and returns its id.
func (s *Server) AddGroup(path string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.inst.ensureGroup(path, s.now())
	if err != nil {
		return 0, fmt.Errorf("add group: %w", err)
	}
	return g.id, nil
}

// AddProject creates a project and returns its id.
func (s *Server) AddProject(p Project) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	path := strings.Trim(p.Path, "/")
	if !strings.Contains(path, "/") {
		return 0, fmt.Errorf("add project %q: path needs a namespace", p.Path)
	}
	if _, ok := s.inst.projectPath[strings.ToLower(path)]; ok {
		return 0, fmt.Errorf("add project %s: path already taken", path)
	}
	if _, ok := s.inst.groupPath[strings.ToLower(path)]; ok {
		return 0, fmt.Errorf("add project %s: a group has this path", path)
	}
	if _, err := s.inst.ensureGroup(path[:strings.LastIndex(path, "/")], now); err != nil {
		return 0, fmt.Errorf("add project %s: %w", path, err)
	}
	pr := &project{
		id:             s.inst.id(),
		path:           path,
		defaultBranch:  p.DefaultBranch,
		archived:       p.Archived,
		emptyRepo:      p.EmptyRepo,
		createdAt:      now.Add(-24 * time.Hour),
		lastActivityAt: p.LastActivityAt.UTC().Truncate(time.Millisecond),
		commits:        map[string]*commit{},
		branches:       map[string]string{},
		ci:             p.CI.withDefaults(),
	}
	if err := p.CI.validate(); err != nil {
		return 0, fmt.Errorf("add project %s: %w", path, err)
	}
	if pr.defaultBranch == "" {
		pr.defaultBranch = "main"
	}
	// As GitLab's default branch protection: Maintainers push and merge.
	pr.protected = []*protectedBranch{{id: s.inst.id(), name: pr.defaultBranch, push: accessMaintainer, merge: accessMaintainer}}
	if pr.lastActivityAt.IsZero() {
		pr.lastActivityAt = now.Add(-24 * time.Hour)
	}
	for _, g := range p.SharedWith {
		pr.sharedWith = append(pr.sharedWith, strings.ToLower(strings.Trim(g, "/")))
	}
	if !p.EmptyRepo {
		s.inst.commitFiles(pr, pr.defaultBranch, maps.Clone(p.Files), "Initial commit", pr.createdAt)
	}
	s.inst.projects[pr.id] = pr
	s.inst.byID = nil
	s.inst.projectPath[strings.ToLower(path)] = pr
	return pr.id, nil
}

// Project returns what the fake knows about the project at path.
func (s *Server) Project(path string) (ProjectInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(path)
	if !ok {
		return ProjectInfo{}, false
	}
	return ProjectInfo{
		ID:             p.id,
		Path:           p.path,
		DefaultBranch:  p.defaultBranch,
		HeadCommit:     p.branches[p.defaultBranch],
		LastActivityAt: p.lastActivityAt,
		Archived:       p.archived,
	}, true
}

// SetFile pushes a commit to the project's default branch that sets file to
// content. Like a real push it moves the branch head and, subject to
// Options.ActivityThrottle, last_activity_at, and posts a Push Hook event
// (and, with Behavior.OnPush, starts a pipeline). It turns an empty
// repository into a non-empty one. It returns the new commit id.
func (s *Server) SetFile(projectPath, file, content string) (string, error) {
	return s.push(projectPath, "Update "+file, func(files map[string]string) { files[file] = content })
}

// DeleteFile pushes a commit that removes file from the default branch.
func (s *Server) DeleteFile(projectPath, file string) (string, error) {
	return s.push(projectPath, "Delete "+file, func(files map[string]string) { delete(files, file) })
}

func (s *Server) push(projectPath, message string, change func(map[string]string)) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return "", fmt.Errorf("push to %s: project not found", projectPath)
	}
	return s.pushTo(p, p.defaultBranch, message, change)
}

// pushTo pushes a commit of change to branch, which must exist unless the
// repository is empty. Callers hold s.mu.
func (s *Server) pushTo(p *project, branch, message string, change func(map[string]string)) (string, error) {
	before, ok := p.branches[branch]
	if !ok && !p.emptyRepo && len(p.branches) > 0 {
		return "", fmt.Errorf("push to %s: branch %s not found", p.path, branch)
	}
	files := p.headFiles(branch)
	change(files)
	c := s.inst.commitFiles(p, branch, files, message, s.now())
	s.pushed(p, branch, before, c)
	return c.sha, nil
}

// touch records activity the way GitLab does: at most once per throttle
// interval.
func (s *Server) touch(p *project, now time.Time) {
	if s.throttle < 0 || !p.lastActivityAt.After(now.Add(-s.throttle)) {
		p.lastActivityAt = now
	}
}

// CreateBranch creates branch at the head of the default branch.
func (s *Server) CreateBranch(projectPath, branch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("create branch in %s: project not found", projectPath)
	}
	sha, ok := p.branches[p.defaultBranch]
	if !ok {
		return fmt.Errorf("create branch in %s: empty repository", projectPath)
	}
	p.branches[branch] = sha
	return nil
}

// SetDefaultBranch makes branch, which must exist, the project's default
// branch, as a Maintainer does in its settings (PUT /projects/:id
// default_branch). Nothing is pushed and no hook is sent; listings,
// GraphQL's rootRef and reads of the default branch follow at once.
func (s *Server) SetDefaultBranch(projectPath, branch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("set default branch of %s: project not found", projectPath)
	}
	if _, ok := p.branches[branch]; !ok {
		return fmt.Errorf("set default branch of %s: branch %s not found", projectPath, branch)
	}
	p.defaultBranch = branch
	return nil
}

// MoveProject renames or transfers a project to newPath (same id), creating
// missing groups, as GitLab's rename and transfer do.
func (s *Server) MoveProject(oldPath, newPath string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(oldPath)
	if !ok {
		return fmt.Errorf("move %s: project not found", oldPath)
	}
	newPath = strings.Trim(newPath, "/")
	if !strings.Contains(newPath, "/") {
		return fmt.Errorf("move %s: %q needs a namespace", oldPath, newPath)
	}
	if q, ok := s.inst.projectPath[strings.ToLower(newPath)]; ok && q != p {
		return fmt.Errorf("move %s: %s already taken", oldPath, newPath)
	}
	if _, err := s.inst.ensureGroup(newPath[:strings.LastIndex(newPath, "/")], s.now()); err != nil {
		return fmt.Errorf("move %s: %w", oldPath, err)
	}
	delete(s.inst.projectPath, strings.ToLower(p.path))
	p.path = newPath
	s.inst.byID = nil // and the group memberships built from it
	s.inst.projectPath[strings.ToLower(newPath)] = p
	return nil
}

// ArchiveProject archives or unarchives a project.
func (s *Server) ArchiveProject(path string, archived bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(path)
	if !ok {
		return fmt.Errorf("archive %s: project not found", path)
	}
	p.archived = archived
	return nil
}

// DeleteProject removes a project with its hooks and pipelines.
func (s *Server) DeleteProject(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(path)
	if !ok {
		return fmt.Errorf("delete %s: project not found", path)
	}
	delete(s.inst.projects, p.id)
	s.inst.byID = nil
	delete(s.inst.projectPath, strings.ToLower(p.path))
	delete(s.behaviors, p.id)
	for id, pl := range s.inst.pipelines {
		if pl.projectID == p.id {
			s.stopRun(pl)
			delete(s.inst.pipelines, id)
		}
	}
	return nil
}

// Projects lists the paths of all projects, sorted.
func (s *Server) Projects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.inst.projects))
	for _, p := range s.inst.projects {
		out = append(out, p.path)
	}
	slices.Sort(out)
	return out
}
