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
