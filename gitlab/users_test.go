package gitlab

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// A client made for a person lists what GitLab shows that person (public
// and internal projects and memberships, or memberships only, or those
// with a role), reads their membership, and is refused a write with a
// read_api OAuth token; the server's own client still sees everything.
func TestClientForAPerson(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	for _, p := range []string{"g/private", "g/sub/app", "g/internal", "h/hidden"} {
		must(srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"Containerfile": "FROM scratch\n"}}))
	}
	ann := must(srv.AddUser("ann"))
	for _, err := range []error{
		srv.SetVisibility("g/internal", gitlabtest.VisibilityInternal),
		srv.AddMember("g/private", "ann", gitlabtest.AccessReporter),
		srv.AddMember("g/sub", "ann", gitlabtest.AccessDeveloper),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	admin, _ := newClient(t, srv, func(c *Config) { c.PerPage = 2 })
	ctx := context.Background()
	pathsOf := func(ps []VisibleProject, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Path)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := pathsOf(admin.ListVisibleProjects(ctx, VisibleFilter{})); got != "g/internal g/private g/sub/app h/hidden" {
		t.Fatalf("the server's token sees %s", got)
	}
	pc := must(admin.WithToken(ann.Token, false))
	for f, want := range map[VisibleFilter]string{
		{}:                          "g/internal g/private g/sub/app",
		{Membership: true}:          "g/private g/sub/app",
		{MinAccessLevel: Developer}: "g/sub/app",
	} {
		if got := pathsOf(pc.ListVisibleProjects(ctx, f)); got != want {
			t.Errorf("ann with %+v sees %s, want %s", f, got, want)
		}
	}
	u, err := pc.CurrentUser(ctx)
	if err != nil || u.Username != "ann" || u.ID != ann.ID {
		t.Fatalf("ann's user: %+v %v", u, err)
	}
	info, _ := srv.Project("g/sub/app")
	hidden, _ := srv.Project("h/hidden")
	for _, tt := range []struct {
		client  *Client
		project int64
		want    AccessLevel
	}{
		{admin, info.ID, Developer},  // ann through g/sub
		{pc, info.ID, Developer},     // asked by ann herself
		{admin, hidden.ID, NoAccess}, // not a member
		{pc, hidden.ID, NoAccess},    // a project ann cannot see
	} {
		if got, err := tt.client.ProjectMemberAccess(ctx, tt.project, ann.ID); err != nil || got != tt.want {
			t.Errorf("access of ann to %d: %v %v, want %v", tt.project, got, err, tt.want)
		}
	}
	if _, err := headCommit(ctx, pc, hidden.ID, "main"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ann reads h/hidden: %v, want ErrNotFound", err)
	}

	// An OAuth token with read_api, as the dashboard's sign-in gets it.
	app := must(srv.AddOAuthApp("http://depsd.example/auth/callback", "read_api"))
	cfg := &oauth2.Config{ClientID: app.ClientID, ClientSecret: app.Secret, RedirectURL: app.RedirectURI, Scopes: []string{"read_api"},
		Endpoint: oauth2.Endpoint{AuthURL: srv.URL + "/oauth/authorize", TokenURL: srv.URL + "/oauth/token"}}
	verifier := oauth2.GenerateVerifier()
	req, _ := http.NewRequest("GET", cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)), nil)
	req.Header.Set(gitlabtest.TestUserHeader, "ann")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := must(url.Parse(resp.Header.Get("Location")))
	tok, err := cfg.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	oc := must(admin.WithToken(tok.AccessToken, true))
	if got := pathsOf(oc.ListVisibleProjects(ctx, VisibleFilter{Membership: true})); got != "g/private g/sub/app" {
		t.Errorf("ann's OAuth token sees %s", got)
	}
	_, err = oc.CreatePipeline(ctx, info.ID, "main", CreateOptions{})
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "insufficient_scope") || strings.Contains(err.Error(), tok.AccessToken) {
		t.Fatalf("a write with read_api: %v, want ErrUnauthorized (insufficient_scope), no token", err)
	}
}
