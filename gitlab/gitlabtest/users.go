package gitlabtest

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Users, visibility and roles, as GitLab decides who sees and does what
// (ProjectPolicy, GroupPolicy, the API's scopes):
//
//   - The server's token (Options.Token) is the token of the user
//     TokenUsername, an administrator: it sees and may do everything, as
//     it always did, and is a member of every project with the role its
//     CISettings.TokenRole says.
//   - AddUser adds a user with a personal access token (api scope);
//     AddToken gives it more (read_api, read_user, ...); OAuth 2 access
//     tokens (oauth.go) act as the user who approved them.
//   - A project is private (the default), internal or public
//     (SetVisibility). A user reads a public or internal project, or a
//     private one where it is a member: of the project, of its group or
//     an ancestor (inherited), or of a group the project is shared with
//     (Project.SharedWith; the share grants at most Developer). Its access
//     level is the highest of these (AddMember).
//   - A project the user cannot read answers 404 "404 Project Not Found",
//     as GitLab does; one it reads without the role an endpoint needs
//     answers 403 "403 Forbidden": Developer to create pipelines and
//     commit statuses and to delete registry tags, Maintainer for project
//     hooks, Owner for group hooks, Reporter to read pipelines, commit
//     statuses, the registry and the repository of a private project
//     (anyone who reads an internal or public one may).
//   - A token with read_api (not api) may only GET: anything else answers
//     403 {"error":"insufficient_scope",...} as GitLab's API guard does;
//     a read_user token only reads GET /user.
//   - GET /projects, GET /groups/:id/projects and GET /groups/:id list what
//     the caller may read; GraphQL answers the server's token only.

// Access levels of GitLab's roles (Gitlab::Access).
const (
	AccessGuest      = 10
	AccessReporter   = 20
	AccessDeveloper  = 30
	AccessMaintainer = 40
	AccessOwner      = 50
)

// Project and group visibilities.
const (
	VisibilityPrivate  = "private"
	VisibilityInternal = "internal"
	VisibilityPublic   = "public"
)

// sharedAccess is the most a project's share with a group grants its
// members (Project.SharedWith has no level of its own).
const sharedAccess = AccessDeveloper

// User is a user added with AddUser.
type User struct {
	ID       int64
	Username string
	// Token is a personal access token of the user with the api scope.
	Token string
	// Password signs the user in on the fake's sign-in page
	// (/users/sign_in), as a browser would before /oauth/authorize.
	Password string
}

// Scopes of personal access tokens and OAuth applications the fake knows.
var knownScopes = []string{"api", "read_api", "read_user", "read_repository", "openid", "profile", "email"}

// authState is who may do what; guarded by Server.mu.
type authState struct {
	users     map[int64]*fakeUser
	byName    map[string]int64 // lower-case username → id
	passwords map[int64]string
	nextUser  int64
	tokens    map[string]*accessToken

	visibility     map[int64]string // project id → visibility; absent: private
	groupVis       map[int64]string // group id → visibility; absent: private
	projectMembers map[int64]map[int64]membership
	groupMembers   map[int64]map[int64]membership

	oauth oauthState
}

type membership struct {
	level     int
	createdAt time.Time
}

// accessToken is a personal access token or an OAuth access token.
type accessToken struct {
	userID    int64
	scopes    []string
	createdAt time.Time
	expiresAt time.Time // zero: none
	revoked   bool
	oauth     *oauthGrant // nil for a personal access token
}

func (a *authState) init() {
	if a.users != nil {
		return
	}
	a.users = map[int64]*fakeUser{botUser.id: &botUser, devUser.id: &devUser}
	a.byName = map[string]int64{botUser.username: botUser.id, devUser.username: devUser.id}
	a.nextUser = 100
	a.passwords = map[int64]string{}
	a.tokens = map[string]*accessToken{}
	a.visibility = map[int64]string{}
	a.groupVis = map[int64]string{}
	a.projectMembers = map[int64]map[int64]membership{}
	a.groupMembers = map[int64]map[int64]membership{}
}

