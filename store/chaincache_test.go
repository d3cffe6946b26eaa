package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

func TestChainCacheFollowsOtherWriters(t *testing.T) {
	forEachBackend(t, testChainCacheFollowsOtherWriters)
}

// testChainCacheFollowsOtherWriters: two Stores on one database (two
// processes or replicas) each cache the active chains; what one writes,
// the other sees in its next transaction; a rolled-back change never
// reaches the cache; a change to one member through a cached chain is
// written.
func testChainCacheFollowsOtherWriters(t *testing.T, b backend) {
	a, other := b.openTwo(t)
	ctx := t.Context()
	c := &chain.Chain{ID: 1, Mode: chain.Full, State: chain.Running, Roots: []string{"g/base"}, StartedAt: t0, UpdatedAt: t0,
		Members: []*chain.Member{
			{Project: "g/app", ProjectID: 2, State: chain.Waiting, Upstreams: []string{"g/base"}},
			{Project: "g/base", ProjectID: 1, State: chain.Pending, ActionID: "a-1"},
		}}
	// set changes the member of the only active chain through s, or fails
	// with fail after changing it.
	set := func(s *Store, project string, state chain.MemberState, fail error) error {
		return s.UpdateChains(ctx, func(tx chain.Tx) error {
			cs, err := tx.ActiveChains(ctx)
			if err != nil || len(cs) != 1 {
				return errors.Join(err, errors.New("want one active chain"))
			}
			for _, m := range cs[0].Members {
				if m.Project == project {
					m.State = state
				}
			}
			if err := tx.SaveChain(ctx, cs[0]); err != nil {
				return err
			}
			return fail
		})
	}
	state := func(s *Store, project string) chain.MemberState {
		var st chain.MemberState
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			cs, err := tx.ActiveChains(ctx)
			if err != nil {
				return err
			}
			for _, m := range cs[0].Members {
				if m.Project == project {
					st = m.State
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if err := a.UpdateChains(ctx, func(tx chain.Tx) error { return tx.SaveChain(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	if got := state(a, "g/base"); got != chain.Pending { // a caches the chain
		t.Fatalf("base %s, want pending", got)
	}
	if err := set(other, "g/base", chain.MemberRunning, nil); err != nil {
		t.Fatal(err)
	}
	if got := state(a, "g/base"); got != chain.MemberRunning {
		t.Errorf("after another store wrote: base %s, want running", got)
	}
	boom := errors.New("boom")
	if err := set(a, "g/app", chain.Failed, boom); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := state(a, "g/app"); got != chain.Waiting {
		t.Errorf("after a rollback: app %s, want waiting", got)
	}
	if err := set(a, "g/app", chain.MemberBlocked, nil); err != nil {
		t.Fatal(err)
	}
	var view *chain.Chain
	if err := other.ViewChains(ctx, func(tx chain.Tx) error {
		var err error
		view, err = tx.Chain(context.WithoutCancel(ctx), 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if view.Members[0].State != chain.MemberBlocked || view.Members[1].State != chain.MemberRunning {
		t.Errorf("stored members %s, %s", view.Members[0].State, view.Members[1].State)
	}
}

func TestVersionsReadAfterAWriteAreNotKept(t *testing.T) {
	forEachBackend(t, testVersionsReadAfterAWriteAreNotKept)
}

// testVersionsReadAfterAWriteAreNotKept: a transaction that reads the
// active chains again after saving one, then saves it again, commits a
// version its second read did not see; the next transactions, in this
// process and in another, must not take that read for the store's.
func testVersionsReadAfterAWriteAreNotKept(t *testing.T, b backend) {
	a, other := b.openTwo(t)
	ctx := t.Context()
	c := &chain.Chain{ID: 1, Mode: chain.Full, State: chain.Running, Roots: []string{"g/base"}, StartedAt: t0, UpdatedAt: t0,
		Members: []*chain.Member{{Project: "g/base", ProjectID: 1, State: chain.Pending, ActionID: "a-1"}}}
	if err := a.UpdateChains(ctx, func(tx chain.Tx) error { return tx.SaveChain(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	// why sets the only member's why in s's next transaction (saved
	// twice there, with a read of the active chains in between, when
	// twice), and returns the why other then reads.
	why := func(s *Store, w string, twice bool) string {
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			for i := range 2 {
				cs, err := tx.ActiveChains(ctx)
				if err != nil {
					return err
				}
				cs[0].Members[0].Why = fmt.Sprintf("%s %d", w, i)
				if err := tx.SaveChain(ctx, cs[0]); err != nil || !twice {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = other.UpdateChains(ctx, func(tx chain.Tx) error {
			cs, err := tx.ActiveChains(ctx)
			if err == nil {
				got = cs[0].Members[0].Why
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, step := range []struct {
		s     *Store
		w     string
		twice bool
	}{{a, "first", true}, {other, "second", false}, {a, "third", false}, {a, "fourth", true}, {a, "fifth", false}} {
		want := step.w + " 0"
		if step.twice {
			want = step.w + " 1"
		}
		if got := why(step.s, step.w, step.twice); got != want {
			t.Errorf("after %s: the other store reads %q, want %q", step.w, got, want)
		}
	}
	for _, s := range []*Store{a, other} {
		if err := s.CheckChainCache(ctx); err != nil {
			t.Error(err)
		}
	}
}

// openTwo opens a new, empty store twice: two processes (or replicas) on
// one database. Both are closed when t ends.
func (b backend) openTwo(t *testing.T) (*Store, *Store) {
	t.Helper()
	a, dsn := b.openTemp(t)
	other, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return a, other
}
