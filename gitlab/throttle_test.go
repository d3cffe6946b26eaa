package gitlab

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// GitLab's pipeline creation rate limit answers 400, not 429: the client
// must call it retryable (the outbox tries again later), not permanent
// like "Reference not found", and must not retry it itself (the window is
// a minute; the outbox's backoff handles that, and the create is a POST).
func TestPipelineCreationThrottleIsRetryableLater(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now,
		PipelineCreationLimit: gitlabtest.PipelineCreationLimit{PerProjectCommitUser: 2}})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"a": "b"}}))
	other := must(srv.AddProject(gitlabtest.Project{Path: "g/other", Files: map[string]string{"a": "b"}}))
	c, rec := newClient(t, srv, nil)
	ctx := context.Background()

	for range 2 {
		if _, err := c.CreatePipeline(ctx, id, "main", CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.CreatePipeline(ctx, id, "main", CreateOptions{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), gitlabtest.TooManyPipelines) {
		t.Fatalf("third create in a minute: %v, want 400 %q", err, gitlabtest.TooManyPipelines)
	}
	if !IsRetryable(err) || IsPermanent(err) {
		t.Errorf("throttle: retryable %v, permanent %v; want retryable, not permanent", IsRetryable(err), IsPermanent(err))
	}
	if n := c.Throttled(); n != 1 {
		t.Errorf("Throttled() = %d after one pipeline-creation throttle, want 1", n)
	}
	if ae.Attempts != 1 || len(rec.all()) != 0 {
		t.Errorf("the client retried the throttled POST itself: %d attempts, waits %v", ae.Attempts, rec.all())
	}
	if n := len(srv.Pipelines("g/app")); n != 2 {
		t.Errorf("%d pipelines after a throttled create, want 2", n)
	}
	// The limit is per project (and commit and user): another project is
	// not throttled.
	if _, err := c.CreatePipeline(ctx, other, "main", CreateOptions{}); err != nil {
		t.Errorf("other project: %v", err)
	}
	// A minute later the window is new.
	clk.Advance(time.Minute)
	if _, err := c.CreatePipeline(ctx, id, "main", CreateOptions{}); err != nil {
		t.Errorf("a minute later: %v", err)
	}
	// A bad ref stays permanent under the throttle too.
	_, err = c.CreatePipeline(ctx, id, "nope", CreateOptions{})
	if !IsPermanent(err) || !strings.Contains(err.Error(), "Reference not found") {
		t.Errorf("bad ref: %v", err)
	}
}

// A 429 slows the whole client: calls started after it wait until the
// reset GitLab named (one wait, by the one retry layer), and GitLab's
// announced RateLimit-Limit becomes the client's limit when lower.
func TestTooManyRequestsSlowsTheClientDown(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"a": "b"}}))
	c, rec := newClient(t, srv, func(cfg *Config) { cfg.Now = clk.Now; cfg.RequestsPerMinute = 0 })
	perMinute := func() int { return int(math.Round(c.transport.limits.perMinute())) }
	if got := perMinute(); got != 2000 {
		t.Fatalf("default limit %v/min, want gitlab.com's 2,000", got)
	}
	ctx := context.Background()
	srv.Fail(gitlabtest.Fault{Endpoint: branchEndpoint, Status: http.StatusTooManyRequests, RetryAfter: 7 * time.Second})
	if _, err := headCommit(ctx, c, id, "main"); err != nil {
		t.Fatal(err)
	}
	if w := rec.all(); len(w) != 1 || w[0] != 7*time.Second {
		t.Fatalf("the throttled call waited %v, want once 7s", w)
	}
	if n := c.Throttled(); n != 1 {
		t.Errorf("Throttled() = %d after one 429, want 1", n)
	}
	// Another call, at the same instant: it waits out the reset too.
	if _, err := headCommit(ctx, c, id, "main"); err != nil {
		t.Fatal(err)
	}
	if w := rec.all(); len(w) != 2 || w[1] != 7*time.Second {
		t.Fatalf("waits %v: a new call did not wait for GitLab's reset", w)
	}
	// The fake announces RateLimit-Limit: 600.
	if got := perMinute(); got != 600 {
		t.Errorf("limit after a 429 announcing 600/min: %v/min", got)
	}
	clk.Advance(8 * time.Second)
	if _, err := headCommit(ctx, c, id, "main"); err != nil {
		t.Fatal(err)
	}
	if w := rec.all(); len(w) != 2 {
		t.Errorf("waits %v: a call after the reset waited", w)
	}
	if n := srv.Requests(branchEndpoint); n != 4 {
		t.Errorf("%d requests, want 4 (one retried once)", n)
	}
	if n := c.Throttled(); n != 1 {
		t.Errorf("Throttled() = %d after one 429 and three successes, want 1", n)
	}
}

// A 429 whose Retry-After is longer than the client retries for fails that
// call, and still holds back every other call until GitLab's reset.
func TestTooManyRequestsWithALongWaitStillPausesTheClient(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/app", Files: map[string]string{"a": "b"}}))
	c, rec := newClient(t, srv, func(cfg *Config) { cfg.Now = clk.Now; cfg.MaxRetryAfter = time.Minute })
	ctx := context.Background()
	srv.Fail(gitlabtest.Fault{Endpoint: branchEndpoint, Status: http.StatusTooManyRequests, RetryAfter: 5 * time.Minute})
	if _, err := headCommit(ctx, c, id, "main"); err == nil {
		t.Fatal("a call asked to wait 5m, past MaxRetryAfter, succeeded")
	}
	if _, err := headCommit(ctx, c, id, "main"); err != nil {
		t.Fatal(err)
	}
	if w := rec.all(); len(w) != 1 || w[0] != 5*time.Minute {
		t.Fatalf("waits %v: the next call did not wait out GitLab's 5m reset", w)
	}
}
