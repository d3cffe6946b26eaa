package gitlabtest

import (
	"net/http"
	"testing"
)

// Group hooks: 404 on a Free instance, 403 without the Owner role (also
// below a group where it is denied), else the same API as project hooks
// with group_id.
func TestGroupHooksAccess(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "top/sub/a", "other/b")
	hooks := func(g string) string { return "/groups/" + pathID(g) + "/hooks" }
	body := map[string]any{"url": "https://depsd.example.com/hooks/gitlab", "pipeline_events": true, "signing_token": testSigningToken}

	if code, out := apiJSON(t, s, "GET", hooks("top"), nil); code != http.StatusNotFound || toJSON(out) != `{"message":"404 Not Found"}` {
		t.Fatalf("Free: %d %v", code, out)
	}
	s.SetPremium(true)
	if code, out := apiJSON(t, s, "GET", hooks("nope"), nil); code != http.StatusNotFound || toJSON(out) != `{"message":"404 Group Not Found"}` {
		t.Fatalf("unknown group: %d %v", code, out)
	}
	s.SetGroupOwner("other", false)
	for _, g := range []string{"other"} {
		if code, out := apiJSON(t, s, "POST", hooks(g), body); code != http.StatusForbidden || toJSON(out) != `{"message":"403 Forbidden"}` {
			t.Fatalf("not Owner of %s: %d %v", g, code, out)
		}
	}
	code, out := apiJSON(t, s, "POST", hooks("top"), body)
	h, _ := out.(map[string]any)
	if code != http.StatusCreated || h["group_id"] == nil || h["project_id"] != nil || h["signing_token_present"] != true || h["pipeline_events"] != true {
		t.Fatalf("create: %d %v", code, out)
	}
	id := itoa(int64(h["id"].(float64)))
	if code, out := apiJSON(t, s, "PUT", hooks("top")+"/"+id, map[string]any{"push_events": false}); code != 200 || out.(map[string]any)["push_events"] != false {
		t.Fatalf("edit: %d %v", code, out)
	}
	if got := s.GroupHooks("top"); len(got) != 1 || got[0].SigningToken != testSigningToken {
		t.Fatalf("stored: %+v", got)
	}
	s.SetGroupOwner("top/sub", false)
	if code, _ := apiJSON(t, s, "GET", hooks("top/sub"), nil); code != http.StatusForbidden {
		t.Fatalf("denied subgroup: %d", code)
	}
	if code, _ := apiJSON(t, s, "DELETE", hooks("top")+"/"+id, nil); code != http.StatusNoContent || len(s.GroupHooks("top")) != 0 {
		t.Fatalf("delete: %d", code)
	}
}

// A group hook gets the events of the projects below the group; a project
// with both a project and a group hook gets two deliveries of one event,
// each with its own Idempotency-Key (GitLab runs each hook on its own), the
// same X-Gitlab-Event-UUID. The test trigger of a group hook delivers a
// push of one of its projects.
func TestGroupHookDeliveries(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	seed(t, s, "top/sub/a", "other/b")
	s.SetPremium(true)
	group, project := newReceiver(t), newReceiver(t)
	mustDo[int64](t)(s.AddGroupHook("top", Hook{URL: group.URL, Token: "t", SigningToken: testSigningToken, Events: []string{"push_events", "pipeline_events"}}))
	mustDo[int64](t)(s.AddHook("top/sub/a", Hook{URL: project.URL, Token: "t", Events: []string{"push_events", "pipeline_events"}}))
	mustDo[string](t)(s.SetFile("top/sub/a", "Containerfile", "FROM debian:12\n"))
	mustDo[string](t)(s.SetFile("other/b", "Containerfile", "FROM debian:12\n"))
	g, p := group.next(t), project.next(t)
	if g.header.Get("Idempotency-Key") == p.header.Get("Idempotency-Key") || g.header.Get("X-Gitlab-Event-UUID") != p.header.Get("X-Gitlab-Event-UUID") {
		t.Fatalf("keys: group %v, project %v", g.header, p.header)
	}
	if g.header.Get("webhook-signature") == "" || p.header.Get("webhook-signature") != "" {
		t.Fatalf("signatures: group %q, project %q", g.header.Get("webhook-signature"), p.header.Get("webhook-signature"))
	}
	ds := mustDo[[]Delivery](t)(s.WaitDeliveries(testCtx(t), 2))
	if len(ds) != 2 || ds[0].GroupID == ds[1].GroupID {
		t.Fatalf("deliveries %+v", ds)
	}
	group.none(t) // other/b is not below top

	code, out := apiJSON(t, s, "POST", "/groups/top/hooks/"+itoa(s.GroupHooks("top")[0].ID)+"/test/push_events", nil)
	if code != http.StatusCreated {
		t.Fatalf("test: %d %v", code, out)
	}
	if r := group.next(t); r.header.Get("X-Gitlab-Event") != PushHook {
		t.Fatalf("test delivery %v", r.header)
	}
	group.status.Store(http.StatusInternalServerError)
	if code, _ := apiJSON(t, s, "POST", "/groups/top/hooks/"+itoa(s.GroupHooks("top")[0].ID)+"/test/push_events", nil); code != http.StatusUnprocessableEntity {
		t.Fatalf("failed test: %d", code)
	}
}
