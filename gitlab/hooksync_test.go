package gitlab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

const hookURL = "https://depsd.example.com/hooks/gitlab"

var wantEvents = []string{"pipeline_events", "push_events"}

// hookReceiver is depsd's webhook endpoint as the fake delivers test
// requests to it; it answers status() (200 when nil).
func hookReceiver(t *testing.T, status func() int) string {
	t.Helper()
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		if status != nil {
			code = status()
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(recv.Close)
	return recv.URL + "/hooks/gitlab"
}

func TestSyncHooks(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now})
	// Test deliveries to re-enable g/permanent must reach a receiver.
	hookURL := hookReceiver(t, nil)
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
		"g/disabled":  {HookTemporarilyDisabled},
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
		otherBefore := otherHooks(srv, projects, hookURL)
		srv.ResetRequests()
		rep, err := c.SyncHooks(ctx, projects, spec, false)
		if err != nil {
			t.Fatal(err)
		}
		checkActions(t, rep, want)
		// new, drift, 2 duplicates, permanent, notoken; g/disabled is left
		// to GitLab's own retry.
		if rep.Changed() != 6 || rep.Count(HookDeletedDuplicate) != 2 {
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
			wantStatus := "executable"
			if p.Path == "g/disabled" {
				wantStatus = "temporarily_disabled" // nothing sent: GitLab retries at disabled_until
			}
			if !slices.Equal(h.Events, wantEvents) || !h.EnableSSLVerification || h.Token != "s3cret" ||
				h.AlertStatus != wantStatus || (wantStatus == "executable") != h.DisabledUntil.IsZero() || h.PushEventsBranchFilter != "" {
				t.Fatalf("%s: hook = %+v", p.Path, h)
			}
		}
		if n := srv.RequestCounts()["POST /projects/:id/hooks/:hook_id/test/:trigger"]; n != 1 {
			t.Fatalf("%d test requests, want 1 (g/permanent only): %v", n, srv.RequestCounts())
		}
		if d := srv.Deliveries(); len(d) != 1 || d[0].Event != gitlabtest.PushHook || d[0].State != gitlabtest.DeliveryDelivered {
			t.Fatalf("deliveries = %+v, want one delivered test push", d)
		}
		if after := otherHooks(srv, projects, hookURL); !equalSnap(otherBefore, after) {
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

func otherHooks(srv *gitlabtest.Server, ps []Project, hookURL string) map[string]string {
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
		{"permanently disabled", []Hook{with(func(h *Hook) { h.AlertStatus = "disabled" })}, []HookAction{HookReenabled}},
		{"permanently disabled with drift", []Hook{with(func(h *Hook) { h.AlertStatus = "disabled"; h.PipelineEvents = false })}, []HookAction{HookReenabled}},
		{"temporarily disabled", []Hook{with(func(h *Hook) { h.AlertStatus = "temporarily_disabled"; h.DisabledUntil = now.Add(time.Hour) })}, []HookAction{HookTemporarilyDisabled}},
		{"temporarily disabled with drift", []Hook{with(func(h *Hook) {
			h.AlertStatus = "temporarily_disabled"
			h.DisabledUntil = now.Add(time.Hour)
			h.PipelineEvents = false
		})}, []HookAction{HookUpdated}},
		{"old-style disabled_until only", []Hook{with(func(h *Hook) { h.AlertStatus = ""; h.DisabledUntil = now.Add(time.Minute) })}, []HookAction{HookTemporarilyDisabled}},
		{"disabled_until passed", []Hook{with(func(h *Hook) { h.AlertStatus = ""; h.DisabledUntil = now.Add(-time.Minute) })}, []HookAction{HookUnchanged}},
		{"duplicates keep the oldest", []Hook{with(func(h *Hook) { h.ID = 9 }), ok}, []HookAction{HookUnchanged, HookDeletedDuplicate}},
		{"URL differs by a slash is not ours", []Hook{with(func(h *Hook) { h.URL += "/" })}, []HookAction{HookCreated}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []HookAction
			for _, st := range planHooks(tt.hooks, spec, now, false) {
				got = append(got, st.Action)
				if st.test != (st.Action == HookReenabled) {
					t.Errorf("%s: test delivery = %v", st.Action, st.test)
				}
				if st.edit != (st.Action == HookUpdated || (st.Action == HookReenabled && len(st.Reasons) > 1)) {
					t.Errorf("%s %v: edit = %v", st.Action, st.Reasons, st.edit)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("actions = %v, want %v", got, tt.want)
			}
		})
	}
}

// A permanently disabled hook whose test delivery fails stays disabled on
// GitLab: reported as still-disabled (a change) on every run until the
// receiver answers, then reenabled, then unchanged.
func TestSyncHooksTestDeliveryFails(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now})
	var down atomic.Bool
	down.Store(true)
	hookURL := hookReceiver(t, func() int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	must(srv.AddProject(gitlabtest.Project{Path: "g/a", Files: map[string]string{"a": "b"}}))
	id := must(srv.AddHook("g/a", gitlabtest.Hook{URL: hookURL, Token: "s3cret", Events: wantEvents, EnableSSLVerification: true}))
	must(0, srv.DisableHook("g/a", id, time.Time{}))

	c, _ := newClient(t, srv, func(c *Config) { c.Now = clk.Now })
	ctx := context.Background()
	projects := must(c.ListProjects(ctx, Scope{Projects: []string{"g/a"}}))
	spec := HookSpec{URL: hookURL, SecretToken: "s3cret"}

	for run := 1; run <= 2; run++ {
		rep, err := c.SyncHooks(ctx, projects, spec, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Changes) != 1 || rep.Changes[0].Action != HookStillDisabled || rep.Changed() != 1 {
			t.Fatalf("run %d: %+v", run, rep.Changes)
		}
		if r := strings.Join(rep.Changes[0].Reasons, "; "); !strings.Contains(r, "GitLab keeps it disabled: the test delivery to "+hookURL+" failed") {
			t.Fatalf("run %d: reasons %q", run, r)
		}
		if st := srv.Hooks("g/a")[0].AlertStatus; st != "disabled" {
			t.Fatalf("run %d: alert_status %q after a failed test delivery", run, st)
		}
		if d := srv.Deliveries(); len(d) != run || d[run-1].StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("run %d: deliveries %+v", run, d)
		}
	}

	// Dry run sends nothing.
	srv.ResetRequests()
	rep, err := c.SyncHooks(ctx, projects, spec, true)
	if err != nil || rep.Changes[0].Action != HookReenabled || srv.TotalRequests() != 1 || len(srv.Deliveries()) != 2 {
		t.Fatalf("dry run: %+v, %v, %v", rep.Changes, err, srv.RequestCounts())
	}

	down.Store(false)
	rep, err = c.SyncHooks(ctx, projects, spec, false)
	if err != nil || rep.Changes[0].Action != HookReenabled {
		t.Fatalf("after recovery: %+v, %v", rep.Changes, err)
	}
	if st := srv.Hooks("g/a")[0].AlertStatus; st != "executable" {
		t.Fatalf("alert_status %q after a successful test delivery", st)
	}
	rep, err = c.SyncHooks(ctx, projects, spec, false)
	if err != nil || rep.Changed() != 0 {
		t.Fatalf("run after re-enabling: %+v, %v", rep.Changes, err)
	}
}
