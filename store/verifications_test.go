package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/verify"
)

// An upstream's digests are kept in the order they were first seen, and
// a project's image has one stored verification per platform, the last.
func TestVerificationsKept(t *testing.T) { forEachBackend(t, testVerificationsKept) }

func testVerificationsKept(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	const ruby = "registry.example.com/base/ruby:3"
	t0 := time.Date(2026, 11, 2, 3, 0, 0, 0, time.UTC)
	for i, d := range []string{"sha256:a", "sha256:b", "sha256:a", "sha256:c"} {
		if err := s.RecordUpstreamDigest(ctx, ruby, d, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.UpstreamHistory(ctx, ruby)
	want := []verify.Seen{{Digest: "sha256:c", FirstSeen: t0.Add(3 * time.Hour)}, {Digest: "sha256:b", FirstSeen: t0.Add(time.Hour)}, {Digest: "sha256:a", FirstSeen: t0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("history = %+v, %v; want %+v (a digest seen again keeps its first sighting)", got, err, want)
	}
	if none, err := s.UpstreamHistory(ctx, "registry.example.com/other:1"); err != nil || len(none) != 0 {
		t.Errorf("unknown image: %v, %v", none, err)
	}
	const debian = "registry.example.com/base/debian:12"
	if err := s.RecordUpstreamDigest(ctx, debian, "sha256:d", t0); err != nil {
		t.Fatal(err)
	}
	histories, err := s.UpstreamHistories(ctx)
	if wantAll := map[string][]verify.Seen{ruby: want, debian: {{Digest: "sha256:d", FirstSeen: t0}}}; err != nil || !reflect.DeepEqual(histories, wantAll) {
		t.Errorf("UpstreamHistories = %+v, %v; want %+v (each image's, newest first, as UpstreamHistory)", histories, err, wantAll)
	}

	amd64, arm64 := deps.Platform{OS: "linux", Architecture: "amd64"}, deps.Platform{OS: "linux", Architecture: "arm64"}
	stale := verify.Record{Project: "apps/shop", VerifiedAt: t0.Add(4 * time.Hour), Result: verify.Result{
		Image: "registry.example.com/apps/shop:latest", Platform: amd64, Digest: "sha256:s1", State: verify.StateStale,
		Detail:    "built on ruby sha256:a, not sha256:c",
		Upstreams: []verify.Verdict{{Upstream: ruby, State: verify.StateStale, By: verify.ByAnnotation, BuiltOn: "sha256:a", Current: "sha256:c", Detail: "d"}},
	}}
	fresh := stale
	fresh.VerifiedAt = t0.Add(5 * time.Hour)
	fresh.Result.State, fresh.Result.Digest = verify.StateFresh, "sha256:s2"
	fresh.Result.Upstreams = []verify.Verdict{{Upstream: ruby, State: verify.StateFresh, By: verify.ByLayers, BuiltOn: "sha256:c", Current: "sha256:c", Detail: "d"}}
	other := stale
	other.Result.Platform = arm64
	cli := stale
	cli.Project, cli.Result.Image = "apps/cli", "registry.example.com/apps/cli:1"
	for _, r := range []verify.Record{stale, other, cli, fresh} {
		if err := s.SaveVerification(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Verifications(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("Verifications() = %d records, %v; want 3 (one per project, image and platform)", len(all), err)
	}
	shop, err := s.Verifications(ctx, "apps/shop")
	if err != nil || len(shop) != 2 {
		t.Fatalf("Verifications(apps/shop) = %+v, %v", shop, err)
	}
	for _, r := range shop {
		w := other
		if r.Result.Platform == amd64 {
			w = fresh // the later save replaced the stale one
		}
		if !reflect.DeepEqual(r, w) {
			t.Errorf("stored\n%+v\nwant\n%+v", r, w)
		}
	}
}
