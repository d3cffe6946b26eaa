package gitlab

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

const branchEndpoint = "GET /projects/:id/repository/branches/:branch"

func TestRetries(t *testing.T) {
	tests := []struct {
		name         string
		fault        gitlabtest.Fault
		wantErr      bool
		wantRequests int64
		check        func(t *testing.T, waits []time.Duration, err error)
	}{
		{
			name:         "429 then success honours Retry-After",
			fault:        gitlabtest.Fault{Endpoint: branchEndpoint, Status: 429, RetryAfter: 7 * time.Second, Times: 2},
			wantRequests: 3,
			check: func(t *testing.T, waits []time.Duration, _ error) {
				if !slices.Equal(waits, []time.Duration{7 * time.Second, 7 * time.Second}) {
					t.Fatalf("waits = %v, want two of 7s", waits)
				}
			},
		},
		{
			name:         "502 then success backs off",
			fault:        gitlabtest.Fault{Endpoint: branchEndpoint, Status: 502, Times: 1},
			wantRequests: 2,
			check: func(t *testing.T, waits []time.Duration, _ error) {
				if len(waits) != 1 || waits[0] < 5*time.Millisecond || waits[0] > 10*time.Millisecond {
					t.Fatalf("waits = %v, want one in [base/2, base]", waits)
				}
			},
		},
		{
			name:         "500 exhaustion names endpoint and status",
			fault:        gitlabtest.Fault{Endpoint: branchEndpoint, Status: 500, Times: 100},
			wantErr:      true,
			wantRequests: 6,
			check: func(t *testing.T, waits []time.Duration, err error) {
				msg := err.Error()
				for _, want := range []string{"GET /api/v4/projects/", "/repository/branches/main", "500 Internal Server Error", "after 6 attempts"} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not contain %q", msg, want)
					}
				}
				if !IsRetryable(err) || IsPermanent(err) {
					t.Errorf("500 should be retryable, not permanent")
				}
				if len(waits) != 5 || waits[4] < waits[0] {
					t.Errorf("waits = %v, want 5 growing waits", waits)
				}
				for _, w := range waits {
					if w > 80*time.Millisecond {
						t.Errorf("wait %s above BackoffMax", w)
					}
				}
			},
		},
		{
			name:         "Retry-After longer than allowed gives up",
			fault:        gitlabtest.Fault{Endpoint: branchEndpoint, Status: 429, RetryAfter: time.Hour},
			wantErr:      true,
			wantRequests: 1,
			check: func(t *testing.T, _ []time.Duration, err error) {
				if !IsRetryable(err) || !strings.Contains(err.Error(), "429") {
					t.Fatalf("err = %v, want a retryable 429", err)
				}
			},
		},
		{
			name:         "4xx not retried",
			fault:        gitlabtest.Fault{Endpoint: branchEndpoint, Status: 422},
			wantErr:      true,
			wantRequests: 1,
			check: func(t *testing.T, waits []time.Duration, err error) {
				if !IsPermanent(err) || len(waits) != 0 {
					t.Fatalf("err = %v waits = %v, want permanent, no waits", err, waits)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFake(t, gitlabtest.Options{})
			id := must(srv.AddProject(gitlabtest.Project{Path: "g/a", Files: map[string]string{"f": "x"}}))
			c, rec := newClient(t, srv, func(c *Config) {
				c.BackoffBase = 10 * time.Millisecond
				c.BackoffMax = 80 * time.Millisecond
			})
			srv.Fail(tt.fault)
			_, err := headCommit(context.Background(), c, id, "main")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if n := srv.Requests(branchEndpoint); n != tt.wantRequests {
				t.Fatalf("requests = %d, want %d", n, tt.wantRequests)
			}
			if c.Requests() != tt.wantRequests {
				t.Fatalf("client counted %d requests, want %d", c.Requests(), tt.wantRequests)
			}
			tt.check(t, rec.all(), err)
		})
	}
}

func TestRetryStopsWithContext(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/a"}))
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := newClient(t, srv, func(c *Config) {
		c.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	})
	srv.Fail(gitlabtest.Fault{Status: 503, Times: 10})
	_, err := headCommit(ctx, c, id, "main")
	if !errors.Is(err, context.Canceled) || IsRetryable(err) {
		t.Fatalf("err = %v, want context.Canceled, not retryable", err)
	}
	if n := srv.TotalRequests(); n != 1 {
		t.Fatalf("requests = %d, want 1", n)
	}
}

func TestUnauthorized(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	c, rec := newClient(t, srv, func(c *Config) { c.Token = "glpat-wrong-token" })
	_, err := c.ListProjects(context.Background(), Scope{Groups: []string{"g"}})
	if !errors.Is(err, ErrUnauthorized) || !IsPermanent(err) || IsRetryable(err) {
		t.Fatalf("err = %v, want permanent ErrUnauthorized", err)
	}
	for _, want := range []string{"401 Unauthorized", "check the API token", "group g"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if srv.TotalRequests() != 1 || len(rec.all()) != 0 {
		t.Fatalf("401 was retried: %d requests", srv.TotalRequests())
	}
}

func TestForbiddenScope(t *testing.T) {
	ts := newStubServer(t, http.StatusForbidden, `{"error":"insufficient_scope","error_description":"The request requires higher privileges than provided by the access token."}`)
	c, err := New(Config{BaseURL: ts, Token: "glpat-x", Sleep: (&recorder{}).sleep})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPipeline(context.Background(), 1, 2)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized for insufficient_scope", err)
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{http.Header{"Retry-After": {"12"}}, 12 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, 30 * time.Second, true},
		{http.Header{"Ratelimit-Reset": {"1735689605"}}, 5 * time.Second, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{}, 0, false},
	}
	for _, tt := range tests {
		got, ok := retryAfter(tt.header, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%v) = %s, %v; want %s, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}
