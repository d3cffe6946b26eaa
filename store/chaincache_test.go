package store

import (
	"context"
	"errors"
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
	a, dsn := b.openTemp(t)
	other, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
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
