package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

const groupTest = "POST /groups/:id/hooks/:hook_id/test/:trigger"

// groupWorld: projects below top (two with a depsd project hook, one
// without), one in a group where the token's user is not Owner, one
// outside the groups; scope.groups top, top/sub (covered by top's hook)
// and denied.
func groupWorld(t *testing.T, premium bool) (*gitlabtest.Server, *Client, []Project, string, *atomic.Int32) {
	t.Helper()
	srv := newFake(t, gitlabtest.Options{})
	srv.SetPremium(premium)
	var status atomic.Int32
	status.Store(http.StatusOK)
	url := hookReceiver(t, func() int { return int(status.Load()) })
	for _, p := range []string{"top/a", "top/sub/b", "top/c", "denied/d", "other/e"} {
		must(srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"Containerfile": "FROM x\n"}}))
	}
	for _, p := range []string{"top/a", "top/sub/b"} {
		must(srv.AddHook(p, gitlabtest.Hook{URL: url, Token: "s3cret", SigningToken: signingToken, Events: wantEvents, EnableSSLVerification: true}))
	}
	srv.SetGroupOwner("denied", false)
	c, _ := newClient(t, srv, nil)
	projects := must(c.ListProjects(context.Background(), Scope{Groups: []string{"top", "denied"}, Projects: []string{"other/e"}}))
	return srv, c, projects, url, &status
}

func actions(rep HookReport) map[string]HookAction {
	out := map[string]HookAction{}
	for _, ch := range rep.Changes {
		name := ch.Project
		if ch.Group {
			name = "group " + name
		}
		out[name] = ch.Action
	}
	return out
}

func reasonOf(rep HookReport, name string) string {
	for _, ch := range rep.Changes {
		if ch.Project == name {
			return strings.Join(ch.Reasons, "; ")
		}
	}
	return ""
}

