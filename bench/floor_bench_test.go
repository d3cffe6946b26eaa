package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// BenchmarkStorageFloor measures what the store alone costs on the paths
// of goals 1 and 3, one call at a time with nothing else running:
// recording one webhook event, which is what an acknowledgement waits for,
// and that followed by one write transaction that queues an action, which
// is the store's part of success → trigger (the recording, then the
// inbox's commit). The webhook-ack and success → trigger figures, set
// against these, show what concurrency, the engine and HTTP add. On
// PostgreSQL both are durable commits (fsync on).
//
// The calls come at two paces: 5 ms apart (2,000 calls), and 100 ms apart
// (200 calls), the pace of BenchmarkSuccessToTrigger's rounds: after
// 100 ms with nothing to do, this machine takes longer to wake each
// process a call goes through.
func BenchmarkStorageFloor(b *testing.B) { atFloorPaces(b, storageFloor) }

// atFloorPaces runs measure as a sub-benchmark per pace of the floor
// benchmarks: 2,000 calls 5 ms apart, and 200 calls 100 ms apart.
func atFloorPaces(b *testing.B, measure func(b *testing.B, calls int, gap time.Duration)) {
	for _, pace := range []struct {
		name  string
		calls int
		gap   time.Duration
	}{{"5ms", 2000, 5 * time.Millisecond}, {"100ms", 200, 100 * time.Millisecond}} {
		b.Run("apart="+pace.name, func(b *testing.B) {
			for b.Loop() {
				measure(b, pace.calls, pace.gap)
			}
		})
	}
}

func storageFloor(b *testing.B, calls int, gap time.Duration) {
	b.StopTimer()
	s, err := store.Open(b.Context(), benchState(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := b.Context()
	var record, both []time.Duration
	b.StartTimer()
	for i := range calls {
		ev := chain.NewEvent{Key: fmt.Sprintf("floor-%d", i), Event: chain.Event{Pipeline: &chain.PipelineEvent{
			ProjectID: 5, Project: "g/base", PipelineID: int64(i + 1), Status: "success", Ref: "main",
			SHA: "0123456789abcdef0123456789abcdef01234567", Source: "push"}}}
		t0 := time.Now()
		if _, err := s.RecordEvents(ctx, []chain.NewEvent{ev}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			return tx.AddAction(ctx, chain.Action{ID: fmt.Sprintf("floor-%d", i), ChainID: 1, Project: "g/app",
				ProjectID: 7, Ref: "main", State: chain.ActionPending, NextAttemptAt: t0, CreatedAt: t0})
		})
		if err != nil {
			b.Fatal(err)
		}
		record, both = append(record, t1.Sub(t0)), append(both, time.Since(t0))
		time.Sleep(gap)
	}
	b.StopTimer()
	slices.Sort(record)
	slices.Sort(both)
	b.ReportMetric(ms(percentile(record, 0.50)), "record-p50-ms")
	b.ReportMetric(ms(percentile(record, 0.99)), "record-p99-ms")
	b.ReportMetric(ms(percentile(both, 0.50)), "record+write-p50-ms")
	b.ReportMetric(ms(percentile(both, 0.99)), "record+write-p99-ms")
	b.Logf("storage floor (%s store, one call every %v): recording an event p50 %.2f ms, p99 %.2f ms, max %.1f ms; "+
		"recording and one write transaction p50 %.2f ms, p99 %.2f ms, max %.1f ms", storeKind(), gap,
		ms(percentile(record, 0.50)), ms(percentile(record, 0.99)), ms(record[len(record)-1]),
		ms(percentile(both, 0.50)), ms(percentile(both, 0.99)), ms(both[len(both)-1]))
	b.StartTimer()
}

// BenchmarkDiskFlushFloor measures what a durable PostgreSQL commit
// cannot be faster than on this machine's disk: one 8 KiB page (a WAL
// page) written into a preallocated 16 MiB file (a WAL segment) beside the
// store's files, and fdatasync, one at a time at the paces of
// BenchmarkStorageFloor. SQLite at depsd's settings (synchronous=NORMAL in
// WAL mode) does not flush at a commit, only in its checkpoints and when
// its WAL starts over, so this is the floor under the PostgreSQL figures
// alone.
func BenchmarkDiskFlushFloor(b *testing.B) { atFloorPaces(b, diskFlushFloor) }

func diskFlushFloor(b *testing.B, calls int, gap time.Duration) {
	b.StopTimer()
	const page, segment = 8 << 10, 16 << 20
	f, err := os.Create(filepath.Join(b.TempDir(), "segment"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, segment)); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, page)
	var flush []time.Duration
	b.StartTimer()
	for i := range calls {
		buf[0] = byte(i)
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%(segment/page))*page); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		flush = append(flush, time.Since(t0))
		time.Sleep(gap)
	}
	b.StopTimer()
	slices.Sort(flush)
	b.ReportMetric(ms(percentile(flush, 0.50)), "flush-p50-ms")
	b.ReportMetric(ms(percentile(flush, 0.99)), "flush-p99-ms")
	b.Logf("disk flush floor (one 8 KiB page and fdatasync every %v): p50 %.2f ms, p99 %.2f ms, max %.1f ms",
		gap, ms(percentile(flush, 0.50)), ms(percentile(flush, 0.99)), ms(flush[len(flush)-1]))
	b.StartTimer()
}
