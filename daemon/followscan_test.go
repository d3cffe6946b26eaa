package daemon

import (
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// A replica reloads its graph for a scan another process stored, once,
// and not for its own scans, which load their graph themselves.
func TestFollowScanReloadsOnlyForAnotherProcessesScan(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian\n"})
	gl, cfg := testClient(t, srv), testConfig(t, srv)
	ctx := t.Context()
	d, err := New(ctx, Options{Config: cfg, Listen: "127.0.0.1:0", GitLab: gl})
	if err != nil {
		t.Fatal(err)
	}
	defer d.store.Close()
	if err := d.loadGraph(ctx); err != nil {
		t.Fatal(err)
	}
	follow := func() bool {
		t.Helper()
		reloaded, err := d.followScan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return reloaded
	}
	if follow() {
		t.Error("reloaded after the start's own scan")
	}
	if _, err := d.scan(ctx); err != nil {
		t.Fatal(err)
	}
	if follow() {
		t.Error("reloaded after its own scan")
	}

	// Another process (`depsd scan`, another replica) stores a newer scan.
	other, err := store.Open(ctx, cfg.State)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	projects, err := other.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	projects = append(projects, scan.Project{ID: 999, Path: "g/new", DefaultBranch: "main"})
	if err := other.ApplyScan(ctx, projects, scan.Meta{StartedAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if !follow() {
		t.Fatal("did not reload after another process's scan")
	}
	if g, _ := d.Graph(ctx); !g.Has("g/new") {
		t.Error("the reloaded graph lacks the other process's project")
	}
	if follow() {
		t.Error("reloaded twice for one scan")
	}
}