// randomToken is prefix followed by n random bytes in hex.
func randomToken(prefix string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("gitlabtest: " + err.Error())
	}
	return prefix + hex.EncodeToString(b)
}

// AddUser adds a user with a personal access token (api scope) and a
// password for the sign-in page. It is a member of nothing (AddMember).
func (s *Server) AddUser(username string) (User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.auth
	a.init()
	if username == "" || strings.ContainsAny(username, "/ ") {
		return User{}, fmt.Errorf("add user %q: invalid username", username)
	}
	if _, ok := a.byName[strings.ToLower(username)]; ok {
		return User{}, fmt.Errorf("add user %s: username taken", username)
	}
	a.nextUser++
	u := &fakeUser{id: a.nextUser, name: username, username: username, email: username + "@example.com"}
	a.users[u.id] = u
	a.passwords[u.id] = randomToken("pw-", 8)
	a.byName[strings.ToLower(username)] = u.id
	tok := randomToken("glpat-", 10)
	a.tokens[tok] = &accessToken{userID: u.id, scopes: []string{"api"}, createdAt: s.now()}
	return User{ID: u.id, Username: username, Token: tok, Password: a.passwords[u.id]}, nil
}

// AddToken gives a user (added with AddUser) another personal access
// token with these scopes (api, read_api, read_user, ...).
func (s *Server) AddToken(username string, scopes ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	u, ok := s.findUser(username)
	if !ok {
		return "", fmt.Errorf("add token for %s: no such user", username)
	}
	for _, sc := range scopes {
		if !slices.Contains(knownScopes, sc) {
			return "", fmt.Errorf("add token for %s: unknown scope %q", username, sc)
		}
	}
	tok := randomToken("glpat-", 10)
	s.auth.tokens[tok] = &accessToken{userID: u.id, scopes: slices.Clone(scopes), createdAt: s.now()}
	return tok, nil
}

// findUser finds a user by username. Callers hold s.mu.
func (s *Server) findUser(username string) (*fakeUser, bool) {
	s.auth.init()
	id, ok := s.auth.byName[strings.ToLower(username)]
	if !ok {
		return nil, false
	}
	return s.auth.users[id], true
}

