package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
)

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExternalImageChangeStartsChain runs the daemon against a real local
// registry (docker-registry) and the fake GitLab: when the tag an app is
// built FROM gets a new digest, the app and its downstream are rebuilt.
func TestExternalImageChangeStartsChain(t *testing.T) {
	reg := registrytest.Start(t)
	image := reg + "/team/base:1"
	registrytest.Push(t, image)

	srv := testGitLab(t, gitlabtest.Options{Pipelines: gitlabtest.Behavior{Duration: 50 * time.Millisecond, Outcome: "success"}},
		map[string]string{
			"g/app": "FROM " + image + "\n",
			"g/lib": "FROM registry.example.com/g/app:latest\n",
		})
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	cfg.Scheduler.WatchExternal = true
	cfg.Scheduler.WatchInterval = time.Hour
	// A registry outside the instance, on 127.0.0.1 over plain HTTP: an
	// operator lists it.
	cfg.Images.InsecureRegistries = []string{reg}
	clock := clocktest.New(time.Now())

	d, ctx := runDaemon(t, Options{Config: cfg, GitLab: gl, SchedulerClock: clock,
		PollInterval: 50 * time.Millisecond, ReconcileInterval: 200 * time.Millisecond})

	// The first check only records the digest.
	digest := func() string {
		entries, err := ListSchedules(context.Background(), cfg.Scheduler, d.store, nil)
		if err != nil {
			return ""
		}
		for _, e := range entries {
			if e.Target == image {
				return e.Digest
			}
		}
		return ""
	}
	eventually(t, "the first digest to be recorded", func() bool { return digest() != "" })
	first := digest()
	if n := len(srv.Pipelines("g/app")); n != 0 {
		t.Fatalf("the first observation triggered %d pipelines", n)
	}

	second := registrytest.Push(t, image)
	if second == first {
		t.Fatal("the registry kept the digest")
	}
	clock.Advance(time.Hour + time.Minute)
	eventually(t, "g/lib to be rebuilt after g/app", func() bool {
		ps := srv.Pipelines("g/lib")
		return len(ps) == 1 && ps[0].Status == "success"
	})
	if n := len(srv.Pipelines("g/app")); n != 1 {
		t.Errorf("g/app built %d times, want 1", n)
	}
	views, err := d.Engine().Chains(ctx, chain.Filter{})
	if err != nil || len(views) != 1 {
		t.Fatalf("chains %+v, %v", views, err)
	}
	r := views[0].Reasons[0]
	if r.Kind != chain.ReasonDigest || !strings.Contains(r.Detail, image) || views[0].Roots[0] != "g/app" {
		t.Errorf("chain reason %+v roots %v", r, views[0].Roots)
	}
	if digest() != second {
		t.Errorf("digest %s not updated to %s", digest(), second)
	}
}

// TestStartWithGitLabDown: a daemon that cannot reach GitLab at start
// serves the last stored scan; without one it refuses to start.
func TestStartWithGitLabDown(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian\n"})
	cfg := testConfig(t, srv)
	run := func(state string) (ready bool, err error) {
		cfg.State = state
		gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: "t", RequestsPerMinute: -1, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d, err := New(ctx, Options{Config: cfg, Listen: "127.0.0.1:0", GitLab: gl,
			Listening: func(string) { ready = true; cancel() }})
		if err != nil {
			t.Fatal(err)
		}
		return ready, d.Run(ctx)
	}
	scanned := filepath.Join(t.TempDir(), "scanned.db")
	if ready, err := run(scanned); !ready || err != nil {
		t.Fatalf("with GitLab up: ready %v, %v", ready, err)
	}
	srv.Close() // GitLab goes away
	if ready, err := run(scanned); !ready || err != nil {
		t.Errorf("with a stored scan: ready %v, %v; want serving", ready, err)
	}
	if ready, err := run(filepath.Join(t.TempDir(), "empty.db")); ready || err == nil || !strings.Contains(err.Error(), "first scan") {
		t.Errorf("without a stored scan: ready %v, %v; want a first-scan error", ready, err)
	}
}
