package gitlabtest

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Runners clone a job's sources over git's smart HTTP protocol from
// <server>/<project path>.git, as from GitLab. The fake's commits live in
// memory, so the first job of a commit writes it into a bare repository
// under gitRoot (git fast-import: the same files, the fake's commit on top
// of the last one written for the project) and `git http-backend` serves
// that repository. The git commit id differs from the fake's commit sha:
// a job's git_info.sha names the written commit, while CI_COMMIT_SHA and
// every API answer keep the fake's sha, which is what depsd sees.

// gitRepo is a project's bare repository on disk.
type gitRepo struct {
	written map[string]string // the fake's sha → the git commit id
	last    string            // the git commit id written last
}

// gitRepoDir is where p's bare repository lives.
func (s *Server) gitRepoDir(p *project) string {
	return filepath.Join(s.gitRoot, filepath.FromSlash(p.path)+".git")
}

// writeCommit makes sure the fake's commit c of p is in p's bare
// repository, with ref (refs/heads/<branch>, refs/tags/<tag>, ...) and
// refs/pipelines/<pipeline id> pointing at it, and returns its git commit
// id. Callers hold s.mu.
func (s *Server) writeCommit(p *project, c *commit, ref string, pipelineID int64) (string, error) {
	if s.gitRoot == "" {
		dir, err := os.MkdirTemp("", "gitlabtest-git-")
		if err != nil {
			return "", fmt.Errorf("git repositories: %w", err)
		}
		s.gitRoot, s.gitRootOwned = dir, true
	}
	repo := s.gitRepos[p.id]
	dir := s.gitRepoDir(p)
	if repo == nil {
		if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("git init %s: %v: %s", dir, err, out)
		}
		repo = &gitRepo{written: map[string]string{}}
		s.gitRepos[p.id] = repo
	}
	id, ok := repo.written[c.sha]
	if !ok {
		var stream bytes.Buffer
		fmt.Fprintf(&stream, "commit %s\n", ref)
		fmt.Fprintf(&stream, "committer GitLab Test <gitlabtest@example.com> %d +0000\n", c.createdAt.Unix())
		fmt.Fprintf(&stream, "data %d\n%s\n", len(c.message), c.message)
		if repo.last != "" {
			fmt.Fprintf(&stream, "from %s\n", repo.last)
		}
		stream.WriteString("deleteall\n")
		names := make([]string, 0, len(c.files))
		for name := range c.files {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			content := c.files[name]
			fmt.Fprintf(&stream, "M 100644 inline %s\ndata %d\n%s\n", name, len(content), content)
		}
		cmd := exec.Command("git", "--git-dir", dir, "fast-import", "--quiet", "--force")
		cmd.Stdin = &stream
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("write commit %s of %s: git fast-import: %v: %s", c.sha, p.path, err, out)
		}
		out, err := exec.Command("git", "--git-dir", dir, "rev-parse", ref).Output()
		if err != nil {
			return "", fmt.Errorf("write commit %s of %s: git rev-parse: %w", c.sha, p.path, err)
		}
		id = strings.TrimSpace(string(out))
		repo.written[c.sha], repo.last = id, id
	}
	for _, ref := range []string{ref, "refs/pipelines/" + strconv.FormatInt(pipelineID, 10)} {
		if out, err := exec.Command("git", "--git-dir", dir, "update-ref", ref, id).CombinedOutput(); err != nil {
			return "", fmt.Errorf("git update-ref %s in %s: %v: %s", ref, dir, err, out)
		}
	}
	return id, nil
}

// serveGit answers git's smart HTTP protocol for <project>.git/...: clones
// and fetches only, authenticated as GitLab does for CI jobs (user
// gitlab-ci-token, a running job's token of that project as password) or
// with the API token.
func (s *Server) serveGit(w http.ResponseWriter, r *http.Request) bool {
	repoPath, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), ".git/")
	if !ok || (rest != "info/refs" && rest != "git-upload-pack") {
		return false
	}
	s.mu.Lock()
	p, found := s.inst.findProject(repoPath)
	allowed := found && s.gitAuthorized(p, r)
	root := s.gitRoot
	_, written := s.gitRepos[p.safeID()]
	s.mu.Unlock()
	if !allowed {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitLab"`)
		http.Error(w, "HTTP Basic: Access denied", http.StatusUnauthorized)
		return true
	}
	if !written {
		http.Error(w, "The project you were looking for could not be found.", http.StatusNotFound)
		return true
	}
	h := &cgi.Handler{
		Path: gitBinary(),
		Args: []string{"http-backend"},
		Dir:  root,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	h.ServeHTTP(w, r)
	return true
}

// safeID is p's id, or 0 for a nil project.
func (p *project) safeID() int64 {
	if p == nil {
		return 0
	}
	return p.id
}

// gitAuthorized checks HTTP basic credentials for p's repository. Callers
// hold s.mu.
func (s *Server) gitAuthorized(p *project, r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	if subtle.ConstantTimeCompare([]byte(pass), []byte(s.Token)) == 1 {
		return true
	}
	if user != "gitlab-ci-token" {
		return false
	}
	j, ok := s.jobByToken(pass)
	return ok && j.projectID == p.id && j.status == "running"
}

// gitBinary is the git executable's path.
func gitBinary() string {
	if path, err := exec.LookPath("git"); err == nil {
		return path
	}
	return "/usr/bin/git"
}

// removeGitRoot deletes the repositories the server wrote in a directory
// of its own.
func (s *Server) removeGitRoot() {
	if s.gitRootOwned {
		// A clone in flight may still hold files; one retry is enough.
		if err := os.RemoveAll(s.gitRoot); err != nil {
			time.Sleep(50 * time.Millisecond)
			_ = os.RemoveAll(s.gitRoot)
		}
	}
}
