package gitlab

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

const hookURL = "https://depsd.example.com/hooks/gitlab"

var wantEvents = []string{"pipeline_events", "push_events"}

func TestSyncHooks(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now})
	good := gitlabtest.Hook{URL: hookURL, Token: "s3cret", Events: wantEvents, EnableSSLVerification: true}
	other := gitlabtest.Hook{URL: "https://chat.example.com/notify", Token: "theirs", Events: []string{"push_events", "tag_push_events"}}
	setup := map[string][]gitlabtest.Hook{
		"g/new":       nil,
		"g/ok":        {good, other},
		"g/drift":     {{URL: hookURL, Token: "s3cret", Events: []string{"push_events", "merge_requests_events"}, EnableSSLVerification: false}},
		"g/dupes":     {good, other, good, good},
		"g/disabled":  {good},
		"g/permanent": {good},
		"g/notoken":   {{URL: hookURL, Events: wantEvents, EnableSSLVerification: true}},
	}
	for path, hooks := range setup {
		must(srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"a": "b"}}))
		for _, h := range hooks {
			must(srv.AddHook(path, h))
		}
	}
	must(0, srv.DisableHook("g/disabled", srv.Hooks("g/disabled")[0].ID, clk.Now().Add(time.Hour)))
	must(0, srv.DisableHook("g/permanent", srv.Hooks("g/permanent")[0].ID, time.Time{}))

	c, _ := newClient(t, srv, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	projects, err := c.ListProjects(ctx, Scope{Groups: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := HookSpec{URL: hookURL, SecretToken: "s3cret"}
	want := map[string][]HookAction{
		"g/new":       {HookCreated},
		"g/ok":        {HookUnchanged},
		"g/drift":     {HookUpdated},
		"g/dupes":     {HookUnchanged, HookDeletedDuplicate, HookDeletedDuplicate},
		"g/disabled":  {HookReenabled},
		"g/permanent": {HookReenabled},
		"g/notoken":   {HookUpdated},
	}

	t.Run("dry run changes nothing", func(t *testing.T) {
		before := snapshot(srv, projects)
		srv.ResetRequests()
		rep, err := c.SyncHooks(ctx, projects, spec, true)
		if err != nil {
			t.Fatal(err)
		}
		checkActions(t, rep, want)
		if !rep.DryRun || srv.TotalRequests() != int64(len(projects)) {
			t.Fatalf("dry run sent %d requests, want only %d lists", srv.TotalRequests(), len(projects))
		}
		if after := snapshot(srv, projects); !equalSnap(before, after) {
			t.Fatal("dry run changed hooks")
		}
	})

	t.Run("sync", func(t *testing.T) {
		otherBefore := otherHooks(srv, projects)
		rep, err := c.SyncHooks(ctx, projects, spec, false)
		if err != nil {
			t.Fatal(err)
		}
		checkActions(t, rep, want)
		if rep.Changed() != 7 || rep.Count(HookDeletedDuplicate) != 2 {
			t.Fatalf("changed = %d, report = %+v", rep.Changed(), rep)
		}
		for _, p := range projects {
			var mine []gitlabtest.Hook
			for _, h := range srv.Hooks(p.Path) {
				if h.URL == hookURL {
					mine = append(mine, h)
				}
			}
			if len(mine) != 1 {
				t.Fatalf("%s has %d depsd hooks", p.Path, len(mine))
			}
			h := mine[0]
			if !slices.Equal(h.Events, wantEvents) || !h.EnableSSLVerification || h.Token != "s3cret" ||
				h.AlertStatus != "executable" || !h.DisabledUntil.IsZero() || h.PushEventsBranchFilter != "" {
				t.Fatalf("%s: hook = %+v", p.Path, h)
			}
		}
		if after := otherHooks(srv, projects); !equalSnap(otherBefore, after) {
			t.Fatalf("other hooks touched:\n%v\n%v", otherBefore, after)
		}
	})

	t.Run("second run changes nothing", func(t *testing.T) {
		srv.ResetRequests()
		rep, err := c.SyncHooks(ctx, projects, spec, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Changed() != 0 || len(rep.Changes) != len(projects) {
			t.Fatalf("second run: %+v", rep.Changes)
		}
		if srv.TotalRequests() != int64(len(projects)) {
			t.Fatalf("second run sent %v", srv.RequestCounts())
		}
	})

	t.Run("token rotation", func(t *testing.T) {
		rotated := HookSpec{URL: hookURL, SecretToken: "n3w", RotateToken: true}
		rep, err := c.SyncHooks(ctx, projects, rotated, false)
		if err != nil || rep.Count(HookUpdated) != len(projects) {
			t.Fatalf("rotation: %+v, %v", rep.Changes, err)
		}
		for _, p := range projects {
			if h := srv.Hooks(p.Path); !slices.ContainsFunc(h, func(h gitlabtest.Hook) bool { return h.URL == hookURL && h.Token == "n3w" }) {
				t.Fatalf("%s: token not rotated", p.Path)
			}
		}
	})

	t.Run("failures are per project", func(t *testing.T) {
		srv.Fail(gitlabtest.Fault{Endpoint: "GET /projects/:id/hooks", Status: 403})
		rep, err := c.SyncHooks(ctx, projects, spec, false)
		if err == nil || !strings.Contains(err.Error(), "sync hooks of g/") || len(rep.Changes) != len(projects)-1 {
			t.Fatalf("err = %v, %d changes", err, len(rep.Changes))
		}
	})
}

func checkActions(t *testing.T, rep HookReport, want map[string][]HookAction) {
	t.Helper()
	got := map[string][]HookAction{}
	for _, ch := range rep.Changes {
		got[ch.Project] = append(got[ch.Project], ch.Action)
		if ch.Action != HookUnchanged && len(ch.Reasons) == 0 {
			t.Errorf("%s: %s without a reason", ch.Project, ch.Action)
		}
	}
	for p, w := range want {
		if !slices.Equal(got[p], w) {
			t.Errorf("%s: actions %v, want %v", p, got[p], w)
		}
	}
}

func snapshot(srv *gitlabtest.Server, ps []Project) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		var b strings.Builder
		for _, h := range srv.Hooks(p.Path) {
			b.WriteString(hookString(h))
		}
		out[p.Path] = b.String()
	}
	return out
}

func otherHooks(srv *gitlabtest.Server, ps []Project) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		for _, h := range srv.Hooks(p.Path) {
			if h.URL != hookURL {
				out[p.Path] += hookString(h)
			}
		}
	}
	return out
}

