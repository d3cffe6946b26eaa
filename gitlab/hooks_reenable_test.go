package gitlab

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// GitLab's PUT /projects/:id/hooks/:hook_id only assigns the given
// attributes and saves (API::Helpers::WebHooksHelpers#update_hook); it does
// not reset recent_failures/disabled_until. A disabled hook is re-enabled by
// a successful delivery, e.g. a test request (POST
// /projects/:id/hooks/:hook_id/test/:trigger), per GitLab's webhook docs
// ("send a test request to re-enable a disabled webhook"). The fake must
// behave the same, or TestSyncHooks' "g/permanent" case would pass wrongly.
func TestFakeEditDoesNotReenableHook(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now})
	must(srv.AddProject(gitlabtest.Project{Path: "g/a", Files: map[string]string{"a": "b"}}))
	id := must(srv.AddHook("g/a", gitlabtest.Hook{URL: hookURL, Token: "s3cret", Events: wantEvents, EnableSSLVerification: true}))
	must(0, srv.DisableHook("g/a", id, time.Time{}))

	c, _ := newClient(t, srv, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	pid := must(c.ListProjects(ctx, Scope{Projects: []string{"g/a"}}))[0].ID
	if _, err := c.EditHook(ctx, pid, id, HookSpec{URL: hookURL, SecretToken: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if st := srv.Hooks("g/a")[0].AlertStatus; st != "disabled" {
		t.Fatalf("after PUT the fake reports alert_status %q; GitLab keeps a permanently disabled hook disabled on edit", st)
	}
}

// fakeHookGitLab behaves like GitLab for one project with one permanently
// disabled depsd hook: PUT changes nothing about the disabled state, a
// successful test request re-enables it.
func fakeHookGitLab(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var mu sync.Mutex
	status := "disabled"
	var tests atomic.Int32
	hook := func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return map[string]any{
			"id": 5, "url": hookURL, "project_id": 1, "push_events": true, "pipeline_events": true,
			"enable_ssl_verification": true, "push_events_branch_filter": "", "alert_status": status,
			"disabled_until": nil,
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/projects/1/hooks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Next-Page", "")
		_ = json.NewEncoder(w).Encode([]any{hook()})
	})
	mux.HandleFunc("PUT /api/v4/projects/1/hooks/5", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(hook())
	})
	mux.HandleFunc("POST /api/v4/projects/1/hooks/5/test/{trigger}", func(w http.ResponseWriter, r *http.Request) {
		tests.Add(1)
		mu.Lock()
		status = "executable"
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"message":"201 Created"}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &tests
}

// Against GitLab's real semantics (a PUT does not re-enable a permanently
// disabled hook, a successful test request does), SyncHooks re-enables the
// hook with a test request, and a second run has nothing to change.
func TestSyncHooksReenableOnRealGitLab(t *testing.T) {
	srv, tests := fakeHookGitLab(t)
	c, err := New(Config{BaseURL: srv.URL, Token: "glpat-review", RequestsPerMinute: -1,
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	projects := []Project{{ID: 1, Path: "g/a", DefaultBranch: "main"}}
	spec := HookSpec{URL: hookURL, SecretToken: "s3cret"}
	if _, err := c.SyncHooks(ctx, projects, spec, false); err != nil {
		t.Fatal(err)
	}
	rep, err := c.SyncHooks(ctx, projects, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed() != 0 || tests.Load() == 0 {
		t.Fatalf("second sync: %d changes (%v), %d test requests sent; the hook is still disabled on GitLab",
			rep.Changed(), rep.Changes, tests.Load())
	}
}
