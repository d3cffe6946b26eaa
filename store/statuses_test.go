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
