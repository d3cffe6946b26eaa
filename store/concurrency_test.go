package store

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// scanOf returns a scan result of n projects in a chain, distinguishable by
// tag so readers can check they never see half of one scan.
func scanOf(n int, tag string) []scan.Project {
	out := make([]scan.Project, n)
	for i := range out {
		out[i] = scan.Project{ID: int64(i + 1), Path: fmt.Sprintf("g/p%03d", i), DefaultBranch: "main", HeadCommit: tag}
		if i > 0 {
			out[i].Dependencies = []deps.Dependency{{Kind: deps.KindFrom, Line: 1, Ref: tag, Project: out[i-1].Path}}
		}
	}
	return out
}

// The CLI and the daemon each have their own Store on one file. A burst of
// writes and reads from both must all succeed (no "database is locked"), and
// every read must see one whole scan.
func TestTwoStoresOnOneFile(t *testing.T) { forEachBackend(t, testTwoStoresOnOneFile) }

func testTwoStoresOnOneFile(t *testing.T, b backend) {
	ctx := t.Context()
	path := b.fresh(t)
	var stores [2]*Store
	for i := range stores {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		defer s.Close()
		stores[i] = s
	}
	const writes, projects = 8, 25
	var g errgroup.Group
	for i, s := range stores {
		g.Go(func() error { // writer
			for k := range writes {
				tag := fmt.Sprintf("s%d-%d", i, k)
				start := time.Date(2025, 1, 1, 0, 0, k, i, time.UTC)
				if err := s.ApplyScan(ctx, scanOf(projects, tag), scan.Meta{StartedAt: start}); err != nil {
					return fmt.Errorf("store %d write %d: %w", i, k, err)
				}
			}
			return nil
		})
		g.Go(func() error { // reader
			for k := range writes {
				got, err := s.Projects(ctx)
				if err != nil {
					return fmt.Errorf("store %d read %d: %w", i, k, err)
				}
				for _, p := range got {
					if p.HeadCommit != got[0].HeadCommit {
						return fmt.Errorf("store %d read %d saw a mix of scans %s and %s", i, k, got[0].HeadCommit, p.HeadCommit)
					}
				}
				if _, err := s.Graph(ctx); err != nil {
					return fmt.Errorf("store %d graph %d: %w", i, k, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, s := range stores {
		got, err := s.Projects(ctx)
		if err != nil || len(got) != projects {
			t.Fatalf("store %d after the burst: %d projects, %v", i, len(got), err)
		}
	}
}

// Two processes starting on a fresh file at the same time both migrate it
// without error.
func TestConcurrentOpenOfFreshFile(t *testing.T) { forEachBackend(t, testConcurrentOpenOfFreshFile) }

func testConcurrentOpenOfFreshFile(t *testing.T, b backend) {
	path := b.fresh(t)
	var g errgroup.Group
	for range 4 {
		g.Go(func() error {
			s, err := Open(t.Context(), path)
			if err != nil {
				return err
			}
			return s.Close()
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// Write transactions serialise: each sees the effects of the one before,
// which the chain engine relies on (a new chain id is one more than the
// highest stored). Concurrent writers from two handles never take the same
// id, so every chain is kept.
func TestWriteTransactionsSerialise(t *testing.T) { forEachBackend(t, testWriteTransactionsSerialise) }

func testWriteTransactionsSerialise(t *testing.T, b backend) {
	ctx := t.Context()
	s1, dsn := b.openTemp(t)
	s2, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	const writers, each = 6, 5
	var g errgroup.Group
	for w := range writers {
		s := []*Store{s1, s2}[w%2]
		g.Go(func() error {
			for range each {
				err := s.UpdateChains(ctx, func(tx chain.Tx) error {
					id, err := tx.NewChainID(ctx)
					if err != nil {
						return err
					}
					return tx.SaveChain(ctx, &chain.Chain{ID: id, Mode: chain.Full, State: chain.Finished, StartedAt: t0, UpdatedAt: t0})
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s1.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM chains`).Scan(&n); err != nil || n != writers*each {
		t.Fatalf("%d chains stored (%v), want %d: writers overwrote each other", n, err, writers*each)
	}
}

// The same delivery recorded by several replicas at once (GitLab's resend
// racing the original) is stored once: exactly one caller sees it as new.
func TestRecordEventOnceUnderConcurrency(t *testing.T) {
	forEachBackend(t, testRecordEventOnceUnderConcurrency)
}

func testRecordEventOnceUnderConcurrency(t *testing.T, b backend) {
	ctx := t.Context()
	s1, dsn := b.openTemp(t)
	s2, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	const callers = 8
	var fresh atomic.Int32
	var g errgroup.Group
	for i := range callers {
		s := []*Store{s1, s2}[i%2]
		g.Go(func() error {
			dup, err := s.RecordEvent(ctx, "same-key", chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/a", PipelineID: 1}})
			if !dup {
				fresh.Add(1)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s1.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM events`).Scan(&n); err != nil || n != 1 || fresh.Load() != 1 {
		t.Fatalf("%d events stored (%v), %d callers saw it as new; want 1 and 1", n, err, fresh.Load())
	}
}
