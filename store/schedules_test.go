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
	state := func() scheduler.ImageState {
		t.Helper()
		all, err := s.ImageStates(ctx)
		if err != nil || len(all) != 1 {
			t.Fatalf("ImageStates = %v, %v", all, err)
		}
		return all[0]
	}
	// The change is pending from the moment it was recorded.
	change := scheduler.PendingRebuild{Detail: scheduler.DigestChange(img, "sha256:1", "sha256:2"), At: base.Add(time.Hour)}
	if got := state().Pending; got != change {
		t.Fatalf("pending after the change: %+v, want %+v", got, change)
	}
	// An attempt that left users behind keeps it pending, counted.
	if err := s.RecordImageRebuild(ctx, img, change, "apps/a: chain 1; errors: apps/b: busy", false); err != nil {
		t.Fatal(err)
	}
	if got := state().Pending; got.Detail != change.Detail || got.Attempts != 1 {
		t.Fatalf("pending after a partial attempt: %+v, want one attempt counted", got)
	}
	change.Attempts = 1
	if err := s.RecordImageRebuild(ctx, img, change, "apps/a: chain 1, apps/b: chain 2", true); err != nil {
		t.Fatal(err)
	}
	got := state()
	if got.Digest != "sha256:2" || !got.ChangedAt.Equal(base.Add(time.Hour)) || got.Failures != 1 || got.Err != "connection refused" ||
		!got.NextCheck.Equal(base.Add(2*time.Hour+time.Minute)) || got.RebuildOutcome != "apps/a: chain 1, apps/b: chain 2" || got.Pending.Detail != "" {
		t.Errorf("stored %+v", got)
	}
	// An outcome of an older change leaves a newer pending change alone.
	if _, err := s.RecordDigest(ctx, img, "sha256:3", base.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordImageRebuild(ctx, img, change, "late", true); err != nil {
		t.Fatal(err)
	}
	if got := state().Pending; got.Detail != scheduler.DigestChange(img, "sha256:2", "sha256:3") || got.Attempts != 0 {
		t.Errorf("a newer change after an older one's outcome: %+v, want it pending", got)
	}
}

// Of concurrent resumes of an unfinished fire, exactly one wins; a fire
// with an outcome, or claimed again since, is not resumed.
func TestResumeFireOnce(t *testing.T) { forEachBackend(t, testResumeFireOnce) }

func testResumeFireOnce(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.openTemp(t)
	base := time.Date(2025, 1, 6, 2, 0, 0, 0, time.UTC)
	if _, err := s.RegisterSchedule(ctx, scheduler.ScheduleState{ID: "x", Kind: scheduler.KindRebuild, Target: "infra/base", Spec: "0 3 * * *", Timezone: "UTC", Cursor: base}); err != nil {
		t.Fatal(err)
	}
	fire := base.Add(time.Hour)
	claimed := fire.Add(time.Second)
	if ok, err := s.ClaimFire(ctx, "x", base, fire, claimed, "dead"); !ok || err != nil {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if ok, err := s.ResumeFire(ctx, "x", fire, claimed.Add(time.Millisecond), fire.Add(time.Minute), "late"); ok || err != nil {
		t.Fatalf("resume with the wrong claim time: %v, %v; want refused", ok, err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ok, err := s.ResumeFire(ctx, "x", fire, claimed, fire.Add(time.Minute), string(rune('a'+i)))
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
		t.Fatalf("%d resumes won, want 1", wins.Load())
	}
	all, err := s.ScheduleStates(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("ScheduleStates = %v, %v", all, err)
	}
	st := all[0]
	if st.FiredBy == "dead" || !st.FiredAt.Equal(fire.Add(time.Minute)) || !st.LastFire.Equal(fire) {
		t.Errorf("after the resume: %+v; want fired again at %s by one of the resumers", st, fire.Add(time.Minute))
	}
	if err := s.RecordOutcome(ctx, "x", fire, scheduler.Outcome{FinishedAt: fire.Add(2 * time.Minute), ChainID: 3}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.ResumeFire(ctx, "x", fire, st.FiredAt, fire.Add(time.Hour), "again"); ok || err != nil {
		t.Errorf("resume of a finished fire: %v, %v; want refused", ok, err)
	}
}
