package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/scheduler"
)

// Of many concurrent claims of one fire, exactly one wins, and a stale
// outcome never overwrites a newer fire's.
func TestClaimFireOnce(t *testing.T) { forEachBackend(t, testClaimFireOnce) }

func testClaimFireOnce(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	base := time.Date(2025, 1, 6, 2, 0, 0, 123, time.UTC)
	st, err := s.RegisterSchedule(ctx, scheduler.ScheduleState{ID: "x", Kind: scheduler.KindRebuild, Target: "infra/base", Spec: "0 3 * * *", Timezone: "UTC", Cursor: base})
	if err != nil || !st.Cursor.Equal(base) {
		t.Fatalf("RegisterSchedule = %+v, %v", st, err)
	}
	// Registering again keeps the stored cursor.
	if st, err := s.RegisterSchedule(ctx, scheduler.ScheduleState{ID: "x", Kind: scheduler.KindRebuild, Target: "infra/base", Cursor: base.Add(time.Hour)}); err != nil || !st.Cursor.Equal(base) {
		t.Fatalf("re-register moved the cursor: %+v, %v", st, err)
	}
	fire := base.Add(time.Hour - 123)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ok, err := s.ClaimFire(ctx, "x", base, fire, fire, string(rune('a'+i)))
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d claims won, want 1", wins.Load())
	}
	next := fire.Add(24 * time.Hour)
	if ok, err := s.ClaimFire(ctx, "x", fire, next, next, "z"); !ok || err != nil {
		t.Fatalf("next claim: %v, %v", ok, err)
	}
	if err := s.RecordOutcome(ctx, "x", fire, scheduler.Outcome{FinishedAt: fire, ChainID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordOutcome(ctx, "x", next, scheduler.Outcome{FinishedAt: next, ChainID: 2, Duration: time.Second}); err != nil {
		t.Fatal(err)
	}
	all, err := s.ScheduleStates(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("ScheduleStates = %v, %v", all, err)
	}
	if got := all[0]; got.Outcome.ChainID != 2 || !got.LastFire.Equal(next) || got.FiredBy != "z" || !got.LastSuccess.Equal(next) || got.Outcome.Duration != time.Second {
		t.Errorf("stored %+v", got)
	}
	if ok, _ := s.SkipFires(ctx, "x", fire, next.Add(time.Hour)); ok {
		t.Error("skip from a stale cursor succeeded")
	}
}

// Of several processes recording the same new digest, one sees the change.
func TestRecordDigestChangeSeenOnce(t *testing.T) { forEachBackend(t, testRecordDigestChangeSeenOnce) }

func testRecordDigestChangeSeenOnce(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	img := "docker.io/library/debian:12"
	base := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	if ok, err := s.ClaimImageCheck(ctx, img, time.Time{}, base.Add(time.Hour)); !ok || err != nil {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	if ok, _ := s.ClaimImageCheck(ctx, img, time.Time{}, base.Add(time.Hour)); ok {
		t.Fatal("second insert claim won")
	}
	if prev, err := s.RecordDigest(ctx, img, "sha256:1", base); prev != "" || err != nil {
		t.Fatalf("first digest: %q, %v", prev, err)
	}
	var changes atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			prev, err := s.RecordDigest(ctx, img, "sha256:2", base.Add(time.Hour))
			if err != nil {
				t.Error(err)
			}
			if prev == "sha256:1" {
				changes.Add(1)
			}
		})
	}
	wg.Wait()
	if changes.Load() != 1 {
		t.Errorf("%d callers saw the change, want 1", changes.Load())
	}
	if err := s.RecordImageError(ctx, img, "connection refused", 1, base.Add(2*time.Hour), base.Add(2*time.Hour+time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordImageRebuild(ctx, img, base.Add(time.Hour), "apps/a: chain 1"); err != nil {
		t.Fatal(err)
	}
	all, err := s.ImageStates(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("ImageStates = %v, %v", all, err)
	}
	got := all[0]
	if got.Digest != "sha256:2" || !got.ChangedAt.Equal(base.Add(time.Hour)) || got.Failures != 1 || got.Err != "connection refused" ||
		!got.NextCheck.Equal(base.Add(2*time.Hour+time.Minute)) || got.RebuildOutcome != "apps/a: chain 1" {
		t.Errorf("stored %+v", got)
	}
}
