package gitlabtest

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Commits: GitLab's commit entities, POST /projects/:id/repository/commits
// (Files::MultiService through Commits::CreateService), and what a push
// does afterwards (pushed).

// commitJSON is API::Entities::Commit.
type commitJSON struct {
	ID               string            `json:"id"`
	ShortID          string            `json:"short_id"`
	CreatedAt        string            `json:"created_at"`
	ParentIDs        []string          `json:"parent_ids"`
	Title            string            `json:"title"`
	Message          string            `json:"message"`
	AuthorName       string            `json:"author_name"`
	AuthorEmail      string            `json:"author_email"`
	AuthoredDate     string            `json:"authored_date"`
	CommitterName    string            `json:"committer_name"`
	CommitterEmail   string            `json:"committer_email"`
	CommittedDate    string            `json:"committed_date"`
	Trailers         map[string]string `json:"trailers"`
	ExtendedTrailers map[string]string `json:"extended_trailers"`
	WebURL           string            `json:"web_url"`
}

type commitStatsJSON struct {
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
	Total     int `json:"total"`
}

// commitDetailJSON is API::Entities::CommitDetail.
type commitDetailJSON struct {
	commitJSON
	Stats        *commitStatsJSON  `json:"stats,omitempty"`
	Status       *string           `json:"status"`
	ProjectID    int64             `json:"project_id"`
	LastPipeline *pipelineInfoJSON `json:"last_pipeline"`
}

// authorOf is who wrote c: the API's author_name/author_email, else the
// one who pushed it.
func (c *commit) authorOf() commitAuthorJSON {
	if c.author != nil {
		return *c.author
	}
	u := c.pusherOf()
	return commitAuthorJSON{Name: u.name, Email: u.email}
}

// pusherOf is who pushed c: the token's user for commits made through
// the API, the developer for the fake's admin pushes.
func (c *commit) pusherOf() fakeUser {
	if c.pusher != nil {
		return *c.pusher
	}
	return devUser
}

func (s *Server) commitEntity(p *project, c *commit) commitJSON {
	title, _, _ := strings.Cut(c.message, "\n")
	when := gitlabTime(c.createdAt)
	a, by := c.authorOf(), c.pusherOf()
	parents := c.parents()
	if parents == nil {
		parents = []string{}
	}
	return commitJSON{
		ID: c.sha, ShortID: c.sha[:8], CreatedAt: when, ParentIDs: parents,
		Title: title, Message: c.message,
		AuthorName: a.Name, AuthorEmail: a.Email, AuthoredDate: when,
		CommitterName: by.name, CommitterEmail: by.email, CommittedDate: when,
		Trailers: map[string]string{}, ExtendedTrailers: map[string]string{},
		WebURL: s.URL + "/" + p.path + "/-/commit/" + c.sha,
	}
}

// commitStats counts the lines c adds and removes against its first
// parent (a line-multiset count, close to git's for the small files of
// tests).
func (p *project) commitStats(c *commit) commitStatsJSON {
	var before map[string]string
	if parent, ok := p.commits[c.parent]; ok {
		before = parent.files
	}
	var st commitStatsJSON
	for _, name := range slices.Sorted(maps.Keys(unionKeys(before, c.files))) {
		old, cur := before[name], c.files[name]
		if old == cur {
			continue
		}
		count := map[string]int{}
		for _, l := range splitLines(old) {
			count[l]++
		}
		for _, l := range splitLines(cur) {
			if count[l] > 0 {
				count[l]--
			} else {
				st.Additions++
			}
		}
		for _, n := range count {
			st.Deletions += n
		}
	}
	st.Total = st.Additions + st.Deletions
	return st
}

// unionKeys is the set of the maps' keys.
func unionKeys(ms ...map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
}

// pushed does what GitLab does after a push moved branch from before ("" for
// a new branch) to head, pushed by by: the project's activity, a Push Hook
// with the new commits, the refresh of the open merge requests whose source
// branch it is (their head moves, an automatic merge is aborted) and the
// pipelines the project's CI runs for it: a merge request pipeline for each
// of those merge requests (Behavior.OnMergeRequest), else a branch pipeline
// (Behavior.OnPush), as GitLab's recommended workflow rules do. Callers hold
// s.mu.
func (s *Server) pushed(p *project, branch, before string, head *commit) {
	now := s.now()
	p.emptyRepo = false
	s.touch(p, now)
	base := before
	if base == "" && branch != p.defaultBranch {
		base = p.branches[p.defaultBranch]
	}
	if s.hooked(p) {
		s.firePush(p, "refs/heads/"+branch, cmpOr(before, zeroSHA), head.sha, p.commitsBetween(base, head.sha), head.pusherOf())
	}

	b, _ := s.behaviorOf(p)
	var mrPipelines bool
	for _, mr := range p.mrs {
		if mr.state != mrOpened || mr.source != branch {
			continue
		}
		s.refreshMR(p, mr, before, head)
		if b.OnMergeRequest {
			mrPipelines = true
			s.startMRPipeline(p, mr, head.pusherOf())
		}
	}
	if b.OnPush && !mrPipelines {
		pl := s.newPipeline(p, branch, head.sha, "push", nil)
		if before != "" {
			pl.beforeSHA = before
		}
		if head.pusher != nil {
			pl.user = head.pusher
		}
		s.startRun(p, pl)
	}
}

