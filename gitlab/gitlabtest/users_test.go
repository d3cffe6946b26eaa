package gitlabtest

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

type projectOut struct {
	ID                int64  `json:"id"`
	PathWithNamespace string `json:"path_with_namespace"`
	Visibility        string `json:"visibility"`
	Permissions       struct {
		ProjectAccess *struct {
			AccessLevel int `json:"access_level"`
		} `json:"project_access"`
		GroupAccess *struct {
			AccessLevel int `json:"access_level"`
		} `json:"group_access"`
	} `json:"permissions"`
}

// usersFixture: g/private (ann Developer by the project), g/sub/inherited
// (ann Maintainer through the group g/sub), g/internal, g/public,
// h/hidden (nobody), h/shared (shared with g/sub: ann gets at most
// Developer); bob is in nothing.
func usersFixture(t *testing.T) (s *Server, ann, bob User) {
	t.Helper()
	s = New(Options{})
	t.Cleanup(s.Close)
	seed(t, s, "g/private", "g/sub/inherited", "g/internal", "g/public", "h/hidden")
	if _, err := s.AddProject(Project{Path: "h/shared", SharedWith: []string{"g/sub"}}); err != nil {
		t.Fatal(err)
	}
	ann, bob = mustDo[User](t)(s.AddUser("ann")), mustDo[User](t)(s.AddUser("bob"))
	for _, err := range []error{
		s.SetVisibility("g/internal", VisibilityInternal),
		s.SetVisibility("g/public", VisibilityPublic),
		s.AddMember("g/private", "ann", AccessDeveloper),
		s.AddMember("g/sub", "ann", AccessMaintainer),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return s, ann, bob
}

func paths(t *testing.T, body string) string {
	t.Helper()
	var out []string
	for _, p := range decode[[]projectOut](t, body) {
		out = append(out, p.PathWithNamespace)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// Each user's listings, project reads and GET /user answer what GitLab
// shows that user; the server's token still sees everything.
func TestUsersSeeTheirProjects(t *testing.T) {
	s, ann, bob := usersFixture(t)
	all := "g/internal g/private g/public g/sub/inherited h/hidden h/shared"
	for _, tt := range []struct {
		name, token, path, want string
	}{
		{"admin sees all", s.Token, "/projects?per_page=100", all},
		{"admin keyset sees all", s.Token, "/projects?pagination=keyset&order_by=id&per_page=100", all},
		{"admin membership", s.Token, "/projects?membership=true&per_page=100", all},
		{"ann visible", ann.Token, "/projects?per_page=100", "g/internal g/private g/public g/sub/inherited h/shared"},
		{"ann keyset", ann.Token, "/projects?pagination=keyset&order_by=id&sort=asc&per_page=2", "g/private g/sub/inherited"},
		{"ann membership", ann.Token, "/projects?membership=true", "g/private g/sub/inherited h/shared"},
		{"ann maintainer", ann.Token, "/projects?min_access_level=40", "g/sub/inherited"},
		{"ann developer", ann.Token, "/projects?min_access_level=30", "g/private g/sub/inherited h/shared"},
		{"ann public", ann.Token, "/projects?visibility=public", "g/public"},
		{"bob visible", bob.Token, "/projects", "g/internal g/public"},
		{"bob membership", bob.Token, "/projects?membership=true", ""},
		{"ann group g", ann.Token, "/groups/g/projects?include_subgroups=true", "g/internal g/private g/public g/sub/inherited"},
		{"bob group g", bob.Token, "/groups/g/projects?include_subgroups=true", "g/internal g/public"},
		{"ann group g/sub with shared", ann.Token, "/groups/g%2Fsub/projects", "g/sub/inherited h/shared"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := callAs(t, s, tt.token, "GET", tt.path, nil)
			if code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			if got := paths(t, body); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}

	for _, tt := range []struct {
		name, token, project string
		code                 int
		projectAccess        int
		groupAccess          int
	}{
		{"ann private", ann.Token, "g/private", 200, 30, 0},
		{"ann inherited", ann.Token, "g/sub/inherited", 200, 0, 40},
		{"ann internal", ann.Token, "g/internal", 200, 0, 0},
		{"ann hidden", ann.Token, "h/hidden", 404, 0, 0},
		{"bob private", bob.Token, "g/private", 404, 0, 0},
		{"bob public", bob.Token, "g/public", 200, 0, 0},
		{"admin hidden", s.Token, "h/hidden", 200, 30, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := callAs(t, s, tt.token, "GET", "/projects/"+url.PathEscape(tt.project), nil)
			if code != tt.code {
				t.Fatalf("%d %s, want %d", code, body, tt.code)
			}
			if code == 404 {
				if msg := decode[map[string]string](t, body)["message"]; msg != "404 Project Not Found" {
					t.Fatalf("message %q", msg)
				}
				return
			}
			p := decode[projectOut](t, body)
			var pa, ga int
			if p.Permissions.ProjectAccess != nil {
				pa = p.Permissions.ProjectAccess.AccessLevel
			}
			if p.Permissions.GroupAccess != nil {
				ga = p.Permissions.GroupAccess.AccessLevel
			}
			if pa != tt.projectAccess || ga != tt.groupAccess {
				t.Fatalf("permissions %d/%d, want %d/%d", pa, ga, tt.projectAccess, tt.groupAccess)
			}
		})
	}

	for token, want := range map[string]string{s.Token: TokenUsername, ann.Token: "ann", bob.Token: "bob"} {
		code, body := callAs(t, s, token, "GET", "/user", nil)
		if u := decode[map[string]any](t, body); code != 200 || u["username"] != want {
			t.Errorf("GET /user: %d %s, want %s", code, body, want)
		}
	}
	if code, _ := callAs(t, s, "glpat-nobody", "GET", "/user", nil); code != 401 {
		t.Errorf("unknown token: %d, want 401", code)
	}
	// A private group nobody in it is a member of is not found for bob.
	if code, body := callAs(t, s, bob.Token, "GET", "/groups/h", nil); code != 404 || !strings.Contains(body, "404 Group Not Found") {
		t.Errorf("bob GET /groups/h: %d %s", code, body)
	}
	if code, _ := callAs(t, s, ann.Token, "GET", "/groups/h", nil); code != 200 {
		t.Errorf("ann GET /groups/h (she reads h/shared): %d", code)
	}
}

// GET /projects/:id/members/all/:user_id answers the highest membership,
// inherited ones included, and 404 for a non-member.
func TestMembersAll(t *testing.T) {
	s, ann, bob := usersFixture(t)
	if err := s.AddMember("g", "ann", AccessReporter); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		project string
		user    int64
		code    int
		level   int
	}{
		{"g/private", ann.ID, 200, 30},       // project Developer beats group Reporter
		{"g/sub/inherited", ann.ID, 200, 40}, // g/sub Maintainer beats g Reporter
		{"h/shared", ann.ID, 200, 30},        // the share caps Maintainer at Developer
		{"g/public", ann.ID, 200, 20},        // g Reporter
		{"g/public", bob.ID, 404, 0},
		{"g/public", 1, 200, 30}, // the server token's user: its TokenRole
		{"g/public", 999, 404, 0},
	} {
		code, body := callAs(t, s, s.Token, "GET", "/projects/"+url.PathEscape(tt.project)+"/members/all/"+itoa(tt.user), nil)
		if code != tt.code {
			t.Errorf("%s member %d: %d %s, want %d", tt.project, tt.user, code, body, tt.code)
			continue
		}
		if code == 200 {
			if m := decode[map[string]any](t, body); m["access_level"] != float64(tt.level) || m["id"] != float64(tt.user) {
				t.Errorf("%s member %d: %s, want level %d", tt.project, tt.user, body, tt.level)
			}
		} else if !strings.Contains(body, "404 Not found") {
			t.Errorf("%s member %d: %s", tt.project, tt.user, body)
		}
	}
	// Bob cannot even see the private project's members.
	if code, _ := callAs(t, s, bob.Token, "GET", "/projects/g%2Fprivate/members/all/"+itoa(ann.ID), nil); code != 404 {
		t.Errorf("bob reads g/private members: %d, want 404", code)
	}
}

// Roles and scopes: a Reporter reads a private project's pipelines but
// cannot create one; a guest cannot read them; a read_api token may only
// GET (403 insufficient_scope as GitLab answers it); Maintainer is needed
// for hooks.
func TestRolesAndScopes(t *testing.T) {
	s, ann, bob := usersFixture(t)
	guest := mustDo[User](t)(s.AddUser("guest"))
	if err := s.AddMember("g/private", "guest", AccessGuest); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMember("g/private", "bob", AccessReporter); err != nil {
		t.Fatal(err)
	}
	readAPI := mustDo[string](t)(s.AddToken("ann", "read_api"))
	readUser := mustDo[string](t)(s.AddToken("ann", "read_user"))
	for _, tt := range []struct {
		name, token, method, path string
		body                      any
		code                      int
		want                      string
	}{
		{"reporter reads pipelines", bob.Token, "GET", "/projects/g%2Fprivate/pipelines", nil, 200, ""},
		{"reporter cannot create", bob.Token, "POST", "/projects/g%2Fprivate/pipeline", map[string]any{"ref": "main"}, 403, "403 Forbidden"},
		{"guest cannot read pipelines", guest.Token, "GET", "/projects/g%2Fprivate/pipelines", nil, 403, "403 Forbidden"},
		{"guest reads the project", guest.Token, "GET", "/projects/g%2Fprivate", nil, 200, ""},
		{"outsider reads internal pipelines", bob.Token, "GET", "/projects/g%2Finternal/pipelines", nil, 200, ""},
		{"developer creates", ann.Token, "POST", "/projects/g%2Fprivate/pipeline", map[string]any{"ref": "main"}, 201, ""},
		{"developer cannot list hooks", ann.Token, "GET", "/projects/g%2Fprivate/hooks", nil, 403, "403 Forbidden"},
		{"maintainer lists hooks", ann.Token, "GET", "/projects/g%2Fsub%2Finherited/hooks", nil, 200, ""},
		{"read_api reads", readAPI, "GET", "/projects/g%2Fprivate", nil, 200, ""},
		{"read_api cannot write", readAPI, "POST", "/projects/g%2Fprivate/pipeline", map[string]any{"ref": "main"}, 403,
			`{"error":"insufficient_scope","error_description":"The request requires higher privileges than provided by the access token.","scope":"api"}`},
		{"read_user reads the user", readUser, "GET", "/user", nil, 200, ""},
		{"read_user reads no project", readUser, "GET", "/projects/g%2Fprivate", nil, 403, "insufficient_scope"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := callAs(t, s, tt.token, tt.method, tt.path, tt.body)
			if code != tt.code || !strings.Contains(body, tt.want) {
				t.Fatalf("%d %s, want %d %s", code, body, tt.code, tt.want)
			}
		})
	}
}
