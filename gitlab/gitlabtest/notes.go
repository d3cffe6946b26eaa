package gitlabtest

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Merge request notes (API::Notes): POST/GET
// /projects/:id/merge_requests/:merge_request_iid/notes, GET/PUT
// …/notes/:note_id. GitLab's own system notes ("merged", "added 1
// commit", ...) are listed among them with system true. No Note Hook is
// sent.

type note struct {
	id        int64
	body      string
	author    fakeUser
	system    bool
	createdAt time.Time
	updatedAt time.Time
}

// Note is a merge request note as the fake stores it.
type Note struct {
	ID        int64
	Body      string
	Author    string // username
	System    bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (n *note) export() Note {
	return Note{ID: n.id, Body: n.body, Author: n.author.username, System: n.system, CreatedAt: n.createdAt, UpdatedAt: n.updatedAt}
}

// systemNote adds one of GitLab's system notes to mr. Callers hold s.mu.
func (s *Server) systemNote(mr *mergeRequest, by fakeUser, body string) {
	now := s.now()
	mr.notes = append(mr.notes, &note{id: s.inst.id(), body: body, author: by, system: true, createdAt: now, updatedAt: now})
}

// noteJSON is API::Entities::Note.
type noteJSON struct {
	ID              int64          `json:"id"`
	Type            *string        `json:"type"`
	Body            string         `json:"body"`
	Attachment      *string        `json:"attachment"`
	Author          userJSON       `json:"author"`
	CreatedAt       string         `json:"created_at"`
	UpdatedAt       string         `json:"updated_at"`
	System          bool           `json:"system"`
	NoteableID      int64          `json:"noteable_id"`
	NoteableType    string         `json:"noteable_type"`
	ProjectID       int64          `json:"project_id"`
	Resolvable      bool           `json:"resolvable"`
	Confidential    bool           `json:"confidential"`
	Internal        bool           `json:"internal"`
	Imported        bool           `json:"imported"`
	ImportedFrom    string         `json:"imported_from"`
	NoteableIID     int64          `json:"noteable_iid"`
	CommandsChanges map[string]any `json:"commands_changes"`
}

func (s *Server) noteEntity(p *project, mr *mergeRequest, n *note) noteJSON {
	return noteJSON{
		ID: n.id, Body: n.body, Author: n.author.rest(s.URL),
		CreatedAt: gitlabTime(n.createdAt), UpdatedAt: gitlabTime(n.updatedAt), System: n.system,
		NoteableID: mr.id, NoteableType: "MergeRequest", ProjectID: p.id, ImportedFrom: "none",
		NoteableIID: mr.iid, CommandsChanges: map[string]any{},
	}
}

// postNote is POST …/merge_requests/:merge_request_iid/notes with body: 201
// and the note; 400 {"error":"body is missing"} without one.
func (s *Server) postNote(w http.ResponseWriter, r *http.Request) {
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
	body, _ := prm.str("body")
	if body == "" {
		badRequest(w, "body is missing")
		return
	}
	now := s.now()
	n := &note{id: s.inst.id(), body: body, author: callerOf(r).user, createdAt: now, updatedAt: now}
	mr.notes = append(mr.notes, n)
	s.notify()
	writeJSON(w, http.StatusCreated, s.noteEntity(p, mr, n))
}

// listNotes is GET …/notes: order_by created_at (default) or updated_at,
// sort desc (default) or asc, offset pagination.
func (s *Server) listNotes(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, ok := s.requestMR(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	byUpdated, desc := q.Get("order_by") == "updated_at", q.Get("sort") != "asc"
	list := slices.Clone(mr.notes)
	slices.SortStableFunc(list, func(a, b *note) int {
		c := a.createdAt.Compare(b.createdAt)
		if byUpdated {
			c = a.updatedAt.Compare(b.updatedAt)
		}
		c = cmp.Or(c, cmp.Compare(a.id, b.id))
		if desc {
			return -c
		}
		return c
	})
	page := paginate(s, w, r, list)
	out := make([]noteJSON, 0, len(page))
	for _, n := range page {
		out = append(out, s.noteEntity(p, mr, n))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) requestNote(w http.ResponseWriter, r *http.Request) (*project, *mergeRequest, *note, bool) {
	p, mr, ok := s.requestMR(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	id, _ := strconv.ParseInt(r.PathValue("note_id"), 10, 64)
	for _, n := range mr.notes {
		if n.id == id {
			return p, mr, n, true
		}
	}
	writeMessage(w, http.StatusNotFound, "404 Note Not Found")
	return nil, nil, nil, false
}

func (s *Server) getNote(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, mr, n, ok := s.requestNote(w, r); ok {
		writeJSON(w, http.StatusOK, s.noteEntity(p, mr, n))
	}
}

// putNote is PUT …/notes/:note_id with body: 200 and the note; 403 for a
// system note or another user's note.
func (s *Server) putNote(w http.ResponseWriter, r *http.Request) {
	prm, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, mr, n, ok := s.requestNote(w, r)
	if !ok {
		return
	}
	body, _ := prm.str("body")
	if body == "" {
		badRequest(w, "body is missing")
		return
	}
	if n.system || n.author.id != callerOf(r).user.id {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	n.body, n.updatedAt = body, s.now()
	s.notify()
	writeJSON(w, http.StatusOK, s.noteEntity(p, mr, n))
}
