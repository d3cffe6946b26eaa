package store

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store/pgtest"
)

// TestRecordEventsReplicasDoNotDeadlock: two replicas on one PostgreSQL
// database record batches of the same deliveries at once, in opposite
// orders (a load balancer that sends a resend to the other replica). Every
// batch is recorded without an error (a deadlock would abort one, and its
// webhooks would be answered 503), and each delivery is recorded exactly
// once.
func TestRecordEventsReplicasDoNotDeadlock(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	var replicas [2]*Store
	for i := range replicas {
		s, err := Open(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		replicas[i] = s
	}
	const rounds, batch = 15, 300
	fresh := map[string]int{}
	var mu sync.Mutex
	for round := range rounds {
		evs := make([]chain.NewEvent, batch)
		for i := range evs {
			ev := chain.PipelineEvent{Project: "g/p", ProjectID: 1, PipelineID: int64(i), Status: "running", Ref: "main"}
			evs[i] = chain.NewEvent{Key: fmt.Sprintf("r%d-k%03d", round, i), Event: chain.Event{Pipeline: &ev}}
		}
		reversed := slices.Clone(evs)
		slices.Reverse(reversed)
		var wg sync.WaitGroup
		for r, order := range [][]chain.NewEvent{evs, reversed} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dups, err := replicas[r].RecordEvents(t.Context(), order)
				if err != nil {
					t.Errorf("round %d, replica %d: %v", round, r, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i, dup := range dups {
					if !dup {
						fresh[order[i].Key]++
					}
				}
			}()
		}
		wg.Wait()
	}
	if len(fresh) != rounds*batch {
		t.Errorf("%d deliveries recorded, want %d", len(fresh), rounds*batch)
	}
	for k, n := range fresh {
		if n != 1 {
			t.Errorf("delivery %s recorded %d times", k, n)
		}
	}
}
