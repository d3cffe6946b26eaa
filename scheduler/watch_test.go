package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
	"gitlab.com/depsd/depsd/store"
)

// resolver is a fake registry: a digest or an error per image.
type resolver struct {
	mu      sync.Mutex
	digests map[string]string
	errs    map[string]error
	asked   map[string]int
}

func (r *resolver) Digest(_ context.Context, image string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[image]++
	if err := r.errs[image]; err != nil {
		return "", err
	}
	if d, ok := r.digests[image]; ok {
		return d, nil
	}
	return "", fmt.Errorf("%s: manifest unknown", image)
}

func (r *resolver) set(image, digest string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.digests[image], r.errs[image] = digest, err
}

const (
	debian = "docker.io/library/debian:12"
	alpine = "docker.io/library/alpine:3"
)

// users is what the daemon derives from the stored projects.
func users(context.Context) ([]scheduler.ImageUser, error) {
	return scheduler.ExternalImages(map[string][]deps.Dependency{
		"apps/a": {{Kind: deps.KindFrom, Image: debian, Repository: "docker.io/library/debian", Tag: "12"}},
		"apps/b": {
			{Kind: deps.KindFrom, Image: debian, Repository: "docker.io/library/debian", Tag: "12"},
			{Kind: deps.KindCopyFrom, Image: "registry.example.com/infra/base:1", Repository: "registry.example.com/infra/base", Tag: "1", Project: "infra/base"},
		},
		"apps/c": {{Kind: deps.KindFrom, Image: alpine, Repository: "docker.io/library/alpine", Tag: "3"}},
		"apps/d": {{Kind: deps.KindFrom, Image: "docker.io/library/alpine:3@sha256:" + fmt.Sprintf("%064d", 1),
			Repository: "docker.io/library/alpine", Tag: "3", Digest: "sha256:" + fmt.Sprintf("%064d", 1)}},
	}), nil
}

func imageState(t *testing.T, st *store.Store, image string) scheduler.ImageState {
	t.Helper()
	all, err := st.ImageStates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Image == image {
			return s
		}
	}
	t.Fatalf("no stored state for %s", image)
	return scheduler.ImageState{}
}

func projectsOf(calls []rebuild) []string {
	var ps []string
	for _, c := range calls {
		ps = append(ps, c.Project)
	}
	sort.Strings(ps)
	return ps
}

