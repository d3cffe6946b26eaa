package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// deleteAfterFirstPage deletes a project of page 1 once page 1 has been
// answered, as a concurrent deletion in GitLab would.
type deleteAfterFirstPage struct {
	next http.RoundTripper
	once sync.Once
	do   func()
}

func (d *deleteAfterFirstPage) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.URL.Path, "/projects") && r.URL.Query().Get("page") == "1" {
		d.once.Do(d.do)
	}
	return resp, err
}

// A project deleted (or archived) in the group while the pages are read
// shifts the remaining ones by one: the first project of page 2 slides onto
// page 1, which was already read, and disappears from the scan although it
// still exists, and the daemon would drop it from the graph until the next
// scan. Each page carries X-Total, so the shift is detected and the group
// listed again.
func TestPaginationShiftDoesNotLoseProject(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	addProjects(t, srv, "g", 30)
	tr := &deleteAfterFirstPage{next: http.DefaultTransport, do: func() {
		if err := srv.DeleteProject("g/p0000"); err != nil {
			panic(err)
		}
	}}
	c, _ := newClient(t, srv, func(c *Config) {
		c.PerPage = 10
		c.Concurrency = 1
		c.HTTPClient = &http.Client{Transport: tr}
	})
	got, err := c.ListProjects(context.Background(), Scope{Groups: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range got {
		seen[p.Path] = true
	}
	var missing []string
	for i := 1; i < 30; i++ {
		if p := fmt.Sprintf("g/p%04d", i); !seen[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("existing projects missing from the listing: %v", missing)
	}
}

// The client's own queueing (concurrency semaphore, rate limiter) happens
// inside the HTTP transport; the time a request waits for its turn must not
// count against the request timeout, or a scope with many single projects
// (one goroutine each, all at once) would time the later ones out before
// they are sent, although GitLab is healthy. Scaled down: 10 req/s, 200 ms
// timeout, 6 single projects.
func TestQueueTimeDoesNotCountAgainstHTTPTimeout(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	var paths []string
	for i := range 6 {
		p := fmt.Sprintf("g/s%d", i)
		must(srv.AddProject(gitlabtest.Project{Path: p, Files: map[string]string{"a": "b"}}))
		paths = append(paths, p)
	}
	c, _ := newClient(t, srv, func(c *Config) {
		c.RequestsPerMinute = 600
		c.Concurrency = 1
		c.MaxRetries = -1
		c.HTTPClient = &http.Client{Timeout: 200 * time.Millisecond}
	})
	_, err := c.ListProjects(context.Background(), Scope{Projects: paths})
	if err != nil {
		var ae *APIError
		errors.As(err, &ae)
		t.Fatalf("healthy GitLab, but listing failed from client-side queueing: %v", err)
	}
}

// GitLab paths are case-insensitive (a scope "--group g" finds "G"), but
// path_with_namespace keeps the case it was created with: exclusion globs
// match case-insensitively, so "g/legacy/**" excludes "G/Legacy/app".
func TestExcludeIgnoresCase(t *testing.T) {
	ex := must(newExcluder([]string{"g/legacy/**", "g/old-*"}))
	for _, p := range []string{"G/Legacy/app", "g/Old-thing"} {
		if _, ok := ex.excluded(p); !ok {
			t.Errorf("%s not excluded", p)
		}
	}
}
