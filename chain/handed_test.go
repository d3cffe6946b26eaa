package chain_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// handOnlyStore is a store whose transactions never find an action due, so
// that only the actions a transaction hands to the running outbox are
// sent, and which records every action written.
type handOnlyStore struct {
	*store.Store
	mu    sync.Mutex
	added []chain.Action
}

type handOnlyTx struct {
	chain.Tx
	s *handOnlyStore
}

func (handOnlyTx) DueAction(context.Context, time.Time) (chain.Action, bool, error) {
	return chain.Action{}, false, nil
}

func (tx handOnlyTx) AddAction(ctx context.Context, a chain.Action) error {
	if err := tx.Tx.AddAction(ctx, a); err != nil {
		return err
	}
	tx.s.mu.Lock()
	defer tx.s.mu.Unlock()
	tx.s.added = append(tx.s.added, a)
	return nil
}

func (s *handOnlyStore) UpdateChains(ctx context.Context, fn func(chain.Tx) error) error {
	return s.Store.UpdateChains(ctx, func(tx chain.Tx) error { return fn(handOnlyTx{tx, s}) })
}

// actionsOf returns the actions written for project, oldest first.
func (s *handOnlyStore) actionsOf(project string) []chain.Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []chain.Action
	for _, a := range s.added {
		if a.Project == project {
			out = append(out, a)
		}
	}
	return out
}

