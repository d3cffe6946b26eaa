package store

import (
	"fmt"
	"path/filepath"
	"testing"

	"gitlab.com/depsd/depsd/chain"
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