// hooked says whether p has hooks that may want an event: its own, or a
// Premium instance's group hooks. Callers hold s.mu.
func (s *Server) hooked(p *project) bool { return len(p.hooks) > 0 || s.premium }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// firePush posts a Push Hook of ref moving from before to after with the
// given commits (newest first; the payload lists at most 20, oldest first,
// and counts them all) to the hooks whose branch filter matches. Callers
// hold s.mu.
func (s *Server) firePush(p *project, ref, before, after string, commits []*commit, by fakeUser) {
	if !s.hooked(p) {
		return
	}
	shown := commits[:min(len(commits), 20)]
	list := make([]pushCommitJSON, 0, len(shown))
	for i := len(shown) - 1; i >= 0; i-- {
		c := shown[i]
		var parentFiles map[string]string
		if parent, ok := p.commits[c.parent]; ok {
			parentFiles = parent.files
		}
		ch := diffFiles(parentFiles, c.files)
		list = append(list, pushCommitJSON{hookCommitJSON: s.hookCommit(p, c), Added: ch.added, Modified: ch.modified, Removed: ch.removed})
	}
	body, err := json.Marshal(s.refPushEvent(p, ref, before, after, list, len(commits), by))
	if err != nil {
		panic("gitlabtest: render push event: " + err.Error())
	}
	branch := strings.TrimPrefix(ref, "refs/heads/")
	accept := func(h *hook) bool { return branchMatches(h.branchFilter, branch) }
	s.fire(p, PushHook, "push_events", accept, body, Delivery{Ref: ref})
}

// commitAction is one of actions[] of POST /repository/commits.
type commitAction struct {
	action, path, previousPath, content, lastCommitID string
	hasContent                                        bool
}

