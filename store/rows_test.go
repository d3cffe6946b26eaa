package store

import (
	"fmt"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

func TestManyRowsWrittenTogether(t *testing.T) { forEachBackend(t, testManyRowsWrittenTogether) }

// testManyRowsWrittenTogether: members written several to a statement (64,
// 16, 4, 1 rows) all arrive; actions held back in PostgreSQL's pipeline are
// read back in their own transaction, and those added after the last read
// are written at the commit.
func testManyRowsWrittenTogether(t *testing.T, b backend) {
	s, dsn := b.openTemp(t)
	ctx := t.Context()
	const members, later = 87, 3 // 64 + 16 + 4 + 3×1
	c := &chain.Chain{ID: 1, Mode: chain.Full, State: chain.Running, Roots: []string{"g/p000"}, StartedAt: t0, UpdatedAt: t0}
	action := func(i int) chain.Action {
		return chain.Action{ID: fmt.Sprintf("a-%03d", i), ChainID: 1, Project: fmt.Sprintf("g/p%03d", i), ProjectID: int64(i + 1),
			Ref: "main", State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0}
	}
	for i := range members {
		c.Members = append(c.Members, &chain.Member{Project: fmt.Sprintf("g/p%03d", i), ProjectID: int64(i + 1),
			State: chain.Pending, ActionID: action(i).ID, Why: fmt.Sprintf("member %d", i)})
	}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		for i := range members {
			if err := tx.AddAction(ctx, action(i)); err != nil {
				return err
			}
		}
		a, ok, err := tx.Action(ctx, action(50).ID)
		if err != nil || !ok || a.Project != "g/p050" {
			t.Errorf("action 50 in its own transaction = %+v, %v, %v", a, ok, err)
		}
		for i := range later {
			if err := tx.AddAction(ctx, action(members+i)); err != nil {
				return err
			}
		}
		return tx.SaveChain(ctx, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	err = other.ViewChains(ctx, func(tx chain.Tx) error {
		if n, err := tx.CountActions(ctx, chain.ActionPending); err != nil || n != members+later {
			t.Errorf("%d actions stored, %v; want %d", n, err, members+later)
		}
		if a, ok, err := tx.Action(ctx, action(members+later-1).ID); err != nil || !ok || a.ProjectID != members+later {
			t.Errorf("last action = %+v, %v, %v", a, ok, err)
		}
		got, err := tx.Chain(ctx, 1)
		if err != nil {
			return err
		}
		if len(got.Members) != members {
			t.Fatalf("%d members stored, want %d", len(got.Members), members)
		}
		for i, m := range got.Members {
			if want := fmt.Sprintf("member %d", i); m.Project != c.Members[i].Project || m.Why != want || m.ActionID != c.Members[i].ActionID {
				t.Errorf("member %d = %s %q %s, want %s %q %s", i, m.Project, m.Why, m.ActionID, c.Members[i].Project, want, c.Members[i].ActionID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFailedStatementVoidsTheTransaction(t *testing.T) {
	forEachBackend(t, testFailedStatementVoidsTheTransaction)
}

// testFailedStatementVoidsTheTransaction: a statement that fails (on
// PostgreSQL after it was held back in the pipeline) fails the transaction
// with what went wrong, and nothing of it is kept.
func testFailedStatementVoidsTheTransaction(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	if _, err := s.RecordEvent(ctx, "k1", chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/a", PipelineID: 1}}); err != nil {
		t.Fatal(err)
	}
	a := chain.Action{ID: "a-1", ChainID: 1, Project: "g/a", ProjectID: 1, Ref: "main", State: chain.ActionPending,
		NextAttemptAt: t0, CreatedAt: t0}
	if err := s.UpdateChains(ctx, func(tx chain.Tx) error { return tx.AddAction(ctx, a) }); err != nil {
		t.Fatal(err)
	}
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		se, ok, err := tx.NextEvent(ctx)
		if err != nil || !ok {
			return fmt.Errorf("next event: %v, %v", ok, err)
		}
		if err := tx.MarkEvent(ctx, se.Seq, t0, "done"); err != nil {
			return err
		}
		if err := tx.AddAction(ctx, a); err != nil { // the same id again
			return err
		}
		_, _, err = tx.Action(ctx, "a-2")
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "outbox") {
		t.Fatalf("UpdateChains with a duplicate action = %v, want the failed insert into the outbox", err)
	}
	err = s.ViewChains(ctx, func(tx chain.Tx) error {
		if n, err := tx.CountEvents(ctx); err != nil || n != 1 {
			t.Errorf("%d unprocessed events, %v; want the event still unprocessed", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