func hookString(h gitlabtest.Hook) string {
	return strings.Join([]string{itoa(h.ID), h.URL, h.Token, strings.Join(h.Events, ","), h.AlertStatus}, "|") + "\n"
}

func equalSnap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestPlanHooks(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	yes, no := true, false
	spec := HookSpec{URL: hookURL, SecretToken: "s"}
	ok := Hook{ID: 5, URL: hookURL, PushEvents: true, PipelineEvents: true, EnableSSLVerification: true, AlertStatus: "executable"}
	with := func(f func(*Hook)) Hook { h := ok; f(&h); return h }
	tests := []struct {
		name  string
		hooks []Hook
		want  []HookAction
	}{
		{"none", nil, []HookAction{HookCreated}},
		{"only others", []Hook{{ID: 1, URL: "https://other"}}, []HookAction{HookCreated}},
		{"correct", []Hook{ok}, []HookAction{HookUnchanged}},
		{"token presence unknown", []Hook{with(func(h *Hook) { h.TokenPresent = nil })}, []HookAction{HookUnchanged}},
		{"token present", []Hook{with(func(h *Hook) { h.TokenPresent = &yes })}, []HookAction{HookUnchanged}},
		{"token missing", []Hook{with(func(h *Hook) { h.TokenPresent = &no })}, []HookAction{HookUpdated}},
		{"branch filter", []Hook{with(func(h *Hook) { h.PushEventsBranchFilter = "main" })}, []HookAction{HookUpdated}},
		{"old-style disabled_until only", []Hook{with(func(h *Hook) { h.AlertStatus = ""; h.DisabledUntil = now.Add(time.Minute) })}, []HookAction{HookReenabled}},
		{"disabled_until passed", []Hook{with(func(h *Hook) { h.AlertStatus = ""; h.DisabledUntil = now.Add(-time.Minute) })}, []HookAction{HookUnchanged}},
		{"duplicates keep the oldest", []Hook{with(func(h *Hook) { h.ID = 9 }), ok}, []HookAction{HookUnchanged, HookDeletedDuplicate}},
		{"URL differs by a slash is not ours", []Hook{with(func(h *Hook) { h.URL += "/" })}, []HookAction{HookCreated}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []HookAction
			for _, st := range planHooks(tt.hooks, spec, now) {
				got = append(got, st.Action)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("actions = %v, want %v", got, tt.want)
			}
		})
	}
}