func TestExternalImages(t *testing.T) {
	got, _ := users(t.Context())
	want := []scheduler.ImageUser{{Image: alpine, Projects: []string{"apps/c"}}, {Image: debian, Projects: []string{"apps/a", "apps/b"}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ExternalImages = %v, want %v (no project images, no pinned ones)", got, want)
	}
}

// The first digest seen is only recorded; a change rebuilds every project
// using the image, once; a failing registry is recorded and retried with
// growing waits, and recovers.
func TestWatchDigests(t *testing.T) {
	clk := clocktest.New(at(6, 0, 0))
	st := openStore(t, storePath(t))
	rb := newRebuilder()
	reg := &resolver{digests: map[string]string{debian: "sha256:d1", alpine: "sha256:a1"}, errs: map[string]error{}, asked: map[string]int{}}
	cfg := scheduler.Config{
		WatchExternal: true,
		Watch:         []scheduler.WatchSpec{{Image: "debian:12", Projects: []string{"infra/extra"}}},
	}
	s := newScheduler(t, scheduler.Options{Config: cfg, Store: st, Rebuilder: rb, Resolver: reg, Images: users, Clock: clk})
	r := start(t, s)
	clk.WaitTimers(1)
	if d := imageState(t, st, debian).Digest; d != "sha256:d1" {
		t.Fatalf("debian recorded as %q", d)
	}
	if n := len(rb.Calls()); n != 0 {
		t.Fatalf("first observation started %d rebuilds", n)
	}

	reg.set(debian, "sha256:d2", nil)
	reg.set(alpine, "", errors.New("dial tcp: connection refused"))
	clk.Advance(time.Hour)
	clk.WaitTimers(1)
	calls := rb.Calls()
	if got := projectsOf(calls); !slices.Equal(got, []string{"apps/a", "apps/b", "infra/extra"}) {
		t.Errorf("rebuilt %v, want apps/a, apps/b, infra/extra once each", got)
	}
	for _, c := range calls {
		if c.Reason.Kind != chain.ReasonDigest || c.Reason.Detail != debian+" sha256:d1→sha256:d2" {
			t.Errorf("reason = %+v", c.Reason)
		}
	}
	if s := imageState(t, st, debian); s.RebuildOutcome != "apps/a: chain 101, apps/b: chain 102, infra/extra: chain 103" || !s.ChangedAt.Equal(at(6, 1, 0)) {
		t.Errorf("debian state after change: %+v", s)
	}
	a := imageState(t, st, alpine)
	if a.Failures != 1 || a.Err == "" || !a.NextCheck.Equal(at(6, 1, 1)) || a.Digest != "sha256:a1" {
		t.Errorf("alpine after a failure: %+v; want 1 failure, retry in 1m, digest kept", a)
	}
	clk.Advance(time.Minute)
	clk.WaitTimers(1)
	if a := imageState(t, st, alpine); a.Failures != 2 || !a.NextCheck.Equal(at(6, 1, 3)) {
		t.Errorf("alpine after two failures: %+v; want retry in 2m", a)
	}
	reg.set(alpine, "sha256:a1", nil)
	clk.Advance(2 * time.Minute)
	clk.WaitTimers(1)
	if a := imageState(t, st, alpine); a.Failures != 0 || a.Err != "" || !a.NextCheck.Equal(at(6, 2, 3)) {
		t.Errorf("alpine after recovery: %+v", a)
	}
	r.stop(t)
	if n := len(rb.Calls()); n != 3 {
		t.Errorf("%d rebuilds in all, want 3", n)
	}
	reg.mu.Lock()
	if reg.asked[debian] != 2 {
		t.Errorf("debian checked %d times in 1h3m, want 2 (hourly)", reg.asked[debian])
	}
	reg.mu.Unlock()

	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Target != alpine || list[1].Target != debian || list[1].Digest != "sha256:d2" ||
		list[1].Spec != "every 1h0m0s" || !slices.Equal(list[1].Projects, []string{"apps/a", "apps/b", "infra/extra"}) {
		t.Errorf("listing: %+v", list)
	}
}

// Two processes watching through one store act on a change once.
func TestWatchersSharingAStoreRebuildOnce(t *testing.T) {
	path := storePath(t)
	clk := clocktest.New(at(6, 0, 0))
	rb := newRebuilder()
	reg := &resolver{digests: map[string]string{debian: "sha256:d1", alpine: "sha256:a1"}, errs: map[string]error{}, asked: map[string]int{}}
	cfg := scheduler.Config{WatchExternal: true}
	for range 2 {
		start(t, newScheduler(t, scheduler.Options{Config: cfg, Store: openStore(t, path), Rebuilder: rb, Resolver: reg, Images: users, Clock: clk}))
	}
	clk.WaitTimers(2)
	reg.set(debian, "sha256:d2", nil)
	reg.set(alpine, "sha256:a2", nil)
	clk.Advance(time.Hour)
	for range 3 {
		rb.waitCall(t)
	}
	clk.WaitTimers(2)
	if got := projectsOf(rb.Calls()); !slices.Equal(got, []string{"apps/a", "apps/b", "apps/c"}) {
		t.Errorf("rebuilt %v, want each user once", got)
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.asked[debian] != 2 {
		t.Errorf("registry asked %d times for debian, want 2: one check per interval across both", reg.asked[debian])
	}
}

// A digest change whose process stopped after recording it and before
// starting the rebuilds (or whose rebuilds failed to start) is pending in
// the store: the next check of the image, by any process, starts them.
// Before, the pending users lived in the memory of the process that saw
// the change, and a crash lost the change's chains for good.
func TestPendingDigestChangeSurvivesItsProcess(t *testing.T) {
	clk := clocktest.New(at(6, 0, 0))
	path := storePath(t)
	st := openStore(t, path)
	ctx := t.Context()
	// The process that saw debian move from d1 to d2 died right after
	// recording it.
	for _, d := range []string{"sha256:d1", "sha256:d2"} {
		if _, err := st.RecordDigest(ctx, debian, d, at(5, 23, 0)); err != nil {
			t.Fatal(err)
		}
	}
	rb := newRebuilder()
	rb.fail = map[string]error{"apps/b": errors.New("database is locked")}
	reg := &resolver{digests: map[string]string{debian: "sha256:d2"}, errs: map[string]error{}, asked: map[string]int{}}
	cfg := scheduler.Config{Watch: []scheduler.WatchSpec{{Image: "debian:12"}}}
	r := start(t, newScheduler(t, scheduler.Options{Config: cfg, Store: openStore(t, path), Rebuilder: rb, Resolver: reg, Images: users, Clock: clk}))
	clk.WaitTimers(1)
	calls := rb.Calls()
	if got := projectsOf(calls); !slices.Equal(got, []string{"apps/a", "apps/b"}) {
		t.Fatalf("after the restart: rebuilt %v, want apps/a and apps/b", got)
	}
	want := chain.Reason{Kind: chain.ReasonDigest, Detail: debian + " sha256:d1→sha256:d2", At: at(5, 23, 0)}
	for _, c := range calls {
		if c.Reason.Kind != want.Kind || c.Reason.Detail != want.Detail || !c.Reason.At.Equal(want.At) {
			t.Errorf("reason = %+v, want the recorded change %+v", c.Reason, want)
		}
	}
	if p := imageState(t, st, debian).Pending; p.Detail != want.Detail || p.Attempts != 1 {
		t.Fatalf("pending after apps/b failed: %+v, want the change with one attempt", p)
	}

	// apps/b's store recovers; the next check starts what is left (the
	// engine's Rebuild makes apps/a's second request a no-op).
	rb.mu.Lock()
	rb.fail = nil
	rb.mu.Unlock()
	clk.Advance(time.Hour)
	clk.WaitTimers(1)
	r.stop(t)
	if p := imageState(t, st, debian).Pending; p.Detail != "" {
		t.Errorf("pending after every rebuild started: %+v, want none", p)
	}
	if got := projectsOf(rb.Calls()[len(calls):]); !slices.Equal(got, []string{"apps/a", "apps/b"}) {
		t.Errorf("second check rebuilt %v, want apps/a and apps/b again (idempotent in the engine)", got)
	}
}