// SetVisibility makes a project private, internal or public.
func (s *Server) SetVisibility(projectPath, visibility string) error {
	if !slices.Contains([]string{VisibilityPrivate, VisibilityInternal, VisibilityPublic}, visibility) {
		return fmt.Errorf("set visibility of %s: unknown visibility %q", projectPath, visibility)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	p, ok := s.inst.findProject(projectPath)
	if !ok {
		return fmt.Errorf("set visibility of %s: project not found", projectPath)
	}
	s.auth.visibility[p.id] = visibility
	return nil
}

// SetGroupVisibility makes a group private, internal or public.
func (s *Server) SetGroupVisibility(groupPath, visibility string) error {
	if !slices.Contains([]string{VisibilityPrivate, VisibilityInternal, VisibilityPublic}, visibility) {
		return fmt.Errorf("set visibility of %s: unknown visibility %q", groupPath, visibility)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	g, ok := s.inst.findGroup(groupPath)
	if !ok {
		return fmt.Errorf("set visibility of %s: group not found", groupPath)
	}
	s.auth.groupVis[g.id] = visibility
	return nil
}

// AddMember makes a user a member of a project or a group (path: a
// project's path_with_namespace, else a group's full path) with an access
// level (AccessGuest ... AccessOwner); 0 removes the membership. A group
// membership is inherited by its subgroups and their projects.
func (s *Server) AddMember(path, username string, level int) error {
	if level != 0 && (level < AccessGuest || level > AccessOwner || level%10 != 0) {
		return fmt.Errorf("add member %s to %s: invalid access level %d", username, path, level)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.auth
	a.init()
	u, ok := s.findUser(username)
	if !ok || u.id == botUser.id {
		return fmt.Errorf("add member %s to %s: no such user (the server token's user is a member of every project)", username, path)
	}
	var members map[int64]map[int64]membership
	var id int64
	if p, ok := s.inst.findProject(path); ok {
		members, id = a.projectMembers, p.id
	} else if g, ok := s.inst.findGroup(path); ok {
		members, id = a.groupMembers, g.id
	} else {
		return fmt.Errorf("add member %s to %s: no such project or group", username, path)
	}
	if level == 0 {
		delete(members[id], u.id)
		return nil
	}
	if members[id] == nil {
		members[id] = map[int64]membership{}
	}
	members[id][u.id] = membership{level: level, createdAt: s.now()}
	return nil
}

// caller is who sends an API request: the server token's administrator,
// or a user with a token's scopes.
type caller struct {
	user   fakeUser
	admin  bool
	scopes []string
}

type callerKey struct{}

// callerOf is the request's caller; the administrator when the request
// did not go through authenticate (the fake's own callers).
func callerOf(r *http.Request) *caller {
	if c, ok := r.Context().Value(callerKey{}).(*caller); ok {
		return c
	}
	return &caller{user: botUser, admin: true}
}

// mayWrite says whether the caller's scopes allow a request of method m.
func (c *caller) allows(method, route string) (bool, string) {
	if c.admin || slices.Contains(c.scopes, "api") {
		return true, ""
	}
	get := method == http.MethodGet || method == http.MethodHead
	if get && slices.Contains(c.scopes, "read_api") {
		return true, ""
	}
	if get && route == "GET /user" && slices.Contains(c.scopes, "read_user") {
		return true, ""
	}
	if get {
		return false, "api read_api"
	}
	return false, "api"
}

// routeNeeds is the access level a user needs on the project (or group)
// of a route, beyond reading it: reporterOnPrivate is Reporter on a
// private project and nothing more on others. Routes not listed need
// only read access.
const reporterOnPrivate = -1

var routeNeeds = map[string]int{
	"POST /projects/:id/pipeline":                                              AccessDeveloper,
	"GET /projects/:id/pipelines":                                              reporterOnPrivate,
	"GET /projects/:id/pipelines/:pipeline_id":                                 reporterOnPrivate,
	"GET /projects/:id/pipelines/:pipeline_id/variables":                       AccessDeveloper,
	"POST /projects/:id/pipelines/:pipeline_id/cancel":                         AccessDeveloper,
	"GET /projects/:id/repository/files/:file_path/raw":                        reporterOnPrivate,
	"GET /projects/:id/repository/branches/:branch":                            reporterOnPrivate,
	"GET /projects/:id/repository/tree":                                        reporterOnPrivate,
	"GET /projects/:id/repository/blobs/:sha/raw":                              reporterOnPrivate,
	"GET /projects/:id/hooks":                                                  AccessMaintainer,
	"GET /projects/:id/hooks/:hook_id":                                         AccessMaintainer,
	"POST /projects/:id/hooks":                                                 AccessMaintainer,
	"PUT /projects/:id/hooks/:hook_id":                                         AccessMaintainer,
	"DELETE /projects/:id/hooks/:hook_id":                                      AccessMaintainer,
	"POST /projects/:id/hooks/:hook_id/test/:trigger":                          AccessMaintainer,
	"GET /groups/:id/hooks":                                                    AccessOwner,
	"GET /groups/:id/hooks/:hook_id":                                           AccessOwner,
	"POST /groups/:id/hooks":                                                   AccessOwner,
	"PUT /groups/:id/hooks/:hook_id":                                           AccessOwner,
	"DELETE /groups/:id/hooks/:hook_id":                                        AccessOwner,
	"POST /groups/:id/hooks/:hook_id/test/:trigger":                            AccessOwner,
	"POST /projects/:id/statuses/:sha":                                         AccessDeveloper,
	"GET /projects/:id/repository/commits/:sha/statuses":                       reporterOnPrivate,
	"GET /projects/:id/registry/repositories":                                  reporterOnPrivate,
	"GET /projects/:id/registry/repositories/:repository_id/tags":              reporterOnPrivate,
	"GET /projects/:id/registry/repositories/:repository_id/tags/:tag_name":    reporterOnPrivate,
	"DELETE /projects/:id/registry/repositories/:repository_id/tags/:tag_name": AccessDeveloper,
	// The repository side (tags.go, branches.go, commits.go,
	// mergerequests.go, notes.go); a commit's push rights and a merge's
	// are the handlers' (403 and 401 with GitLab's messages).
	"GET /projects/:id/repository/tags":                                  reporterOnPrivate,
	"GET /projects/:id/repository/tags/:tag_name":                        reporterOnPrivate,
	"POST /projects/:id/repository/tags":                                 AccessDeveloper,
	"DELETE /projects/:id/repository/tags/:tag_name":                     AccessDeveloper,
	"GET /projects/:id/repository/branches":                              reporterOnPrivate,
	"POST /projects/:id/repository/branches":                             AccessDeveloper,
	"DELETE /projects/:id/repository/branches/:branch":                   AccessDeveloper,
	"GET /projects/:id/protected_branches":                               reporterOnPrivate,
	"GET /projects/:id/merge_requests":                                   reporterOnPrivate,
	"POST /projects/:id/merge_requests":                                  AccessDeveloper,
	"GET /projects/:id/merge_requests/:merge_request_iid":                reporterOnPrivate,
	"PUT /projects/:id/merge_requests/:merge_request_iid":                AccessDeveloper,
	"PUT /projects/:id/merge_requests/:merge_request_iid/merge":          reporterOnPrivate,
	"GET /projects/:id/merge_requests/:merge_request_iid/pipelines":      reporterOnPrivate,
	"GET /projects/:id/merge_requests/:merge_request_iid/notes":          reporterOnPrivate,
	"POST /projects/:id/merge_requests/:merge_request_iid/notes":         reporterOnPrivate,
	"GET /projects/:id/merge_requests/:merge_request_iid/notes/:note_id": reporterOnPrivate,
	"PUT /projects/:id/merge_requests/:merge_request_iid/notes/:note_id": reporterOnPrivate,
}

// authenticate finds the request's caller and checks what it may do on
// the route: it answers 401 for a missing, unknown, expired or revoked
// token, 403 for a scope or role that does not allow the route, 404 for a
// project or group the caller cannot read, and reports false then.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, route string) (*caller, bool) {
	tok := requestToken(r)
	if tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.Token)) == 1 {
		return &caller{user: botUser, admin: true, scopes: []string{"api"}}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth.init()
	t, ok := s.auth.tokens[tok]
	switch {
	case tok == "" || !ok:
		writeMessage(w, http.StatusUnauthorized, "401 Unauthorized")
		return nil, false
	case t.revoked:
		bearerError(w, http.StatusUnauthorized, "invalid_token", "Token was revoked. You have to re-authorize from the user.", "")
		return nil, false
	case !t.expiresAt.IsZero() && !s.now().Before(t.expiresAt):
		bearerError(w, http.StatusUnauthorized, "invalid_token", "Token is expired. You can either do re-authorization or token refresh.", "")
		return nil, false
	}
	c := &caller{user: *s.auth.users[t.userID], scopes: t.scopes}
	method, _, _ := strings.Cut(route, " ")
	if ok, need := c.allows(method, route); !ok {
		bearerError(w, http.StatusForbidden, "insufficient_scope",
			"The request requires higher privileges than provided by the access token.", need)
		return nil, false
	}
	_, path, _ := strings.Cut(route, " ")
	switch {
	case strings.HasPrefix(path, "/projects/:id"):
		p, ok := s.inst.findProject(r.PathValue("id"))
		if !ok {
			break // the handler answers its own 404
		}
		if !s.canRead(c, p) {
			writeMessage(w, http.StatusNotFound, "404 Project Not Found")
			return nil, false
		}
		need := routeNeeds[route]
		if need == reporterOnPrivate {
			need = 0
			if s.visibilityOf(p) == VisibilityPrivate {
				need = AccessReporter
			}
		}
		if s.accessLevel(c, p) < need {
			writeMessage(w, http.StatusForbidden, "403 Forbidden")
			return nil, false
		}
	case strings.HasPrefix(path, "/groups/:id"):
		g, ok := s.inst.findGroup(r.PathValue("id"))
		if !ok {
			break
		}
		if !s.canReadGroup(c, g) {
			writeMessage(w, http.StatusNotFound, "404 Group Not Found")
			return nil, false
		}
		if s.groupLevel(c.user.id, g) < routeNeeds[route] {
			writeMessage(w, http.StatusForbidden, "403 Forbidden")
			return nil, false
		}
	}
	return c, true
}

// withCaller is r carrying its caller.
func withCaller(r *http.Request, c *caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// bearerError is Rack::OAuth2's answer to a bearer token refused: JSON
// with error, error_description (and scope), and WWW-Authenticate on a 401.
func bearerError(w http.ResponseWriter, status int, code, desc, scope string) {
	body := map[string]string{"error": code, "error_description": desc}
	if scope != "" {
		body["scope"] = scope
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="Protected by OAuth 2.0", error=%q, error_description=%q`, code, desc))
	}
	writeJSON(w, status, body)
}

// visibilityOf is a project's visibility. Callers hold s.mu.
func (s *Server) visibilityOf(p *project) string {
	if v, ok := s.auth.visibility[p.id]; ok {
		return v
	}
	return VisibilityPrivate
}

// visibilityLevel is Gitlab::VisibilityLevel's number of a visibility.
func visibilityLevel(v string) int {
	switch v {
	case VisibilityInternal:
		return 10
	case VisibilityPublic:
		return 20
	}
	return 0
}

// accessLevel is the caller's access level in p: the administrator's
// CISettings.TokenRole, or a user's highest membership. Callers hold s.mu.
func (s *Server) accessLevel(c *caller, p *project) int {
	if c.admin {
		return accessLevels[p.ci.TokenRole]
	}
	lvl, _ := s.userAccess(c.user.id, p)
	return lvl
}

// userAccess is a user's highest membership of p (0 for none) and when
// it was made. Callers hold s.mu.
func (s *Server) userAccess(uid int64, p *project) (int, time.Time) {
	a := &s.auth
	a.init()
	best := a.projectMembers[p.id][uid]
	take := func(m membership, limit int) {
		if l := min(m.level, limit); l > best.level {
			best = membership{level: l, createdAt: m.createdAt}
		}
	}
	for _, g := range s.inst.ancestors(p) {
		take(a.groupMembers[g.id][uid], AccessOwner)
	}
	for _, gp := range p.sharedWith {
		for g, ok := s.inst.groupPath[gp]; ok; g, ok = s.inst.groups[g.parentID] {
			take(a.groupMembers[g.id][uid], sharedAccess)
		}
	}
	return best.level, best.createdAt
}

// canRead says whether the caller may see p. Callers hold s.mu.
func (s *Server) canRead(c *caller, p *project) bool {
	if c.admin || s.visibilityOf(p) != VisibilityPrivate {
		return true
	}
	return s.accessLevel(c, p) >= AccessGuest
}

// groupLevel is a user's highest membership of g or an ancestor.
// Callers hold s.mu.
func (s *Server) groupLevel(uid int64, g *group) int {
	s.auth.init()
	lvl := 0
	for cur, ok := g, true; ok; cur, ok = s.inst.groups[cur.parentID] {
		lvl = max(lvl, s.auth.groupMembers[cur.id][uid].level)
	}
	return lvl
}

// canReadGroup says whether the caller may see g: a public or internal
// group, one it (or an ancestor) has a member in the user, a subgroup it
// is a member of, or a project in it the user reads. Callers hold s.mu.
func (s *Server) canReadGroup(c *caller, g *group) bool {
	if c.admin || s.groupLevel(c.user.id, g) > 0 {
		return true
	}
	if v := s.auth.groupVis[g.id]; v == VisibilityPublic || v == VisibilityInternal {
		return true
	}
	prefix := strings.ToLower(g.path) + "/"
	for id, members := range s.auth.groupMembers {
		if sub, ok := s.inst.groups[id]; ok && members[c.user.id].level > 0 && strings.HasPrefix(strings.ToLower(sub.path), prefix) {
			return true
		}
	}
	for _, p := range s.inst.groupMembers(strings.ToLower(g.path), true, false) {
		if s.canRead(c, p) {
			return true
		}
	}
	return false
}

// projectFilter is what the listings keep for the request's caller and
// its membership, min_access_level and visibility parameters; nil keeps
// everything. Callers hold s.mu.
func (s *Server) projectFilter(r *http.Request) func(*project) bool {
	c := callerOf(r)
	q := r.URL.Query()
	membership := q.Get("membership") == "true"
	minLevel, _ := strconv.Atoi(q.Get("min_access_level"))
	vis := q.Get("visibility")
	if c.admin && !membership && minLevel == 0 && vis == "" {
		return nil
	}
	return func(p *project) bool {
		if vis != "" && s.visibilityOf(p) != vis {
			return false
		}
		if c.admin {
			return accessLevels[p.ci.TokenRole] >= minLevel
		}
		lvl := s.accessLevel(c, p)
		switch {
		case minLevel > 0:
			return lvl >= minLevel
		case membership:
			return lvl > 0
		}
		return s.canRead(c, p)
	}
}

type memberJSON struct {
	userJSON
	AccessLevel     int     `json:"access_level"`
	CreatedAt       string  `json:"created_at"`
	ExpiresAt       *string `json:"expires_at"`
	MembershipState string  `json:"membership_state"`
}

// getMemberAll is GET /projects/:id/members/all/:user_id: the user's
// membership of the project, inherited ones included (the highest level
// wins, as MembersFinder answers it), or 404 "404 Not found".
func (s *Server) getMemberAll(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.requestProject(w, r)
	if !ok {
		return
	}
	uid, err := strconv.ParseInt(r.PathValue("user_id"), 10, 64)
	if err != nil {
		badRequest(w, "user_id is invalid")
		return
	}
	s.auth.init()
	u, ok := s.auth.users[uid]
	var lvl int
	var since time.Time
	switch {
	case !ok:
	case uid == botUser.id:
		lvl, since = accessLevels[p.ci.TokenRole], p.createdAt
	default:
		lvl, since = s.userAccess(uid, p)
	}
	if lvl == 0 {
		writeMessage(w, http.StatusNotFound, "404 Not found")
		return
	}
	writeJSON(w, http.StatusOK, memberJSON{userJSON: u.rest(s.URL), AccessLevel: lvl,
		CreatedAt: gitlabTime(since), MembershipState: "active"})
}

// projectFor is GET /projects/:id as the caller sees it: its permissions
// (project_access for a membership of the project, group_access for one
// of its groups), and the CI/CD settings only for a Maintainer or Owner.
// Callers hold s.mu.
func (s *Server) projectFor(c *caller, p *project) projectWithAccessJSON {
	if c.admin {
		return s.projectWithAccess(p)
	}
	out := projectWithAccessJSON{projectJSON: s.fullProject(p)}
	if m, ok := s.auth.projectMembers[p.id][c.user.id]; ok {
		out.Permissions.ProjectAccess = &accessJSON{AccessLevel: m.level, NotificationLevel: 3}
	}
	if g, ok := s.inst.groupPath[strings.ToLower(p.namespace())]; ok {
		if lvl := s.groupLevel(c.user.id, g); lvl > 0 {
			out.Permissions.GroupAccess = &accessJSON{AccessLevel: lvl, NotificationLevel: 3}
		}
	}
	if s.accessLevel(c, p) < AccessMaintainer {
		out.RestrictUserDefinedVariables, out.CIPipelineVariablesMinimumOverrideRole = nil, nil
	} else {
		restrict, role := p.ci.RestrictUserDefinedVariables, p.ci.MinimumOverrideRole
		out.RestrictUserDefinedVariables, out.CIPipelineVariablesMinimumOverrideRole = &restrict, &role
	}
	return out
}