// createCommit is POST /projects/:id/repository/commits: the API's checks
// (push access to branch first, 403; then the attributes, 400 "400 Bad
// request - ..."), then Commits::CreateService's (the start branch exists,
// a different branch does not unless force, its name is valid; pushing
// with force onto a protected branch needs a rule allowing it), each
// action's last_commit_id against the last commit that changed its file,
// then the actions in order as Gitaly applies them ("A file with this
// name already exists" / "doesn't exist"); every refusal after the
// attributes is a 400 with GitLab's message. The commit is answered 201
// as API::Entities::CommitDetail, and pushed (see pushed).
func (s *Server) createCommit(w http.ResponseWriter, r *http.Request) {
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
	branch, _ := prm.str("branch")
	who := s.actorOf(r, p)
	if !p.canPush(who.level, branch) {
		writeMessage(w, http.StatusForbidden, "403 Forbidden - "+msgPushRefused)
		return
	}
	bad := func(reason string) { writeMessage(w, http.StatusBadRequest, "400 Bad request - "+reason) }
	message, _ := prm.str("commit_message")
	rawActions, _ := prm["actions"].([]any)
	startBranch, hasStartBranch := prm.str("start_branch")
	startSHA, hasStartSHA := prm.str("start_sha")
	switch {
	case branch == "":
		bad("branch is required")
		return
	case message == "":
		bad("commit_message is required")
		return
	case len(rawActions) == 0:
		bad("actions is required")
		return
	case hasStartBranch && hasStartSHA:
		bad("start_branch, start_sha are mutually exclusive")
		return
	}
	var actions []commitAction
	for i, raw := range rawActions {
		m, _ := raw.(map[string]any)
		field := func(k string) (string, bool) { return params(m).str(k) }
		a := commitAction{}
		a.action, _ = field("action")
		a.path, _ = field("file_path")
		a.previousPath, _ = field("previous_path")
		a.lastCommitID, _ = field("last_commit_id")
		a.content, a.hasContent = field("content")
		encoding, hasEncoding := field("encoding")
		at := "actions[" + itoaInt(i) + "]"
		switch {
		case a.action == "":
			bad(at + "[action] is required")
			return
		case a.path == "":
			bad(at + "[file_path] is required")
			return
		case !slices.Contains([]string{"create", "update", "move", "delete", "chmod"}, a.action):
			bad(at + "[action] must be one of: create, update, move, delete, chmod")
			return
		case hasEncoding && encoding != "text" && encoding != "base64":
			bad(at + "[encoding] must be text or base64")
			return
		case a.action == "update" && !a.hasContent:
			bad(at + "[content] is required for update action")
			return
		case a.action == "move" && a.previousPath == "":
			bad(at + "[previous_path] is required for move action")
			return
		}
		if encoding == "base64" && a.hasContent {
			dec, err := base64.StdEncoding.DecodeString(a.content)
			if err != nil {
				bad(at + "[content] is not valid base64")
				return
			}
			a.content = string(dec)
		}
		actions = append(actions, a)
	}
	force, _ := prm.boolean("force")
	if !hasStartSHA && startBranch == "" {
		startBranch = branch
	}
	fail := func(msg string) { writeMessage(w, http.StatusBadRequest, msg) }

	// Commits::CreateService#validate!
	var start *commit
	switch {
	case hasStartSHA:
		c, ok := p.commits[startSHA]
		if !ok {
			fail("Cannot find start_sha '" + startSHA + "'")
			return
		}
		start = c
	case !p.emptyRepo:
		sha, ok := p.branches[startBranch]
		if !ok {
			fail(msgNotOnBranch)
			return
		}
		start = p.commits[sha]
	}
	different := startBranch != branch || hasStartSHA
	current, exists := p.branches[branch]
	if different && exists && !force && !p.emptyRepo {
		fail("A branch called '" + branch + "' already exists. Switch to that branch in order to make changes")
		return
	}
	if different && !validRefName(branch) {
		fail("Something went wrong when we tried to create '" + branch + "' for you: " + msgBranchNameInvalid)
		return
	}
	if exists && force && different && !p.canForcePush(who.level, branch) {
		fail(msgForcePushProtected)
		return
	}
	if !exists && p.isProtected(branch) && !p.canMerge(who.level, branch) {
		fail(msgCreateProtectedBranch)
		return
	}
	files := map[string]string{}
	if start != nil {
		files = maps.Clone(start.files)
	}
	// Files::MultiService#validate_file_status!
	for _, a := range actions {
		if a.lastCommitID == "" || start == nil || !slices.Contains([]string{"update", "move", "delete", "chmod"}, a.action) {
			continue
		}
		path := cmpOr(a.previousPath, a.path)
		if last := p.lastCommitFor(start.sha, path); last != "" && last != a.lastCommitID {
			fail(msgFileChangedSinceEdited + path)
			return
		}
	}
	// Gitaly's UserCommitFiles, action by action.
	for _, a := range actions {
		_, there := files[a.path]
		switch a.action {
		case "create":
			if there {
				fail(msgFileExists)
				return
			}
			files[a.path] = a.content
		case "update", "chmod":
			if !there {
				fail(msgFileMissing)
				return
			}
			if a.action == "update" {
				files[a.path] = a.content
			}
		case "delete":
			if !there {
				fail(msgFileMissing)
				return
			}
			delete(files, a.path)
		case "move":
			old, had := files[a.previousPath]
			if !had {
				fail(msgFileMissing)
				return
			}
			if there && a.path != a.previousPath {
				fail(msgFileExists)
				return
			}
			delete(files, a.previousPath)
			if a.hasContent {
				old = a.content
			}
			files[a.path] = old
		}
	}
	before := ""
	if exists {
		before = current
	}
	// The new commit's parent is the start, whatever the branch held.
	if start != nil {
		p.branches[branch] = start.sha
	} else {
		delete(p.branches, branch)
	}
	c := s.inst.commitFiles(p, branch, files, message, s.now())
	c.pusher = &who.user
	if name, ok := prm.str("author_name"); ok && name != "" {
		email, _ := prm.str("author_email")
		c.author = &commitAuthorJSON{Name: name, Email: email}
	}
	s.pushed(p, branch, before, c)
	out := commitDetailJSON{commitJSON: s.commitEntity(p, c), ProjectID: p.id}
	if stats, ok := prm.boolean("stats"); !ok || stats {
		st := p.commitStats(c)
		out.Stats = &st
	}
	writeJSON(w, http.StatusCreated, out)
}

func itoaInt(i int) string { return strconv.Itoa(i) }
