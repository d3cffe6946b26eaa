package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store/pgtest"
)

// BenchmarkRecordEvents records batches of new pipeline events in the
// inbox: the cost of one group commit of the webhook recorder, per batch
// size, on an inbox already holding 10,000 events.
func BenchmarkRecordEvents(b *testing.B) {
	for _, size := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch-%d", size), func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "depsd.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ev := chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/p", ProjectID: 7, PipelineID: 9, Status: "running", Ref: "main"}}
			n := 0
			batch := func(k int) []chain.NewEvent {
				evs := make([]chain.NewEvent, k)
				for i := range evs {
					n++
					evs[i] = chain.NewEvent{Key: fmt.Sprintf("key-%d", n), Event: ev}
				}
				return evs
			}
			for range 100 {
				if _, err := s.RecordEvents(b.Context(), batch(100)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.RecordEvents(b.Context(), batch(size)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecordAndApply is the Recorder's quiet path on PostgreSQL
// (skipped without one): one write transaction that reads the active
// chains, records a pipeline event, looks its pipeline up and marks it
// processed, with the recording announced (chain.RecordingFirst: it goes
// with the BEGIN) or not. The tests' server runs with fsync off, so this
// is the round trips and the statements, not the WAL flush.
func BenchmarkRecordAndApply(b *testing.B) {
	if os.Getenv("DEPSD_TEST_STORE") != "postgres" {
		b.Skip("PostgreSQL only: set DEPSD_TEST_STORE=postgres")
	}
	for _, announced := range []bool{false, true} {
		b.Run(fmt.Sprintf("announced-%v", announced), func(b *testing.B) {
			ctx := b.Context()
			s, err := Open(ctx, pgtest.Database(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			n := 0
			for b.Loop() {
				n++
				ev := chain.Event{Pipeline: &chain.PipelineEvent{Project: "g/base", PipelineID: int64(n), Status: "running"}}
				evs := []chain.NewEvent{{Key: fmt.Sprintf("k-%d", n), Event: ev}}
				if err := s.UpdateChains(announcedIf(ctx, announced, evs), func(tx chain.Tx) error { return recordThenApply(ctx, tx, evs) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
