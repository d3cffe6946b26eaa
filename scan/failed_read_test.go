package scan

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store"
)

// A push changes a Containerfile; the next scan (more than GitLab's activity
// window after the push) cannot read the files and keeps the old ones, "to be
// retried on the next scan". The next scan must read the project again. (It
// did not, when the failed scan stored the old head with a fresh
// HeadCheckedAt, which FillHeadCommits then trusted as proof that nothing
// moved; now no head is stored.)
func TestFailedReadIsRetriedAfterActivityWindow(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	srv := gitlabtest.New(gitlabtest.Options{Token: "t", Now: clock})
	t.Cleanup(srv.Close)
	for _, p := range []gitlabtest.Project{
		{Path: "g/base", Files: map[string]string{"Containerfile": "FROM debian\n"}},
		{Path: "g/app", Files: map[string]string{"Containerfile": "FROM alpine\n"}},
	} {
		if _, err := srv.AddProject(p); err != nil {
			t.Fatal(err)
		}
	}
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: "t", RequestsPerMinute: -1, Now: clock,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := Options{Scope: gitlab.Scope{Groups: []string{"g"}}, Now: clock}
	ctx := context.Background()
	if _, err := Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}

	// app now builds FROM base.
	if _, err := srv.SetFile("g/app", "Containerfile", "FROM registry.example.com/g/base\n"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour) // e.g. depsd was down; the next scan is later
	srv.Fail(gitlabtest.Fault{Endpoint: "GET /projects/:id/repository/files/:file_path/raw", Status: 500, Times: 1000})
	if _, err := Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}
	srv.ClearFaults()

	now = now.Add(time.Minute)
	res, err := Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesFetched != 1 || res.Edges != 1 {
		t.Errorf("scan after the failure: files fetched %d, edges %d; want g/app read again (1) and its new edge (1)", res.FilesFetched, res.Edges)
	}
	// Any number of later scans: still stale.
	now = now.Add(6 * time.Hour)
	res, err = Run(ctx, gl, st, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Edges != 1 {
		t.Errorf("6h later: edges %d, want 1 (the graph stays stale until the next push)", res.Edges)
	}
}
