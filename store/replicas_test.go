package store

import (
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// One holder at a time: another takes the lease only once it expired or
// was released; the holder renews it keeping its start.
func TestLeaseOneHolder(t *testing.T) { forEachBackend(t, testLeaseOneHolder) }

func testLeaseOneHolder(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	ttl := 15 * time.Second
	take := func(holder string, at time.Time) Lease {
		t.Helper()
		l, err := s.TryLease(ctx, "leader", holder, at, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := take("a", t0); l.Holder != "a" || !l.ExpiresAt.Equal(t0.Add(ttl)) {
		t.Fatalf("a on a free lease: %+v", l)
	}
	if l := take("b", t0.Add(ttl-time.Millisecond)); l.Holder != "a" {
		t.Fatalf("b took a live lease: %+v", l)
	}
	if l := take("a", t0.Add(10*time.Second)); l.Holder != "a" || !l.AcquiredAt.Equal(t0) || !l.ExpiresAt.Equal(t0.Add(10*time.Second+ttl)) {
		t.Fatalf("a renewing: %+v", l)
	}
	if l := take("b", t0.Add(10*time.Second+ttl)); l.Holder != "b" || !l.AcquiredAt.Equal(t0.Add(10*time.Second+ttl)) {
		t.Fatalf("b on an expired lease: %+v", l)
	}
	if got, ok, err := s.LeaseOf(ctx, "leader"); err != nil || !ok || got.Holder != "b" {
		t.Fatalf("LeaseOf = %+v, %v, %v", got, ok, err)
	}
	if err := s.ReleaseLease(ctx, "leader", "a"); err != nil { // not a's: nothing happens
		t.Fatal(err)
	}
	if err := s.ReleaseLease(ctx, "leader", "b"); err != nil {
		t.Fatal(err)
	}
	if l := take("a", t0.Add(11*time.Second+ttl)); l.Holder != "a" {
		t.Fatalf("a after b released: %+v", l)
	}
}

// DropLease drops a lease only as it was read: one renewed since is left
// alone (a live process renewed it), and so is another lease.
func TestDropLeaseOnlyAsRead(t *testing.T) { forEachBackend(t, testDropLeaseOnlyAsRead) }

func testDropLeaseOnlyAsRead(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	ttl := 15 * time.Second
	read, err := s.TryLease(ctx, "alive:r/1", "r/1", t0, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryLease(ctx, "alive:r/2", "r/2", t0, ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TryLease(ctx, "alive:r/1", "r/1", t0.Add(5*time.Second), ttl); err != nil { // renewed
		t.Fatal(err)
	}
	if dropped, err := s.DropLease(ctx, read); err != nil || dropped {
		t.Fatalf("DropLease of a lease renewed since = %v, %v; want false", dropped, err)
	}
	renewed, ok, err := s.LeaseOf(ctx, "alive:r/1")
	if err != nil || !ok || !renewed.ExpiresAt.Equal(t0.Add(5*time.Second+ttl)) {
		t.Fatalf("renewed lease after DropLease: %+v, %v, %v", renewed, ok, err)
	}
	if dropped, err := s.DropLease(ctx, renewed); err != nil || !dropped {
		t.Fatalf("DropLease of the lease as read = %v, %v; want true", dropped, err)
	}
	if _, ok, err := s.LeaseOf(ctx, "alive:r/1"); err != nil || ok {
		t.Fatalf("dropped lease still there: %v, %v", ok, err)
	}
	if _, ok, err := s.LeaseOf(ctx, "alive:r/2"); err != nil || !ok {
		t.Fatalf("another lease went with it: %v, %v", ok, err)
	}
}

// An action claimed by a process whose liveness lease ran out is due
// again before its own lease ends; one claimed by a live process is not.
func TestClaimOfADeadOwnerIsVoid(t *testing.T) { forEachBackend(t, testClaimOfADeadOwnerIsVoid) }

func testClaimOfADeadOwnerIsVoid(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	if _, err := s.TryLease(ctx, "alive:r1/x", "r1/x", t0, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	a := chain.Action{ID: "a-1", ChainID: 1, Project: "g/a", ProjectID: 3, Ref: "main", State: chain.ActionPending,
		NextAttemptAt: t0, CreatedAt: t0, Attempts: 1, LeaseUntil: t0.Add(5 * time.Minute), ClaimedBy: "r1/x"}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		if err := tx.AddAction(ctx, a); err != nil {
			return err
		}
		if _, ok, _ := tx.DueAction(ctx, t0.Add(10*time.Second)); ok {
			t.Error("the claim of a live process was taken over")
		}
		got, ok, err := tx.DueAction(ctx, t0.Add(15*time.Second))
		if err != nil || !ok || got.ClaimedBy != "r1/x" {
			t.Errorf("claim of a dead process: DueAction = %+v, %v, %v", got, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneLeases(ctx, "alive:", t0.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("PruneLeases = %d, %v", n, err)
	}
}
