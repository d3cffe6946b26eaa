package gitlabtest

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Repository tags: GET/POST /projects/:id/repository/tags,
// GET/DELETE …/tags/:tag_name (API::Tags, Tags::CreateService), with the
// Tag Push Hook and the tag pipeline a new tag starts (Behavior.OnTag).

// TagPushHook is the X-Gitlab-Event of a tag push.
const TagPushHook = "Tag Push Hook"

// tagJSON is API::Entities::Tag.
type tagJSON struct {
	Name      string     `json:"name"`
	Message   *string    `json:"message"`
	Target    string     `json:"target"`
	Commit    commitJSON `json:"commit"`
	Release   *struct{}  `json:"release"`
	Protected bool       `json:"protected"`
	CreatedAt *string    `json:"created_at"`
}

func (s *Server) tagEntity(p *project, t *tag) tagJSON {
	out := tagJSON{Name: t.name, Target: t.target, Commit: s.commitEntity(p, p.commits[t.target])}
	if t.objectID != "" {
		msg := t.message
		out.Message, out.Target, out.CreatedAt = &msg, t.objectID, timePtr(t.createdAt)
	}
	return out
}

// sortedTags orders p's tags as GET …/tags does: order_by name, updated
// (the target commit's date; the default) or version (git's
// version:refname), sort desc by default.
func (p *project) sortedTags(orderBy, sort string) []*tag {
	list := make([]*tag, 0, len(p.tags))
	for _, t := range p.tags {
		list = append(list, t)
	}
	slices.SortFunc(list, func(a, b *tag) int {
		var c int
		switch orderBy {
		case "name":
			c = cmp.Compare(a.name, b.name)
		case "version":
			c = versionCompare(a.name, b.name)
		default:
			ca, cb := p.commits[a.target], p.commits[b.target]
			c = ca.createdAt.Compare(cb.createdAt)
			if c == 0 {
				c = cmp.Compare(ca.seq, cb.seq)
			}
		}
		c = cmp.Or(c, cmp.Compare(a.name, b.name))
		if sort != "asc" {
			return -c
		}
		return c
	})
	return list
}

