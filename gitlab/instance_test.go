package gitlab

import (
	"context"
	"errors"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// A project refusing variables or inputs answers 400; the client tells the
// two refusals apart from a permanent failure, so the caller retries
// without them.
func TestCreateRefusals(t *testing.T) {
	t.Parallel()
	srv := newFake(t, gitlabtest.Options{})
	ci := "spec:\n  inputs:\n    depsd_action_id:\n      default: ''\n---\nbuild:\n  script: echo\n"
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{".gitlab-ci.yml": ci},
		CI: gitlabtest.RestrictedCISettings("")}))
	plain := must(srv.AddProject(gitlabtest.Project{Path: "g/plain", Files: map[string]string{"a": "b"}}))
	c, _ := newClient(t, srv, func(c *Config) { c.MaxRetries = -1 })
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		project int64
		opts    CreateOptions
		want    error
	}{
		{"variables refused", id, CreateOptions{Variables: map[string]string{"A": "1"}}, ErrVariablesRefused},
		{"undeclared input", id, CreateOptions{Inputs: map[string]string{"other": "1"}}, ErrInputsRefused},
		{"inputs without a spec", plain, CreateOptions{Inputs: map[string]string{"depsd_action_id": "a-1"}}, ErrInputsRefused},
		{"declared input", id, CreateOptions{Inputs: map[string]string{"depsd_action_id": "a-1"}}, nil},
		{"nothing", id, CreateOptions{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreatePipeline(ctx, tc.project, "main", tc.opts)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil && (IsPermanent(err) || IsRetryable(err)) {
				t.Errorf("%v: permanent %v, retryable %v; want neither", err, IsPermanent(err), IsRetryable(err))
			}
		})
	}
	if ps := srv.Pipelines("g/app"); len(ps) != 2 || ps[0].Inputs["depsd_action_id"] != "a-1" {
		t.Errorf("pipelines = %+v", ps)
	}
}

// The listing says what each project's settings decide for the token's
// variables where GitLab shows them (Maintainers and Owners).
func TestProjectsVariablesPolicy(t *testing.T) {
	t.Parallel()
	srv := newFake(t, gitlabtest.Options{})
	for path, ci := range map[string]gitlabtest.CISettings{
		"g/open":          {},
		"g/dev":           gitlabtest.RestrictedCISettings(gitlabtest.RoleDeveloper),
		"g/none":          gitlabtest.RestrictedCISettings(gitlabtest.RoleOwner),
		"g/maint":         {RestrictUserDefinedVariables: true, MinimumOverrideRole: gitlabtest.RoleMaintainer, TokenRole: gitlabtest.RoleMaintainer},
		"g/owner-of-main": {RestrictUserDefinedVariables: true, MinimumOverrideRole: gitlabtest.RoleOwner, TokenRole: gitlabtest.RoleMaintainer},
		"g/unrestricted":  {MinimumOverrideRole: gitlabtest.RoleNoOneAllowed, TokenRole: gitlabtest.RoleOwner},
	} {
		must(srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"a": "b"}, CI: ci}))
	}
	c, _ := newClient(t, srv, nil)
	want := map[string]VariablesPolicy{
		"g/open": VariablesUnknown, "g/dev": VariablesUnknown, "g/none": VariablesRefused, "g/maint": VariablesAllowed,
		"g/unrestricted": VariablesAllowed,
		// From a group list (no permissions) a Maintainer cannot tell;
		// from GET /projects/:id it can.
		"g/owner-of-main": VariablesUnknown,
	}
	ps, err := c.ListProjects(context.Background(), Scope{Groups: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Variables != want[p.Path] {
			t.Errorf("%s (group list): %q, want %q", p.Path, p.Variables, want[p.Path])
		}
	}
	single, err := c.ListProjects(context.Background(), Scope{Projects: []string{"g/owner-of-main"}})
	if err != nil || len(single) != 1 || single[0].Variables != VariablesRefused {
		t.Errorf("g/owner-of-main (GET /projects/:id) = %+v, %v; want refused", single, err)
	}
}

func TestVersionAndCurrentUser(t *testing.T) {
	t.Parallel()
	srv := newFake(t, gitlabtest.Options{Version: "17.10.0"})
	c, _ := newClient(t, srv, nil)
	ctx := context.Background()
	v, err := c.Version(ctx)
	if err != nil || v.Version != "17.10.0" || v.Revision != gitlabtest.Revision {
		t.Fatalf("Version = %+v, %v", v, err)
	}
	for _, tc := range []struct {
		major, minor int
		want         bool
	}{{17, 10, true}, {17, 9, true}, {17, 11, false}, {18, 0, false}, {16, 99, true}} {
		if got := v.AtLeast(tc.major, tc.minor); got != tc.want {
			t.Errorf("AtLeast(%d, %d) = %v", tc.major, tc.minor, got)
		}
	}
	for range 3 {
		u, err := c.CurrentUser(ctx)
		if err != nil || u.Username != gitlabtest.TokenUsername {
			t.Fatalf("CurrentUser = %+v, %v", u, err)
		}
	}
	if n := srv.Requests("GET /user"); n != 1 {
		t.Errorf("GET /user sent %d times, want once", n)
	}
}

// TestCurrentUserOfUrgentWorkPassesAHeldNormalOne: while urgent work is
// due (HoldNormal), a normal-priority CurrentUser waits for the limits
// (up to normalMaxWait); an urgent one asked meanwhile (a send in doubt
// looking for what it created) is answered at once, not queued behind
// the normal one: the user is not read under a lock held across the
// request.
func TestCurrentUserOfUrgentWorkPassesAHeldNormalOne(t *testing.T) {
	t.Parallel()
	srv := newFake(t, gitlabtest.Options{})
	c, _ := newClient(t, srv, nil)
	c.HoldNormal(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	normal := make(chan error, 1)
	go func() {
		_, err := c.CurrentUser(ctx)
		normal <- err
	}()
	time.Sleep(50 * time.Millisecond) // the normal one waits for the limits
	urgent := make(chan error, 1)
	go func() {
		u, err := c.CurrentUser(WithPriority(ctx, PriorityUrgent))
		if err == nil && u.Username != gitlabtest.TokenUsername {
			err = errors.New("user " + u.Username)
		}
		urgent <- err
	}()
	select {
	case err := <-urgent:
		if err != nil {
			t.Fatalf("urgent CurrentUser while a normal one is held: %v", err)
		}
	case <-time.After(5 * time.Second):
		c.HoldNormal(false)
		t.Fatal("urgent CurrentUser still waiting after 5s behind a held normal one")
	}
	c.HoldNormal(false)
	if err := <-normal; err != nil {
		t.Errorf("the normal CurrentUser, once let go: %v", err)
	}
}
