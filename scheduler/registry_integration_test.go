package scheduler_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/scheduler/clocktest"
)

// fromLine is the dependency a `FROM ref` line gives.
func fromLine(t *testing.T, ref string) deps.Dependency {
	t.Helper()
	r, err := deps.NormalizeImage(ref)
	if err != nil {
		t.Fatal(err)
	}
	return deps.Dependency{Kind: deps.KindFrom, Ref: ref, Image: r.Image, Repository: r.Repository, Tag: r.Tag, Digest: r.Digest}
}

// Against a real registry: the watcher records the tag's digest, a new
// image pushed under the tag rebuilds the projects using it once, and an
// unreachable registry is recorded and retried without stopping anything.
func TestWatchRealRegistry(t *testing.T) {
	host := registrytest.Start(t)
	closed := registrytest.ClosedAddr(t)
	base := host + "/base/debian:12"
	gone := closed + "/base/alpine:3"
	first := registrytest.Push(t, base)

	dependencies := map[string][]deps.Dependency{
		"apps/a": {fromLine(t, base)},
		"apps/b": {fromLine(t, base)},
		"apps/c": {fromLine(t, gone)},
		"apps/d": {fromLine(t, base+"@"+first)}, // pinned: not watched, not rebuilt
	}
	images := func(context.Context) ([]scheduler.ImageUser, error) {
		return scheduler.ExternalImages(dependencies), nil
	}

	clk := clocktest.New(at(6, 0, 0))
	st := openStore(t, storePath(t))
	rb := newRebuilder()
	s := newScheduler(t, scheduler.Options{Config: scheduler.Config{WatchExternal: true}, Store: st, Rebuilder: rb,
		Resolver: registry.New(registry.Options{Insecure: []string{host, closed}}), Images: images, Clock: clk})
	r := start(t, s)
	clk.WaitTimers(1)
	if got := imageState(t, st, base); got.Digest != first {
		t.Fatalf("recorded %q, want the pushed %s", got.Digest, first)
	}
	g := imageState(t, st, gone)
	if g.Failures != 1 || !strings.Contains(g.Err, "connection refused") || !g.NextCheck.Equal(at(6, 0, 1)) {
		t.Errorf("unreachable registry: %+v; want the error recorded and a retry in 1m", g)
	}

	second := registrytest.Push(t, base)
	clk.Advance(time.Minute) // the unreachable one is retried; base is not due yet
	clk.WaitTimers(1)
	if g := imageState(t, st, gone); g.Failures != 2 || !g.NextCheck.Equal(at(6, 0, 3)) {
		t.Errorf("after the retry: %+v; want 2 failures, next retry in 2m", g)
	}
	if n := len(rb.Calls()); n != 0 {
		t.Fatalf("%d rebuilds before the hourly check", n)
	}
	clk.Set(at(6, 1, 0))
	clk.WaitTimers(1)
	calls := rb.Calls()
	if got := projectsOf(calls); !slices.Equal(got, []string{"apps/a", "apps/b"}) {
		t.Fatalf("rebuilt %v, want apps/a and apps/b", got)
	}
	if want := base + " " + first + "→" + second; calls[0].Reason.Detail != want {
		t.Errorf("reason detail %q, want %q", calls[0].Reason.Detail, want)
	}
	clk.Set(at(6, 2, 0))
	clk.WaitTimers(1)
	r.stop(t)
	if n := len(rb.Calls()); n != 2 {
		t.Errorf("%d rebuilds, want 2 (an unchanged digest starts nothing)", n)
	}
}
