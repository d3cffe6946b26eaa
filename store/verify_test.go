package store

import (
	"reflect"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

func TestVerifyQueue(t *testing.T) { forEachBackend(t, testVerifyQueue) }

// testVerifyQueue: queued builds come back oldest first, a build queued
// twice once, and a done one no more.
func testVerifyQueue(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	shop := chain.VerifyTask{Project: "g/shop", ProjectID: 3, PipelineID: 12, ChainID: 1, QueuedAt: t0.Add(time.Second)}
	ruby := chain.VerifyTask{Project: "g/ruby", ProjectID: 2, PipelineID: 11, QueuedAt: t0}
	again := shop
	again.QueuedAt, again.ChainID = t0.Add(time.Hour), 9
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		for _, task := range []chain.VerifyTask{shop, ruby, again} {
			if err := tx.QueueVerify(ctx, task); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tasks := func(limit int) []chain.VerifyTask {
		t.Helper()
		var out []chain.VerifyTask
		err := s.ViewChains(ctx, func(tx chain.Tx) error {
			var err error
			out, err = tx.VerifyTasks(ctx, limit)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var queued int
	if err := s.ViewChains(ctx, func(tx chain.Tx) error { queued, err = tx.CountVerifyTasks(ctx); return err }); err != nil || queued != 2 {
		t.Errorf("CountVerifyTasks = %d, %v; want 2", queued, err)
	}
	if got, want := tasks(10), []chain.VerifyTask{ruby, shop}; !reflect.DeepEqual(got, want) {
		t.Errorf("queue = %+v\nwant %+v", got, want)
	}
	if got := tasks(1); len(got) != 1 || got[0].Project != "g/ruby" {
		t.Errorf("queue limited to 1 = %+v", got)
	}
	err = s.UpdateChains(ctx, func(tx chain.Tx) error {
		if err := tx.DoneVerify(ctx, "g/ruby", 11); err != nil {
			return err
		}
		return tx.DoneVerify(ctx, "g/none", 1) // none queued: no error
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tasks(10), []chain.VerifyTask{shop}; !reflect.DeepEqual(got, want) {
		t.Errorf("queue after one was done = %+v\nwant %+v", got, want)
	}
}
