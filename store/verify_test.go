package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/verify"
)

func TestVerifyQueue(t *testing.T) { forEachBackend(t, testVerifyQueue) }

// testVerifyQueue: queued builds come back oldest first, a build queued
// twice once, and a done one no more.
func testVerifyQueue(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	shop := chain.VerifyTask{Project: "g/shop", ProjectID: 3, PipelineID: 12, ChainID: 1, QueuedAt: t0.Add(time.Second)}
	ruby := chain.VerifyTask{Project: "g/ruby", ProjectID: 2, PipelineID: 11, QueuedAt: t0}
	again := shop
	again.QueuedAt, again.ChainID = t0.Add(time.Hour), 9
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		for _, task := range []chain.VerifyTask{shop, ruby, again} {
			if err := tx.QueueVerify(ctx, task); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tasks := func(limit int) []chain.VerifyTask {
		t.Helper()
		var out []chain.VerifyTask
		err := s.ViewChains(ctx, func(tx chain.Tx) error {
			var err error
			out, err = tx.VerifyTasks(ctx, limit)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := tasks(10), []chain.VerifyTask{ruby, shop}; !reflect.DeepEqual(got, want) {
		t.Errorf("queue = %+v\nwant %+v", got, want)
	}
	if got := tasks(1); len(got) != 1 || got[0].Project != "g/ruby" {
		t.Errorf("queue limited to 1 = %+v", got)
	}
	err = s.UpdateChains(ctx, func(tx chain.Tx) error {
		if err := tx.DoneVerify(ctx, "g/ruby", 11); err != nil {
			return err
		}
		return tx.DoneVerify(ctx, "g/none", 1) // none queued: no error
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tasks(10), []chain.VerifyTask{shop}; !reflect.DeepEqual(got, want) {
		t.Errorf("queue after one was done = %+v\nwant %+v", got, want)
	}
}

func TestEarlierDigests(t *testing.T) { forEachBackend(t, testEarlierDigests) }

func testEarlierDigests(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	const ruby = "registry.test/lang/ruby:3"
	for i, d := range []string{"sha256:aaa", "sha256:bbb", "sha256:aaa", "sha256:ccc"} {
		if err := s.RecordSeenDigest(ctx, ruby, d, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordSeenDigest(ctx, "registry.test/other:1", "sha256:zzz", t0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		current string
		limit   int
		want    []string
	}{
		{"sha256:ccc", 10, []string{"sha256:bbb", "sha256:aaa"}}, // by first sighting: aaa came back, it is still older
		{"sha256:ccc", 1, []string{"sha256:bbb"}},
		{"", 10, []string{"sha256:ccc", "sha256:bbb", "sha256:aaa"}},
	} {
		got, err := s.EarlierDigests(ctx, ruby, tc.current, tc.limit)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("EarlierDigests(%s, %d) = %v, %v; want %v", tc.current, tc.limit, got, err, tc.want)
		}
	}
}

func TestVerificationsRoundTrip(t *testing.T) { forEachBackend(t, testVerificationsRoundTrip) }

// testVerificationsRoundTrip: results come back as recorded, stalest
// first; a stale image is stale since its upstream moved, and stays so
// however often it is verified again.
func testVerificationsRoundTrip(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	const ruby = "registry.test/lang/ruby:3"
	moved := t0.Add(time.Hour)
	if err := s.RecordSeenDigest(ctx, ruby, "sha256:new", moved); err != nil {
		t.Fatal(err)
	}
	amd64 := deps.Platform{OS: "linux", Architecture: "amd64"}
	arm := deps.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}
	staleShop := verify.Result{Image: "registry.test/apps/shop:latest", Platform: amd64, Digest: "sha256:s1", Manifest: "sha256:s1",
		State: verify.StateStale, Detail: "built on ruby sha256:old, not sha256:new (base annotation)",
		Upstreams: []verify.Verdict{{Upstream: ruby, State: verify.StateStale, By: verify.ByAnnotation, BuiltOn: "sha256:old",
			Current: "sha256:new", Detail: "built on ruby sha256:old, not sha256:new (base annotation)"}}}
	freshShop := staleShop
	freshShop.Platform, freshShop.State, freshShop.Detail = arm, verify.StateFresh, "built on the current image of every upstream"
	freshShop.Upstreams = []verify.Verdict{{Upstream: ruby, State: verify.StateFresh, By: verify.ByLayers, BuiltOn: "sha256:new",
		Current: "sha256:new", Detail: "built on ruby sha256:new, its current image"}}
	unknownWeb := verify.Result{Image: "registry.test/apps/web:latest", Platform: amd64, State: verify.StateUnknown,
		Reason: verify.ReasonNotFound, Detail: "not found", Upstreams: []verify.Verdict{{Upstream: "registry.test/apps/shop:latest",
			State: verify.StateUnknown, Reason: verify.ReasonNotFound, Detail: "not found"}}}
	verifiedAt := t0.Add(2 * time.Hour)
	if err := s.RecordVerifications(ctx, "apps/shop", 12, verifiedAt, []verify.Result{freshShop, staleShop}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordVerifications(ctx, "apps/web", 0, verifiedAt, []verify.Result{unknownWeb}); err != nil {
		t.Fatal(err)
	}
	want := []ImageVerification{
		{Project: "apps/shop", PipelineID: 12, VerifiedAt: verifiedAt, StaleSince: moved, Result: staleShop},
		{Project: "apps/web", VerifiedAt: verifiedAt, Result: unknownWeb},
		{Project: "apps/shop", PipelineID: 12, VerifiedAt: verifiedAt, Result: freshShop},
	}
	got, err := s.Verifications(ctx)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Verifications = %+v, %v\nwant %+v", got, err, want)
	}
	if got, err := s.Verifications(ctx, "apps/web"); err != nil || !reflect.DeepEqual(got, want[1:2]) {
		t.Errorf("Verifications(apps/web) = %+v, %v", got, err)
	}

	// Verified again later, still stale: stale since the upstream moved.
	// Then fresh: no longer stale.
	later := verifiedAt.Add(24 * time.Hour)
	if err := s.RecordVerifications(ctx, "apps/shop", 13, later, []verify.Result{staleShop}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Verifications(ctx, "apps/shop")
	if err != nil || len(got) != 2 || !got[0].StaleSince.Equal(moved) || got[0].PipelineID != 13 || !got[0].VerifiedAt.Equal(later) {
		t.Errorf("stale again: %+v, %v; want stale since %v", got, err, moved)
	}
	fixed := staleShop
	fixed.State = verify.StateFresh
	if err := s.RecordVerifications(ctx, "apps/shop", 14, later, []verify.Result{fixed}); err != nil {
		t.Fatal(err)
	}
	got, err = s.Verifications(ctx, "apps/shop")
	if err != nil || len(got) != 2 || got[0].State != verify.StateFresh || !got[0].StaleSince.IsZero() {
		t.Errorf("fresh again: %+v, %v; want no stale_since", got, err)
	}
}
