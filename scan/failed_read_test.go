package scan_test

import (
	"context"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
)

// A push changes a Containerfile; the next scan (more than GitLab's activity
// window after the push) cannot read the files and keeps the old ones, "to be
// retried on the next scan". The next scan must read the project again. (It
// did not, when the failed scan stored the old head with a fresh
// HeadCheckedAt, which the activity rule then trusted as proof that nothing
// moved; now no version is stored.)
func TestFailedReadIsRetriedAfterActivityWindow(t *testing.T) {
	c := newClocked(t, baseAndApp()...)
	srv, gl, st, o := c.srv, c.gl, c.st, c.opts
	ctx := context.Background()
	if _, err := scan.Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}

	// app now builds FROM base.
	if _, err := srv.SetFile("g/app", "Containerfile", "FROM registry.example.com/g/base\n"); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(2 * time.Hour) // e.g. depsd was down; the next scan is later
	// GraphQL fails, and so does REST, which the scan falls back to.
	srv.Fail(gitlabtest.Fault{Endpoint: gitlabtest.GraphQLEndpoint, Status: 500, Times: 1000})
	srv.Fail(gitlabtest.Fault{Endpoint: "GET /projects/:id/repository/blobs/:sha/raw", Status: 500, Times: 1000})
	if _, err := scan.Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}
	srv.ClearFaults()

	c.now = c.now.Add(time.Minute)
	res, err := scan.Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesFetched != 1 || res.Edges != 1 {
		t.Errorf("scan after the failure: files fetched %d, edges %d; want g/app read again (1) and its new edge (1)", res.FilesFetched, res.Edges)
	}
	// Any number of later scans: still stale.
	c.now = c.now.Add(6 * time.Hour)
	res, err = scan.Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Edges != 1 {
		t.Errorf("6h later: edges %d, want 1 (the graph stays stale until the next push)", res.Edges)
	}
}

// TestRescanLeavesUnchangedProjectsAsStored: a rescan that finds a project
// as it was (its last activity older than GitLab's activity window, before
// the check that vouched for it) keeps its stored times, so that its row is
// not rewritten: every rescan after a push rewrote every row, holding the
// write lock, and the webhooks' answers queued behind it, for milliseconds.
// A project whose files changed is read again, and its times move.
func TestRescanLeavesUnchangedProjectsAsStored(t *testing.T) {
	c := newClocked(t, baseAndApp()...)
	srv, gl, st, o := c.srv, c.gl, c.st, c.opts
	ctx := context.Background()
	c.now = c.now.Add(2 * time.Hour) // both projects' activity is old
	if _, err := scan.Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}
	before, err := st.Project(ctx, "g/base")
	if err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(time.Hour)
	if _, err := srv.SetFile("g/app", "Containerfile", "FROM registry.example.com/g/base\n"); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(time.Minute)
	res, err := scan.Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unchanged != 1 || res.FilesFetched != 1 {
		t.Fatalf("rescan: %d unchanged, %d read; want g/base unchanged and g/app read", res.Unchanged, res.FilesFetched)
	}
	after, err := st.Project(ctx, "g/base")
	if err != nil {
		t.Fatal(err)
	}
	if !after.ScannedAt.Equal(before.ScannedAt) || !after.HeadCheckedAt.Equal(before.HeadCheckedAt) {
		t.Errorf("g/base, unchanged: scanned %v, checked %v; want its stored %v, %v", after.ScannedAt, after.HeadCheckedAt, before.ScannedAt, before.HeadCheckedAt)
	}
	app, err := st.Project(ctx, "g/app")
	if err != nil {
		t.Fatal(err)
	}
	if !app.ScannedAt.Equal(c.now) || !app.HeadCheckedAt.Equal(c.now) {
		t.Errorf("g/app, read again: scanned %v, checked %v; want %v", app.ScannedAt, app.HeadCheckedAt, c.now)
	}
	// Unchanged again at a later scan: the kept check still vouches.
	c.now = c.now.Add(6 * time.Hour)
	if _, err := scan.Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}
	if later, err := st.Project(ctx, "g/base"); err != nil || !later.ScannedAt.Equal(before.ScannedAt) {
		t.Errorf("g/base at a later scan: scanned %v, %v; want still %v", later.ScannedAt, err, before.ScannedAt)
	}
}
