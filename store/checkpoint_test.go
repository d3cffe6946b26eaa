package store

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// TestCheckpointerBoundsTheWAL: under a steady stream of commits, which a
// checkpoint outside the write lock never catches up with, the WAL file
// stays small, because the checkpointer lets SQLite start it over; SQLite's
// own checkpoint on commit (the backstop) would not run before 20,000
// pages. Every event stays readable.
func TestCheckpointerBoundsTheWAL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "depsd.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The same checkpointer, scaled down: a pass every millisecond, the
	// WAL started over from 64 frames.
	s.ckpt.stop()
	s.ckpt = startCheckpointer(s.db, s.gate, time.Millisecond, 64)

	const commits = 1500
	for i := range commits {
		ev := chain.PipelineEvent{Project: "g/p", ProjectID: 1, PipelineID: int64(i), Status: "running", Ref: "main"}
		if _, err := s.RecordEvents(t.Context(), []chain.NewEvent{{Key: fmt.Sprintf("k%d", i), Event: chain.Event{Pipeline: &ev}}}); err != nil {
			t.Fatal(err)
		}
	}
	if s.ckpt.passes.Load() == 0 {
		t.Fatal("the checkpointer never ran")
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// Each commit adds about five 4 KiB frames: some 30 MB without
	// restarts. With them the WAL grows only by what is committed while
	// a pass (and its fsyncs) runs.
	if fi.Size() > 16<<20 {
		t.Errorf("WAL is %d bytes after %d commits, want it started over (under 16 MB)", fi.Size(), commits)
	}
	err = s.ViewChains(t.Context(), func(tx chain.Tx) error {
		n, err := tx.CountEvents(t.Context())
		if err == nil && n != commits {
			t.Errorf("%d events readable, want %d", n, commits)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