// Group mode: one hook on the top group, the project hooks below it
// removed once it answers (one test delivery for the whole group); a 403
// is reported with what to do and falls back to project hooks.
func TestSyncGroupHooks(t *testing.T) {
	srv, c, projects, url, _ := groupWorld(t, true)
	ctx := context.Background()
	spec := HookSpec{URL: url, SecretToken: "s3cret", SigningToken: signingToken, Groups: []string{"top", "top/sub", "denied"}}

	dry, err := c.SyncHooks(ctx, projects, spec, true)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(dry); a["group top"] != HookCreated || a["top/a"] != HookReplacedByGroup || len(srv.Hooks("top/a")) != 1 || len(srv.GroupHooks("top")) != 0 {
		t.Fatalf("dry run: %v", a)
	}

	srv.ResetRequests()
	rep, err := c.SyncHooks(ctx, projects, spec, false)
	if err != nil {
		t.Fatalf("a refused group hook is an error: %v", err)
	}
	want := map[string]HookAction{
		"group top": HookCreated, "group denied": HookGroupRefused,
		"top/a": HookReplacedByGroup, "top/sub/b": HookReplacedByGroup, "top/c": HookCoveredByGroup,
		"denied/d": HookCreated, "other/e": HookCreated,
	}
	if got := actions(rep); len(got) != len(want) {
		t.Fatalf("report %v, want %v", got, want)
	} else {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s (%s), want %s", k, got[k], reasonOf(rep, k), v)
			}
		}
	}
	if r := reasonOf(rep, "denied"); !strings.Contains(r, "403") || !strings.Contains(r, "Owner role") || !strings.Contains(r, "hooks.mode: project") {
		t.Errorf("the refusal does not say what to do: %q", r)
	}
	if n := srv.Requests(groupTest); n != 1 {
		t.Errorf("%d test deliveries to the group hook, want 1", n)
	}
	gh := srv.GroupHooks("top")
	if len(gh) != 1 || gh[0].URL != url || gh[0].SigningToken != signingToken || strings.Join(gh[0].Events, ",") != "pipeline_events,push_events" {
		t.Fatalf("group hook %+v", gh)
	}
	for p, n := range map[string]int{"top/a": 0, "top/sub/b": 0, "top/c": 0, "denied/d": 1, "other/e": 1} {
		if got := len(srv.Hooks(p)); got != n {
			t.Errorf("%s has %d hooks, want %d", p, got, n)
		}
	}
	if len(srv.GroupHooks("top/sub")) != 0 {
		t.Error("a hook on top/sub, which top's covers")
	}

	// Repaired like a project hook; idempotent otherwise.
	again, err := c.SyncHooks(ctx, projects, spec, false)
	if err != nil || again.Changed() != 0 {
		t.Fatalf("second sync: changed %d %v: %v", again.Changed(), err, actions(again))
	}
	// Someone turns pipeline events off in the UI.
	req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/groups/top/hooks/%d?pipeline_events=false", srv.APIURL(), gh[0].ID), nil)
	req.Header.Set("PRIVATE-TOKEN", srv.Token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("edit the group hook: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	fixed, err := c.SyncHooks(ctx, projects, spec, false)
	if err != nil || actions(fixed)["group top"] != HookUpdated {
		t.Fatalf("drifted group hook: %v %v", actions(fixed), err)
	}
}

// On a Free instance (404) every project keeps a project hook, and the
// report says group hooks need Premium; a group hook that does not answer
// its test delivery keeps the project hooks.
func TestSyncGroupHooksFallBack(t *testing.T) {
	t.Run("Free", func(t *testing.T) {
		srv, c, projects, url, _ := groupWorld(t, false)
		rep, err := c.SyncHooks(context.Background(), projects, HookSpec{URL: url, SecretToken: "s3cret", SigningToken: signingToken, Groups: []string{"top", "denied"}}, false)
		if err != nil {
			t.Fatal(err)
		}
		if r := reasonOf(rep, "top"); actions(rep)["group top"] != HookGroupRefused || !strings.Contains(r, "404") || !strings.Contains(r, "Premium") {
			t.Fatalf("top: %s %q", actions(rep)["group top"], r)
		}
		for _, p := range []string{"top/a", "top/sub/b", "top/c", "denied/d", "other/e"} {
			if len(srv.Hooks(p)) != 1 {
				t.Errorf("%s has %d hooks, want its project hook", p, len(srv.Hooks(p)))
			}
		}
	})
	t.Run("group hook does not answer", func(t *testing.T) {
		srv, c, projects, url, status := groupWorld(t, true)
		status.Store(http.StatusBadGateway)
		rep, err := c.SyncHooks(context.Background(), projects, HookSpec{URL: url, SecretToken: "s3cret", SigningToken: signingToken, Groups: []string{"top"}}, false)
		if err != nil {
			t.Fatal(err)
		}
		if a := actions(rep); a["group top"] != HookCreated || a["top/a"] != HookUnchanged || !strings.Contains(reasonOf(rep, "top/a"), "did not answer") {
			t.Fatalf("report %v, top/a: %q", a, reasonOf(rep, "top/a"))
		}
		if len(srv.Hooks("top/a")) != 1 || len(srv.Hooks("top/sub/b")) != 1 {
			t.Fatal("project hooks removed although the group hook did not answer")
		}
		if n := srv.Requests(groupTest); n != 1 {
			t.Errorf("%d test deliveries, want 1", n)
		}
	})
}

// With per-project secrets, each project hook gets its project's and each
// group hook its group's; hooks installed before with the shared secret
// are edited while SecretsPending says they may carry it, and left alone
// after.
func TestSyncHooksPerProjectSecrets(t *testing.T) {
	srv, c, projects, url, _ := groupWorld(t, true)
	ctx := context.Background()
	spec := HookSpec{URL: url, SecretToken: "s3cret", SigningToken: signingToken, Groups: []string{"top", "denied"},
		ProjectSecret:  func(id int64) string { return fmt.Sprintf("project-%d", id) },
		GroupSecret:    func(g string) string { return "group-" + g },
		SecretsPending: true}
	rep, err := c.SyncHooks(ctx, projects, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if h := srv.GroupHooks("top"); len(h) != 1 || h[0].Token != "group-top" {
		t.Errorf("group top's hooks %+v: want its group's secret", h)
	}
	for _, p := range projects {
		if strings.HasPrefix(p.Path, "top/") {
			continue // covered by the group hook
		}
		if h := srv.Hooks(p.Path); len(h) != 1 || h[0].Token != fmt.Sprintf("project-%d", p.ID) {
			t.Errorf("%s's hooks %+v: want its own secret", p.Path, h)
		}
	}
	if a := actions(rep); a["group top"] != HookCreated {
		t.Errorf("actions %v", a)
	}
	spec.SecretsPending = false
	rep, err = c.SyncHooks(ctx, projects, spec, false)
	if err != nil || rep.Changed() != 0 {
		t.Errorf("second sync, secrets installed: %d changed, %v; want nothing", rep.Changed(), err)
	}
	spec.SecretsPending = true
	rep, err = c.SyncHooks(ctx, projects, spec, true)
	if err != nil || rep.Count(HookUpdated) == 0 || !strings.Contains(reasonOf(rep, "top"), "secret not its own yet") {
		t.Errorf("secrets pending again (the secret changed): %v, %v; want every hook updated", actions(rep), err)
	}
}
