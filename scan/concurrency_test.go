package scan_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scan"
)

// pausingGitLab lets the test hold a scan between listing the projects and
// storing its result, as a slow maintenance scan is held by rate limits.
type pausingGitLab struct {
	scan.GitLab
	paused, resume chan struct{}
}

func (p *pausingGitLab) ListProjects(ctx context.Context, scope gitlab.Scope) ([]gitlab.Project, error) {
	ps, err := p.GitLab.ListProjects(ctx, scope)
	close(p.paused)
	<-p.resume
	return ps, err
}

// Scans run from the maintenance schedule, from push events and from the
// CLI. A scan that listed the projects before a push and stores after the push's
// own rescan would put the old files (and graph) back: it is refused.
func TestOlderScanDoesNotOverwriteNewer(t *testing.T) {
	c := newClocked(t, baseAndApp()...)
	srv, gl, st, o := c.srv, c.gl, c.st, c.opts
	ctx := context.Background()
	if _, err := scan.Run(ctx, gl, st, o); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(2 * time.Hour)

	slow := &pausingGitLab{GitLab: gl, paused: make(chan struct{}), resume: make(chan struct{})}
	done := make(chan error, 1)
	go func() { _, err := scan.Run(ctx, slow, st, o); done <- err }() // the maintenance scan
	<-slow.paused

	// A push makes app build FROM base; its rescan stores the edge.
	if _, err := srv.SetFile("g/app", "Containerfile", "FROM registry.example.com/g/base\n"); err != nil {
		t.Fatal(err)
	}
	res, err := scan.Run(ctx, gl, st, o)
	if err != nil || res.Edges != 1 {
		t.Fatalf("push rescan: %+v, %v", res, err)
	}
	close(slow.resume)
	if err := <-done; !errors.Is(err, scan.ErrConflict) {
		t.Fatalf("the older scan: err = %v, want ErrConflict", err)
	}
	ps, err := st.Projects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := scan.GraphOf(ps); len(g.Downstream("g/base")) != 1 {
		t.Errorf("after the older scan stored its result: downstream of g/base = %v, want [g/app] (the push's edge was rolled back)", g.Downstream("g/base"))
	}
}
