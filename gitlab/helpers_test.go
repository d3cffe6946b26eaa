package gitlab

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	gl "gitlab.com/gitlab-org/api/client-go/v2"
)

// recorder replaces real sleeping in retries and records the waits.
type recorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *recorder) all() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.waits...)
}

// clock is a settable clock shared by the fake and the client.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFake(t testing.TB, opts gitlabtest.Options) *gitlabtest.Server {
	t.Helper()
	srv := gitlabtest.New(opts)
	t.Cleanup(srv.Close)
	return srv
}

// newClient returns a client for srv that never really sleeps between
// retries and has no client-side rate limit.
func newClient(t testing.TB, srv *gitlabtest.Server, mod func(*Config)) (*Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Sleep: rec.sleep}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func addProjects(t testing.TB, srv *gitlabtest.Server, group string, n int) {
	t.Helper()
	for i := range n {
		if _, err := srv.AddProject(gitlabtest.Project{
			Path:  fmt.Sprintf("%s/p%04d", group, i),
			Files: map[string]string{"Containerfile": "FROM debian:bookworm\n"},
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// headCommit returns the id of the head commit of a branch: a small GET
// through the client's retry, throttle and concurrency path, for the tests
// of that path (the client itself has no use for it).
func headCommit(ctx context.Context, c *Client, projectID int64, branch string) (string, error) {
	var b *gl.Branch
	err := c.call(ctx, true, func(o ...gl.RequestOptionFunc) (*gl.Response, error) {
		var resp *gl.Response
		var err error
		b, resp, err = c.gl.Branches.GetBranch(projectID, branch, o...)
		return resp, err
	})
	if err != nil {
		return "", fmt.Errorf("get branch %s of project %d: %w", branch, projectID, err)
	}
	if b.Commit == nil || b.Commit.ID == "" {
		return "", fmt.Errorf("get branch %s of project %d: answer has no commit", branch, projectID)
	}
	return b.Commit.ID, nil
}
