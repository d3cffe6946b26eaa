package gitlabtest

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.inst.findGroup(r.PathValue("id"))
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.groupJSON(g))
}

// listGroupProjects honours include_subgroups, archived, with_shared
// (default true), simple, order_by (id, name, path, created_at,
// last_activity_at; default created_at), sort (default desc) and pagination.
func (s *Server) listGroupProjects(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.inst.findGroup(r.PathValue("id"))
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
		return
	}
	q := r.URL.Query()
	subgroups := q.Get("include_subgroups") == "true"
	withShared := q.Get("with_shared") != "false"
	gpath := strings.ToLower(g.path)

	var list []*project
	// By id, the kept order: a large group's pages need no sort each.
	byID := q.Get("order_by") == "id"
	archived := q.Get("archived")
	keep := s.projectFilter(r) // the caller's (users.go)
	for _, p := range s.inst.groupMembers(gpath, subgroups, withShared) {
		if archived != "" && (archived == "true") != p.archived || keep != nil && !keep(p) {
			continue
		}
		list = append(list, p)
	}
	if byID && q.Get("sort") == "asc" {
		// Already in order.
	} else {
		sortProjects(list, q.Get("order_by"), q.Get("sort"))
	}
	page := paginate(s, w, r, list)
	if q.Get("simple") == "true" {
		out := make([]simpleProjectJSON, 0, len(page))
		for _, p := range page {
			out = append(out, s.simpleProject(p))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	out := make([]projectJSON, 0, len(page))
	for _, p := range page {
		out = append(out, s.fullProject(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func sortProjects(list []*project, orderBy, sort string) {
	key := func(a, b *project) int {
		switch orderBy {
		case "id":
			return cmp.Compare(a.id, b.id)
		case "name":
			return cmp.Compare(a.name(), b.name())
		case "path":
			return cmp.Compare(a.path, b.path)
		case "last_activity_at":
			return a.lastActivityAt.Compare(b.lastActivityAt)
		default: // created_at
			return a.createdAt.Compare(b.createdAt)
		}
	}
	desc := sort != "asc"
	slices.SortStableFunc(list, func(a, b *project) int {
		c := cmp.Or(key(a, b), cmp.Compare(a.id, b.id))
		if desc {
			return -c
		}
		return c
	})
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.projectFor(callerOf(r), p))
}

// currentUser is GET /user: the token's user.
func (s *Server) currentUser(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	writeJSON(w, http.StatusOK, currentUserJSON{userJSON: c.user.rest(s.URL), Email: c.user.email, CreatedAt: gitlabTime(s.now().Add(-365 * 24 * time.Hour)), Bot: false})
}

type currentUserJSON struct {
	userJSON
	Email     string `json:"email"`
	CreatedAt string `json:"created_at"`
	Bot       bool   `json:"bot"`
}

// Revision is the commit GET /version reports.
const Revision = "6d3a5f1c2b9"

type versionJSON struct {
	Version    string  `json:"version"`
	Revision   string  `json:"revision"`
	KAS        kasJSON `json:"kas"`
	Enterprise bool    `json:"enterprise"`
}

type kasJSON struct {
	Enabled     bool    `json:"enabled"`
	ExternalURL *string `json:"externalUrl"`
	Version     *string `json:"version"`
}

// getVersion is GET /version (Options.Version).
func (s *Server) getVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, versionJSON{Version: s.version, Revision: Revision})
}

// getRawFile serves a file at ref (a branch or a full commit id; the
// default branch when ref is absent).
func (s *Server) getRawFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = p.defaultBranch
	}
	c, ok := p.resolve(ref)
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Commit Not Found")
		return
	}
	file := r.PathValue("file_path")
	content, ok := c.files[file]
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 File Not Found")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Gitlab-File-Name", file[strings.LastIndex(file, "/")+1:])
	h.Set("X-Gitlab-File-Path", file)
	h.Set("X-Gitlab-Ref", ref)
	h.Set("X-Gitlab-Size", strconv.Itoa(len(content)))
	h.Set("X-Gitlab-Commit-Id", c.sha)
	h.Set("X-Gitlab-Last-Commit-Id", p.lastCommitFor(c.sha, file))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(content))
}
