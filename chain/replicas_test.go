package chain_test

import (
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// TestTwoProcessesTakeTurnsAtOneChain: two processes (two stores with
// their own caches on one database) apply a chain's events in turn, each
// changing the chain in its cache: each must see what the other wrote,
// and neither cache may differ from the store, through a failure, a
// retry's success and the end of the chain.
func TestTwoProcessesTakeTurnsAtOneChain(t *testing.T) {
	e := newEnv(t, chain.Full, "base>a", "base>b", "a>c", "b>c")
	s2, err := store.Open(e.ctx, e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	other, err := chain.New(chain.Config{Store: s2, GitLab: e.gl, Graph: s2.Graph, Mode: chain.Full, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	engines, stores := []*chain.Engine{e.engine, other}, []*store.Store{e.store, s2}
	turn := 0
	// next hands the following step to the other process, once both
	// caches agree with the store.
	next := func() {
		t.Helper()
		for _, s := range stores {
			if err := s.CheckChainCache(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		turn++
		e.engine = engines[turn%2]
	}
	id := e.rebuild("base")
	next()
	e.send()
	next()
	e.finish("base", "success")
	next()
	e.send()
	next()
	e.finish("a", "failed")
	next()
	e.finish("b", "success")
	next()
	e.wantStates(id, "a=failed b=success base=success c=blocked")
	e.external("a", 5555, "success") // a developer's fix
	next()
	e.wantStates(id, "a=success b=success base=success c=pending")
	e.send()
	next()
	e.finish("c", "success")
	next()
	if v := e.wantStates(id, "a=success b=success base=success c=success"); v.State != chain.Finished {
		t.Errorf("chain %s, want finished", v.State)
	}
}