// handingEngine returns an engine on a handOnlyStore over e's store whose
// RunOutbox runs until the test ends; actions queued from then on are
// handed to it.
func (e *env) handingEngine(gl chain.GitLab, sendConcurrency int) (*chain.Engine, *handOnlyStore) {
	e.t.Helper()
	s := &handOnlyStore{Store: e.store}
	en, err := chain.New(chain.Config{Store: s, GitLab: gl, Graph: e.store.Graph, Now: e.clock.Now,
		Owner: "me", PollInterval: time.Hour, SendConcurrency: sendConcurrency})
	if err != nil {
		e.t.Fatal(err)
	}
	// RunOutbox waits for its senders as it stops, a slot reserved and
	// never given back included: then it does not stop.
	e.t.Cleanup(runWorkers(e.t, e.ctx, en.RunOutbox))
	deadline := time.Now().Add(10 * time.Second)
	for !chain.OutboxRunning(en) {
		if time.Now().After(deadline) {
			e.t.Fatal("RunOutbox did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return en, s
}

// applyAsOneBatch records the successes of pipelines depsd did not create
// and applies them in one inbox transaction.
func (e *env) applyAsOneBatch(en *chain.Engine, successes map[string]int64, order ...string) {
	e.t.Helper()
	for _, p := range order {
		ev := chain.PipelineEvent{ProjectID: e.ids[p], Project: p, PipelineID: successes[p], Status: "success", Ref: "main", Source: "push"}
		if _, err := en.RecordEvent(e.ctx, fmt.Sprintf("batch-%s-%d", p, successes[p]), chain.Event{Pipeline: &ev}); err != nil {
			e.t.Fatal(err)
		}
	}
	if n, err := en.ProcessInbox(e.ctx); n != len(order) || err != nil {
		e.t.Fatalf("ProcessInbox = %d, %v; want %d", n, err, len(order))
	}
}

// storedAction reads an action as the store holds it.
func (e *env) storedAction(id string) chain.Action {
	e.t.Helper()
	var a chain.Action
	var ok bool
	err := e.store.ViewChains(e.ctx, func(tx chain.Tx) error {
		var err error
		a, ok, err = tx.Action(e.ctx, id)
		return err
	})
	if err != nil || !ok {
		e.t.Fatalf("action %s: found %v, %v", id, ok, err)
	}
	return a
}

// An action handed to the running outbox is sent for the chain that holds
// its member when the transaction ends: here a later event of the same
// inbox batch merges the member's new chain into an older one, and the
// pipeline names the older chain, which the member's webhooks then move.
func TestHandedActionIsSentForTheChainThatAbsorbedItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>x", "hub>x", "hub>y", "lib>y")
	older := e.rebuild("lib") // {lib, y}, written before the outbox runs
	gl := &blockingGitLab{fakeGitLab: e.gl, hold: -1, entered: make(chan int64, 8)}
	en, _ := e.handingEngine(gl, 4)
	// base's success starts a chain {base, a, x} and queues a and x,
	// handed to the outbox; hub's ({hub, x, y}) then overlaps both chains
	// and merges base's into the older one.
	e.applyAsOneBatch(en, map[string]int64{"base": 77, "hub": 88}, "base", "hub")

	deadline := time.Now().Add(10 * time.Second)
	for len(gl.pipelinesSnapshot()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("pipelines created: %d, want 2 (a and x, handed to the outbox)", len(gl.pipelinesSnapshot()))
		}
		time.Sleep(time.Millisecond)
	}
	var projects []string
	for _, p := range gl.pipelinesSnapshot() {
		projects = append(projects, e.pathOf(p.ProjectID))
		if got := p.vars[chain.VarChainID]; got != strconv.FormatInt(older, 10) {
			t.Errorf("pipeline of %s sent for chain %s, want %d (the chain its member is in)", e.pathOf(p.ProjectID), got, older)
		}
	}
	slices.Sort(projects)
	if !slices.Equal(projects, []string{"a", "x"}) {
		t.Errorf("pipelines created for %q, want a and x", projects)
	}
	cs, err := e.engine.Chains(e.ctx, chain.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.ID != older && c.MergedInto != older {
			t.Errorf("chain %d (%s) is %s, merged into %d; want every chain merged into %d", c.ID, states(c), c.State, c.MergedInto, older)
		}
	}
}

// An action handed to the running outbox that a later event of the same
// transaction takes back is not sent: hub's success merges into the chain
// base's success just started, and a, queued for base alone and not sent
// yet, waits for hub as well and is queued once more, to be built once (as
// when no outbox runs), not built now and requeued. The withdrawn action is
// left obsolete and unclaimed, and its sender slot given back.
func TestHandedActionWithdrawnInTheSameTransactionIsGivenBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "lib>b", "base>a", "hub>a", "hub>b", "z")
	older := e.rebuild("lib") // {lib, b}, written before the outbox runs
	gl := &blockingGitLab{fakeGitLab: e.gl, hold: -1, entered: make(chan int64, 8)}
	en, s := e.handingEngine(gl, 1) // one sender slot
	e.applyAsOneBatch(en, map[string]int64{"base": 77, "hub": 88}, "base", "hub")

	as := s.actionsOf("a")
	if len(as) != 2 || as[0].ClaimedBy != "me" {
		t.Fatalf("actions written for a: %+v; want one handed to the outbox, then one more", as)
	}
	old, again := e.storedAction(as[0].ID), e.storedAction(as[1].ID)
	if old.State != chain.ActionObsolete || old.Attempts != 0 || old.ClaimedBy != "" || !old.LeaseUntil.IsZero() {
		t.Errorf("withdrawn action: state %s, attempts %d, claimed by %q, lease %v; want obsolete and unclaimed",
			old.State, old.Attempts, old.ClaimedBy, old.LeaseUntil)
	}
	if again.State != chain.ActionPending || !slices.Equal(again.Upstreams, []string{"base", "hub"}) {
		t.Errorf("a queued again: state %s, upstreams %q; want pending, after base and hub", again.State, again.Upstreams)
	}
	e.wantStates(older, "a=pending b=waiting base=success hub=success lib=pending")

	// The slot is free: z's action is handed to the outbox and sent.
	if _, err := en.Rebuild(e.ctx, "z", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-gl.entered:
		if got != e.ids["z"] {
			t.Fatalf("create for %s, want z: the withdrawn action was sent", e.pathOf(got))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("z's action was not sent: the withdrawn action's sender slot was not given back")
	}
}
