package store

import (
	"encoding/binary"
	"fmt"
	"io"
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
	// The same checkpointer, scaled down: a pass every millisecond, the
	// WAL started over from 64 frames.
	s, path := openWithCheckpointer(t, time.Millisecond, 64)

	const commits = 3000
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
	// Each commit adds about five 4 KiB frames: some 60 MB without
	// restarts. With them the WAL grows only by what is committed while
	// a pass (and its fsyncs) runs: a few MB, 17 MB once and 33 MB once on
	// a machine loaded by other test runs, so the bound is half of what
	// no restart gives, and the restarts are counted too.
	if n := s.ckpt.startOvers.Load(); n == 0 {
		t.Errorf("the WAL was never started over in %d commits", commits)
	}
	if fi.Size() > 40<<20 {
		t.Errorf("WAL is %d bytes after %d commits, want it started over (under 40 MB)", fi.Size(), commits)
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

// TestCheckpointerStartsTheWALOver: after a pass that copied the whole
// WAL, the checkpointer starts the WAL over with a write of its own, so
// the next webhook recording appends to the new WAL instead of starting
// it over itself (and waiting for the fsync of its header). The WAL
// header's checkpoint sequence number counts the starts.
func TestCheckpointerStartsTheWALOver(t *testing.T) {
	t.Parallel()
	// Passes 500 ms apart: the check right after the recording must not
	// race the pass that recording asks for.
	s, path := openWithCheckpointer(t, 500*time.Millisecond, 1<<20)
	record := func(key string) {
		t.Helper()
		ev := chain.PipelineEvent{Project: "g/p", ProjectID: 1, PipelineID: 1, Status: "running", Ref: "main"}
		if _, err := s.RecordEvents(t.Context(), []chain.NewEvent{{Key: key, Event: chain.Event{Pipeline: &ev}}}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		before := s.ckpt.startOvers.Load()
		record(fmt.Sprintf("a%d", round))
		deadline := time.Now().Add(10 * time.Second)
		for s.ckpt.startOvers.Load() == before {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the checkpointer did not start the WAL over after its pass", round)
			}
			time.Sleep(time.Millisecond)
		}
		started := walCheckpointSeq(t, path)
		// Right after (well before the next pass), a recording appends.
		record(fmt.Sprintf("b%d", round))
		if got := walCheckpointSeq(t, path); got != started {
			t.Fatalf("round %d: the recording started the WAL over (checkpoint sequence %d, want %d)", round, got, started)
		}
	}
	var id int
	if err := s.db.QueryRowContext(t.Context(), "PRAGMA application_id").Scan(&id); err != nil || id != applicationID {
		t.Errorf("application_id = %#x (%v), want %#x", id, err, applicationID)
	}
}

// walCheckpointSeq reads the checkpoint sequence number from the WAL
// file's header (bytes 12-15, big-endian): SQLite increments it each time
// a write starts the WAL over.
func walCheckpointSeq(t *testing.T, dbPath string) uint32 {
	t.Helper()
	f, err := os.Open(dbPath + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [16]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(hdr[12:16])
}

// openWithCheckpointer opens a store in a temporary file whose
// checkpointer passes every so often and restarts from restartFrames.
func openWithCheckpointer(t *testing.T, every time.Duration, restartFrames int) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "depsd.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.ckpt.stop()
	s.ckpt = startCheckpointer(s.db, s.wdb, s.gate, every, restartFrames)
	return s, path
}
