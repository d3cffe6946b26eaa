package gitlab

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// scanner mimics the scan package: list, skip the projects whose known
// state is provably current, list the tree of the others, remember.
type scanner struct {
	c     *Client
	now   func() time.Time
	known map[int64]HeadState
}

func (s *scanner) scan(t *testing.T) (projects []Project, versions map[string]string, fetched int) {
	t.Helper()
	ps, err := s.c.ListProjects(context.Background(), Scope{Groups: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	next := map[int64]HeadState{}
	versions = map[string]string{}
	for _, p := range ps {
		k, ok := s.known[p.ID]
		if !ok || !s.c.Unchanged(p, k) {
			files, err := s.c.ListFiles(context.Background(), p.ID, p.DefaultBranch, []string{"Containerfile"})
			if err != nil {
				t.Fatal(err)
			}
			fetched++
			k = HeadState{Branch: p.DefaultBranch, Version: files["Containerfile"], LastActivityAt: p.LastActivityAt}
		}
		k.CheckedAt = s.now()
		next[p.ID] = k
		versions[p.Path] = k.Version
	}
	s.known = next
	return ps, versions, fetched
}

func TestIncrementalRescan(t *testing.T) {
	clk := newClock()
	srv := newFake(t, gitlabtest.Options{Now: clk.Now}) // GitLab's hourly last_activity_at throttle
	addProjects(t, srv, "g/sub", 250)
	c, _ := newClient(t, srv, func(c *Config) { c.Now = clk.Now })
	s := &scanner{c: c, now: clk.Now}
	const hot = "g/sub/p0007"
	hotContent := "FROM debian:bookworm\n"
	push := func(content string) { hotContent = content; must(srv.SetFile(hot, "Containerfile", content)) }

	steps := []struct {
		name        string
		before      func()
		wantFetched int
	}{
		{name: "first scan lists every tree", wantFetched: 250},
		{name: "unchanged rescan fetches none", before: func() { clk.Advance(time.Minute) }, wantFetched: 0},
		{
			name:        "a push moves last_activity_at: one tree listed",
			before:      func() { clk.Advance(time.Minute); push("FROM a") },
			wantFetched: 1,
		},
		{
			name: "second push within the hour (last_activity_at unchanged) is still seen",
			before: func() {
				clk.Advance(10 * time.Minute)
				before, _ := srv.Project(hot)
				push("FROM b")
				after, _ := srv.Project(hot)
				if !after.LastActivityAt.Equal(before.LastActivityAt) {
					t.Fatal("fake did not throttle last_activity_at")
				}
			},
			wantFetched: 1,
		},
		{name: "recently active project is asked again", before: func() { clk.Advance(30 * time.Minute) }, wantFetched: 1},
		{name: "after the window it settles", before: func() { clk.Advance(2 * time.Hour) }, wantFetched: 1},
		{name: "settled instance costs nothing", before: func() { clk.Advance(time.Hour) }, wantFetched: 0},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		srv.ResetRequests()
		start := c.Requests()
		ps, versions, fetched := s.scan(t)
		if fetched != st.wantFetched {
			t.Fatalf("%s: listed %d trees, want %d", st.name, fetched, st.wantFetched)
		}
		pages := srv.Requests("GET /groups/:id/projects")
		if pages != 3 || srv.TotalRequests() != pages+int64(st.wantFetched) || c.Requests()-start != srv.TotalRequests() {
			t.Fatalf("%s: %d requests (%v), want %d list pages + %d trees", st.name, srv.TotalRequests(), srv.RequestCounts(), 3, st.wantFetched)
		}
		want := gitlabtest.BlobID(hotContent)
		if got := versions[hot]; got != want {
			t.Fatalf("%s: Containerfile of %s known as %s, want %s", st.name, hot, got, want)
		}
		if len(ps) != 250 {
			t.Fatalf("%s: %d projects", st.name, len(ps))
		}
	}
}

func TestHeadStateRules(t *testing.T) {
	c, err := New(Config{BaseURL: "https://gitlab.example.com", Token: "x"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Project{DefaultBranch: "main", LastActivityAt: t0}
	known := HeadState{Branch: "main", Version: "abc", LastActivityAt: t0, CheckedAt: t0.Add(2 * time.Hour)}
	tests := []struct {
		name  string
		p     Project
		known HeadState
		want  bool
	}{
		{"settled and equal", p, known, true},
		{"activity moved", Project{DefaultBranch: "main", LastActivityAt: t0.Add(time.Second)}, known, false},
		{"checked too soon after activity", p, HeadState{Branch: "main", Version: "abc", LastActivityAt: t0, CheckedAt: t0.Add(time.Hour)}, false},
		{"default branch changed", Project{DefaultBranch: "trunk", LastActivityAt: t0}, known, false},
		{"nothing known", p, HeadState{}, false},
		{"no activity reported", Project{DefaultBranch: "main"}, HeadState{Branch: "main", Version: "abc", CheckedAt: t0}, false},
	}
	for _, tt := range tests {
		if got := c.Unchanged(tt.p, tt.known); got != tt.want {
			t.Errorf("%s: unchanged = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestConcurrencyBound(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{Latency: 15 * time.Millisecond})
	addProjects(t, srv, "g", 24)
	c, _ := newClient(t, srv, func(c *Config) { c.Concurrency = 3; c.PerPage = 5 })
	ps, err := c.ListProjects(context.Background(), Scope{Groups: []string{"g"}})
	if err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	for _, p := range ps {
		g.Go(func() error { _, err := headCommit(context.Background(), c, p.ID, p.DefaultBranch); return err })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if m := srv.MaxInFlight(); m > 3 || m < 2 {
		t.Fatalf("max in flight = %d, want 2..3 (bounded, but parallel)", m)
	}
}

func TestRateLimit(t *testing.T) {
	srv := newFake(t, gitlabtest.Options{})
	id := must(srv.AddProject(gitlabtest.Project{Path: "g/a"}))
	// 1,200/min = one request per 50 ms after a burst of Concurrency (1).
	c, _ := newClient(t, srv, func(c *Config) { c.RequestsPerMinute = 1200; c.Concurrency = 1 })
	start := time.Now()
	for range 4 {
		if _, err := headCommit(context.Background(), c, id, "main"); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 140*time.Millisecond {
		t.Fatalf("4 requests took %s, want >= 150ms at 20/s", el)
	}
}
