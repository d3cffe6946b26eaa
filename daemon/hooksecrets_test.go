package daemon

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// forgedPipeline posts a successful default-branch pipeline event of
// project (path) to the daemon's webhook with token as X-Gitlab-Token,
// and returns the status code.
func forgedPipeline(t *testing.T, base string, srv *gitlabtest.Server, path, token string, pipeline int64) int {
	t.Helper()
	p, ok := srv.Project(path)
	if !ok {
		t.Fatalf("no project %s", path)
	}
	body := fmt.Sprintf(`{"object_kind":"pipeline","object_attributes":{"id":%d,"ref":"main","tag":false,"source":"push","status":"success",
		"finished_at":"2026-11-01 00:00:00 UTC","variables":[]},"project":{"id":%d,"path_with_namespace":%q,"default_branch":"main"}}`, pipeline, p.ID, path)
	req, _ := http.NewRequest(http.MethodPost, base+"/hooks/gitlab", bytes.NewReader([]byte(body)))
	req.Header.Set("X-Gitlab-Event", "Pipeline Hook")
	req.Header.Set("X-Gitlab-Token", token)
	req.Header.Set("Idempotency-Key", fmt.Sprintf("forged-%s-%d", path, pipeline))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// startHooked runs a daemon over srv whose hooks point at it, in hooks
// mode mode, and returns it and its base URL.
func startHooked(t *testing.T, srv *gitlabtest.Server, mode string) (*Daemon, string) {
	t.Helper()
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	cfg.Scope.Groups = []string{"g", "o"}
	cfg.Hooks.URL = "https://depsd.example.com/hooks/gitlab"
	cfg.Hooks.Secret = "the-master-webhook-secret"
	cfg.Hooks.Mode = mode
	listening := make(chan string, 1)
	d, _ := runDaemon(t, Options{Config: cfg, GitLab: gl, Listening: func(a string) { listening <- a }})
	select {
	case a := <-listening:
		return d, "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatal("daemon not listening")
	}
	return nil, ""
}

// TestHookSecretOfOneProjectCannotForgeAnother: the secret GitLab sends
// with one project's hook (which its maintainers can point elsewhere, and
// which travels in every delivery's header) authenticates events of that
// project only. Hooks installed before with the one shared secret are
// given their own at the next hooks sync; until then the shared secret
// is still accepted, after it no longer is.
func TestHookSecretOfOneProjectCannotForgeAnother(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/a": "FROM debian:12\n", "g/b": "FROM debian:12\n", "o/c": "FROM debian:12\n"})
	d, base := startHooked(t, srv, config.HooksProject)
	ctx := t.Context()
	master := d.opts.Config.Hooks.Secret
	// The hooks an earlier depsd installed: the shared secret on each.
	projects, err := d.gitlab.ListProjects(ctx, d.opts.Config.GitLabScope())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.gitlab.SyncHooks(ctx, projects, gitlab.HookSpec{URL: d.opts.Config.Hooks.URL, SecretToken: master}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the graph to be loaded", func() bool { return d.state.loaded() })
	if code := forgedPipeline(t, base, srv, "g/b", master, 1); code != http.StatusOK {
		t.Fatalf("the shared secret before the hooks were given their own: %d, want 200", code)
	}

	if _, err := d.syncHooks(ctx, false); err != nil {
		t.Fatal(err)
	}
	secretOf := func(path string) string {
		hooks := srv.Hooks(path)
		if len(hooks) != 1 {
			t.Fatalf("%s has hooks %+v, want one", path, hooks)
		}
		return hooks[0].Token
	}
	a, b := secretOf("g/a"), secretOf("g/b")
	if a == master || a == b {
		t.Errorf("g/a's hook secret %q, g/b's %q: want each its own, not the shared one", a, b)
	}
	for _, tc := range []struct {
		name, project, token string
		want                 int
	}{
		{"g/b's event with g/a's secret", "g/b", a, http.StatusUnauthorized},
		{"g/b's event with its own secret", "g/b", b, http.StatusOK},
		{"g/a's event with its own secret", "g/a", a, http.StatusOK},
		{"the shared secret, once every hook has its own", "g/b", master, http.StatusUnauthorized},
	} {
		if code := forgedPipeline(t, base, srv, tc.project, tc.token, 2); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
}

// TestGroupHookSecretCoversItsGroupOnly: a group hook delivers events of
// every project below its group with the group hook's secret: accepted
// for those, refused for a project of another group.
func TestGroupHookSecretCoversItsGroupOnly(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/a": "FROM debian:12\n", "g/b": "FROM debian:12\n", "o/c": "FROM debian:12\n"})
	srv.SetPremium(true)
	d, base := startHooked(t, srv, config.HooksGroup)
	eventually(t, "the graph to be loaded", func() bool { return d.state.loaded() })
	if _, err := d.syncHooks(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	gh := srv.GroupHooks("g")
	if len(gh) != 1 {
		t.Fatalf("group g has hooks %+v, want one", gh)
	}
	group := gh[0].Token
	if o := srv.GroupHooks("o"); len(o) != 1 || o[0].Token == group {
		t.Errorf("group o's hooks %+v: want one with a secret of its own", o)
	}
	for _, tc := range []struct {
		project string
		want    int
	}{{"g/a", http.StatusOK}, {"g/b", http.StatusOK}, {"o/c", http.StatusUnauthorized}} {
		if code := forgedPipeline(t, base, srv, tc.project, group, 3); code != tc.want {
			t.Errorf("%s's event with group g's hook secret: %d, want %d", tc.project, code, tc.want)
		}
	}
}
