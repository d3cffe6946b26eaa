package store

import (
	"context"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scan"
)

// A project's visibility is what its last scan said; the engine reads it
// with the project.
func TestProjectVisibilityStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.openTemp(t)
		t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		scanned := func(at time.Time, vis string) {
			t.Helper()
			ps := []scan.Project{{ID: 1, Path: "g/a", DefaultBranch: "main", Visibility: vis, ScannedAt: at}}
			if err := s.ApplyScan(ctx, ps, scan.Meta{StartedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		read := func() (string, string) {
			t.Helper()
			var p chain.Project
			err := s.UpdateChains(ctx, func(tx chain.Tx) error {
				if _, err := tx.ActiveChains(ctx); err != nil { // as the engine does: it reads the generations
					return err
				}
				var err error
				p, _, err = tx.Project(ctx, "g/a")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			sp, err := s.Project(ctx, "g/a")
			if err != nil {
				t.Fatal(err)
			}
			return p.Visibility, sp.Visibility
		}
		scanned(t0, "internal")
		if e, sc := read(); e != "internal" || sc != "internal" {
			t.Errorf("visibility %q (engine), %q (scan), want internal", e, sc)
		}
		scanned(t0.Add(time.Hour), "public")
		if e, sc := read(); e != "public" || sc != "public" {
			t.Errorf("visibility after a rescan %q (engine), %q (scan), want public", e, sc)
		}
	})
}

// A chain's commit status row: the chain transactions write what it
// should show (only changes count), the sender claims it with a lease and
// writes its own columns, never the want.
func TestChainStatusRows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s, _ := b.openTemp(t)
		t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		update := func(fn func(tx chain.Tx) error) {
			t.Helper()
			if err := s.UpdateChains(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
		get := func() chain.ChainStatus {
			t.Helper()
			var st chain.ChainStatus
			var ok bool
			err := s.ViewChains(ctx, func(tx chain.Tx) error {
				var err error
				st, ok, err = tx.ChainStatus(ctx, 70)
				return err
			})
			if err != nil || !ok {
				t.Fatalf("ChainStatus = %v, %v", ok, err)
			}
			return st
		}
		due := func(now time.Time) (chain.ChainStatus, bool) {
			t.Helper()
			var st chain.ChainStatus
			var ok bool
			update(func(tx chain.Tx) error {
				var err error
				st, ok, err = tx.DueChainStatus(ctx, now)
				return err
			})
			return st, ok
		}
		row := chain.ChainStatus{PipelineID: 70, ProjectID: 7, Project: "g/base", SHA: "abc", Ref: "main", ChainID: 1,
			CreatedAt: t0, NextSendAt: t0}
		update(func(tx chain.Tx) error {
			if err := tx.AddChainStatus(ctx, row); err != nil {
				return err
			}
			// Recorded once: a second start of the same pipeline keeps it.
			again := row
			again.ChainID = 9
			return tx.AddChainStatus(ctx, again)
		})
		if _, ok := due(t0); ok {
			t.Fatal("a status nothing was wanted of is due")
		}
		// A want for a pipeline without a status writes nothing.
		update(func(tx chain.Tx) error {
			if err := tx.WantChainStatus(ctx, 71, 1, chain.CommitPending, "x"); err != nil {
				return err
			}
			if err := tx.WantChainStatus(ctx, 70, 1, chain.CommitPending, "0 of 2 rebuilt"); err != nil {
				return err
			}
			// The same again is no change.
			return tx.WantChainStatus(ctx, 70, 1, chain.CommitPending, "0 of 2 rebuilt")
		})
		got := get()
		if got.ChainID != 1 || got.Want != chain.CommitPending || got.WantDesc != "0 of 2 rebuilt" || got.WantSeq != 1 || got.DoneSeq != 0 {
			t.Fatalf("after the want: %+v", got)
		}
		st, ok := due(t0)
		if !ok || st.PipelineID != 70 || !st.Due(t0) {
			t.Fatalf("due = %+v, %v", st, ok)
		}
		// Claimed: not due until its lease ran out.
		st.Doubt, st.LeaseUntil, st.ClaimedBy = true, t0.Add(5*time.Minute), ""
		update(func(tx chain.Tx) error { return tx.SaveChainStatusSend(ctx, st) })
		if _, ok := due(t0.Add(time.Minute)); ok {
			t.Error("a claimed status is due within its lease")
		}
		// The chain moved meanwhile: its want and a merge's chain id.
		update(func(tx chain.Tx) error {
			return tx.WantChainStatus(ctx, 70, 3, chain.CommitRunning, "0 of 2 rebuilt, 1 building")
		})
		// The sender records its post of the claimed want (seq 1).
		sent := st
		sent.DoneSeq, sent.Have, sent.HaveDesc, sent.Doubt = 1, chain.CommitPending, "0 of 2 rebuilt", false
		sent.LeaseUntil, sent.SentAt, sent.NextSendAt = time.Time{}, t0.Add(time.Second), t0.Add(6*time.Second)
		update(func(tx chain.Tx) error { return tx.SaveChainStatusSend(ctx, sent) })
		got = get()
		if got.Want != chain.CommitRunning || got.WantSeq != 2 || got.ChainID != 3 || got.DoneSeq != 1 ||
			got.Have != chain.CommitPending || got.Doubt || !got.SentAt.Equal(t0.Add(time.Second)) {
			t.Fatalf("after the send: %+v", got)
		}
		if _, ok := due(t0.Add(5 * time.Second)); ok {
			t.Error("due before its next send time")
		}
		var next time.Time
		err := s.ViewChains(ctx, func(tx chain.Tx) error {
			var err error
			next, ok, err = tx.NextChainStatusDue(ctx)
			return err
		})
		if err != nil || !ok || !next.Equal(t0.Add(6*time.Second)) {
			t.Errorf("NextChainStatusDue = %v, %v, %v", next, ok, err)
		}
		if st, ok := due(t0.Add(6 * time.Second)); !ok || st.WantSeq != 2 {
			t.Errorf("due = %+v, %v", st, ok)
		}
		var list []chain.ChainStatus
		err = s.ViewChains(ctx, func(tx chain.Tx) error {
			var err error
			list, err = tx.ChainStatuses(ctx, 3)
			return err
		})
		if err != nil || len(list) != 1 || list[0].PipelineID != 70 {
			t.Errorf("ChainStatuses(3) = %+v, %v", list, err)
		}
	})
}
