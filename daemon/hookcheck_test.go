package daemon

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store"
)

// The webhook check the leader makes is stored, and the health page of a
// replica that never led shows it.
func TestHookCheckShownByEveryReplica(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian\n"})
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	cfg.Hooks.URL = "https://depsd.example.com/hooks/gitlab"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr := make(chan string, 1)
	newDaemon := func(id string) *Daemon {
		d, err := New(ctx, Options{Config: cfg, Listen: "127.0.0.1:0", GitLab: gl, ReplicaID: id,
			Listening: func(a string) { addr <- a }})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	// The leader's look at the hooks (a dry run at the start of its term).
	leader := newDaemon("leader")
	if _, err := leader.syncHooks(ctx, true); err != nil {
		t.Fatal(err)
	}
	c, ok, err := leader.store.HookCheck(ctx)
	if err != nil || !ok || c.URL != cfg.Hooks.URL || len(c.Report.Changes) != 1 ||
		c.Report.Changes[0].Project != "g/app" || c.Report.Changes[0].Action != gitlab.HookCreated {
		t.Fatalf("stored check %+v, %v, %v; want g/app's missing hook", c, ok, err)
	}
	// A later one, as a maintenance run would store it.
	later := store.HookCheck{URL: cfg.Hooks.URL, CheckedAt: time.Now(), Report: gitlab.HookReport{Changes: []gitlab.HookChange{
		{Project: "g/app", ProjectID: 1, HookID: 7, Action: gitlab.HookStillDisabled, Reasons: []string{"test delivery failed: 502"}}}}}
	if err := leader.store.SaveHookCheck(ctx, later); err != nil {
		t.Fatal(err)
	}
	leader.store.Close()

	// Another replica, which never leads: the lease is someone else's.
	replica := newDaemon("replica")
	if _, err := replica.store.TryLease(ctx, leaderLease, "leader/1", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- replica.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	resp, err := http.Get("http://" + wait(t, "the replica to listen", addr) + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, leading := replica.elector.state(); leading {
		t.Fatal("the replica leads")
	}
	for _, want := range []string{"re-enabling failed", "test delivery failed: 502"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("health page of the replica lacks %q", want)
		}
	}
}