// listTags is GET /projects/:id/repository/tags: search (see refSearch),
// order_by (name, updated, version; default updated), sort (asc, desc;
// default desc), offset pagination. Unknown order_by or sort values
// answer 400 as Grape does.
func (s *Server) listTags(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	orderBy, sort := cmp.Or(q.Get("order_by"), "updated"), cmp.Or(q.Get("sort"), "desc")
	if !slices.Contains([]string{"name", "updated", "version"}, orderBy) {
		badRequest(w, "order_by does not have a valid value")
		return
	}
	if sort != "asc" && sort != "desc" {
		badRequest(w, "sort does not have a valid value")
		return
	}
	rs := newRefSearch(q.Get("search"))
	var list []*tag
	for _, t := range p.sortedTags(orderBy, sort) {
		if rs.match(t.name) {
			list = append(list, t)
		}
	}
	list = exactFirst(rs, list, func(t *tag) string { return t.name })
	page := paginate(s, w, r, list)
	out := make([]tagJSON, 0, len(page))
	for _, t := range page {
		out = append(out, s.tagEntity(p, t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTag(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	t, ok := p.tags[r.PathValue("tag_name")]
	if !ok {
		writeMessage(w, http.StatusNotFound, "404 Tag Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.tagEntity(p, t))
}

// postTag is POST /projects/:id/repository/tags with tag_name, ref
// (a branch, tag or commit id) and message (an annotated tag): 201 and
// the tag, or 400 with Tags::CreateService's message.
func (s *Server) postTag(w http.ResponseWriter, r *http.Request) {
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
	name, hasName := prm.str("tag_name")
	ref, hasRef := prm.str("ref")
	if missing := missingParams(hasName, "tag_name", hasRef, "ref"); missing != "" {
		badRequest(w, missing)
		return
	}
	message, _ := prm.str("message")
	t, msg := s.createTag(p, name, ref, message, callerOf(r).user)
	if t == nil {
		writeMessage(w, http.StatusBadRequest, msg)
		return
	}
	writeJSON(w, http.StatusCreated, s.tagEntity(p, t))
}

// missingParams is Grape's message for required parameters that are
// absent ("a is missing, b is missing"), or "" when all are there. Its
// arguments are pairs: whether present, then the name.
func missingParams(pairs ...any) string {
	var out []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if !pairs[i].(bool) {
			out = append(out, pairs[i+1].(string)+" is missing")
		}
	}
	return strings.Join(out, ", ")
}

// createTag is Tags::CreateService: it returns the tag, or nil and the
// refusal. A new tag posts a Tag Push Hook and, with Behavior.OnTag,
// starts a tag pipeline. Callers hold s.mu.
func (s *Server) createTag(p *project, name, ref, message string, by fakeUser) (*tag, string) {
	if ref == "" {
		return nil, "Target is empty"
	}
	if !validRefName(name) {
		return nil, msgTagNameInvalid
	}
	if _, ok := p.tags[name]; ok {
		return nil, "Tag " + name + " already exists"
	}
	c, ok := p.resolve(ref)
	if !ok {
		return nil, "Target " + ref + " is invalid"
	}
	t := &tag{name: name, target: c.sha, message: strings.TrimSpace(message), createdAt: s.now()}
	if t.message != "" {
		sum := sha1.Sum([]byte("tag\x00" + p.path + "\x00" + name + "\x00" + c.sha + "\x00" + t.message))
		t.objectID = hex.EncodeToString(sum[:])
	}
	if p.tags == nil {
		p.tags = map[string]*tag{}
	}
	p.tags[name] = t
	s.touch(p, s.now())
	s.fireTagPush(p, t, zeroSHA, by)
	if b, _ := s.behaviorOf(p); b.OnTag {
		pl := s.newPipeline(p, name, c.sha, "push", nil)
		pl.tag = true
		pl.user = &by
		s.startRun(p, pl)
	}
	s.notify()
	return t, ""
}

// deleteTag is DELETE /projects/:id/repository/tags/:tag_name: 204, or
// 404 Tag Not Found.
func (s *Server) deleteTag(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	name := r.PathValue("tag_name")
	if _, ok := p.tags[name]; !ok {
		writeMessage(w, http.StatusNotFound, "404 Tag Not Found")
		return
	}
	delete(p.tags, name)
	s.notify()
	w.WriteHeader(http.StatusNoContent)
}

// tagPushEventJSON is the Tag Push Hook payload as GitLab documents it.
type tagPushEventJSON struct {
	ObjectKind        string           `json:"object_kind"`
	EventName         string           `json:"event_name"`
	Before            string           `json:"before"`
	After             string           `json:"after"`
	Ref               string           `json:"ref"`
	RefProtected      bool             `json:"ref_protected"`
	CheckoutSHA       string           `json:"checkout_sha"`
	UserID            int64            `json:"user_id"`
	UserName          string           `json:"user_name"`
	UserAvatar        string           `json:"user_avatar"`
	ProjectID         int64            `json:"project_id"`
	Project           pushProjectJSON  `json:"project"`
	Repository        repositoryJSON   `json:"repository"`
	Commits           []pushCommitJSON `json:"commits"`
	TotalCommitsCount int              `json:"total_commits_count"`
}

// fireTagPush posts the creation (before zeroSHA) or move of t to the project's tag push hooks.
// Callers hold s.mu.
func (s *Server) fireTagPush(p *project, t *tag, before string, by fakeUser) {
	if !s.hooked(p) {
		return
	}
	ev := s.refPushEvent(p, "refs/tags/"+t.name, before, cmp.Or(t.objectID, t.target), nil, 0, by)
	body, err := json.Marshal(tagPushEventJSON{
		ObjectKind: "tag_push", EventName: "tag_push", Before: ev.Before, After: ev.After, Ref: ev.Ref,
		CheckoutSHA: t.target, UserID: by.id, UserName: by.name, UserAvatar: by.avatar(s.URL),
		ProjectID: p.id, Project: ev.Project, Repository: ev.Repository,
		Commits: []pushCommitJSON{}, TotalCommitsCount: 0,
	})
	if err != nil {
		panic("gitlabtest: render tag push event: " + err.Error())
	}
	s.fire(p, TagPushHook, "tag_push_events", nil, body, Delivery{Ref: "refs/tags/" + t.name})
}

// CreateTag creates a lightweight tag at ref (a branch, tag or commit id),
// as a developer's git push of it would: a Tag Push Hook, and a tag
// pipeline (ref the tag, tag true) when the project's behavior has OnTag.
func (s *Server) CreateTag(projectPath, name, ref string) error {
	return s.CreateAnnotatedTag(projectPath, name, ref, "")
}

// CreateAnnotatedTag is CreateTag with a message (an annotated tag).
func (s *Server) CreateAnnotatedTag(projectPath, name, ref, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("create tag in %s: project not found", projectPath)
	}
	if _, msg := s.createTag(p, name, ref, message, devUser); msg != "" {
		return fmt.Errorf("create tag %s in %s: %s", name, projectPath, msg)
	}
	return nil
}

// MoveTag points an existing tag at ref, as a developer's forced push of
// it would (a Tag Push Hook, no pipeline): release tags that move, like a
// floating "v3".
func (s *Server) MoveTag(projectPath, name, ref string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("move tag in %s: project not found", projectPath)
	}
	t, ok := p.tags[name]
	if !ok {
		return fmt.Errorf("move tag %s in %s: not found", name, projectPath)
	}
	c, ok := p.resolve(ref)
	if !ok {
		return fmt.Errorf("move tag %s in %s: ref %s not found", name, projectPath, ref)
	}
	before := t.target
	t.target, t.createdAt = c.sha, s.now()
	s.fireTagPush(p, t, before, devUser)
	s.notify()
	return nil
}

// Tags lists a project's tags by name with the commit each points at.
func (s *Server) Tags(projectPath string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for name, t := range p.tags {
		out[name] = t.target
	}
	return out
}
