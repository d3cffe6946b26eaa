package store

import (
	"context"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/scan"
)

// How a project identifies its pipelines is kept on its row: the engine
// learns it (SetPipelineIdent, seen at once by another process that had
// the project cached), a scan replaces it only when it has something to
// say, and an action's first claim time is kept with it.
func TestPipelineIdentStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s1, dsn := b.openTemp(t)
		s2, err := Open(ctx, dsn) // another process on the same store
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		scanned := func(at time.Time, idents map[string]string) {
			t.Helper()
			var ps []scan.Project
			for i, path := range []string{"g/a", "g/b", "g/c"} {
				ps = append(ps, scan.Project{ID: int64(i + 1), Path: path, DefaultBranch: "main", PipelineIdent: idents[path], ScannedAt: at})
			}
			if err := s1.ApplyScan(ctx, ps, scan.Meta{StartedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		project := func(s *Store, path string) chain.Project {
			t.Helper()
			var p chain.Project
			err := s.UpdateChains(ctx, func(tx chain.Tx) error {
				if _, err := tx.ActiveChains(ctx); err != nil { // as the engine does: it reads the generations
					return err
				}
				var err error
				p, _, err = tx.Project(ctx, path)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		scanned(t0, map[string]string{"g/b": "none", "g/c": "variables"})
		for path, want := range map[string]chain.PipelineIdent{"g/a": "", "g/b": chain.IdentNone, "g/c": chain.IdentVariables} {
			if got := project(s2, path).Ident; got != want {
				t.Errorf("%s after the first scan: %q, want %q", path, got, want)
			}
		}
		err = s1.UpdateChains(ctx, func(tx chain.Tx) error { return tx.SetPipelineIdent(ctx, 1, chain.IdentInputs) })
		if err != nil {
			t.Fatal(err)
		}
		if got := project(s2, "g/a").Ident; got != chain.IdentInputs {
			t.Errorf("g/a in the other process after SetPipelineIdent: %q, want inputs", got)
		}
		scanned(t0.Add(time.Hour), map[string]string{"g/b": "variables"})
		ps, err := s2.Projects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"g/a": "inputs", "g/b": "variables", "g/c": "variables"}
		for _, p := range ps {
			if p.PipelineIdent != want[p.Path] {
				t.Errorf("%s after a scan with nothing to say of it: %q, want %q", p.Path, p.PipelineIdent, want[p.Path])
			}
		}

		claimed := t0.Add(2 * time.Minute)
		a := chain.Action{ID: "a-1", ChainID: 1, Project: "g/a", ProjectID: 1, Ref: "main", State: chain.ActionPending,
			Attempts: 1, NextAttemptAt: t0, CreatedAt: t0, ClaimedAt: claimed}
		err = s1.UpdateChains(ctx, func(tx chain.Tx) error { return tx.AddAction(ctx, a) })
		if err != nil {
			t.Fatal(err)
		}
		err = s2.ViewChains(ctx, func(tx chain.Tx) error {
			got, ok, err := tx.Action(ctx, "a-1")
			if err == nil && (!ok || !got.ClaimedAt.Equal(claimed)) {
				t.Errorf("action read back: %+v, %v; want ClaimedAt %s", got, ok, claimed)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
