package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// SQLite in WAL mode appends every commit to the -wal file and copies the
// pages back into the database file in a checkpoint. By default the commit
// that takes the WAL past 1,000 pages runs that checkpoint itself, while it
// still holds the write lock: it writes the pages back and waits for two
// fsyncs (tens of milliseconds on this project's machines), and every writer
// queued behind it, a webhook's acknowledgement included, waits too.
//
// The checkpointer moves that work off the write path. After writes, it
// runs a PASSIVE checkpoint on its own connection, which copies what is
// committed without taking the write lock (writers go on appending). Such a
// checkpoint never catches the frames committed while it runs, and SQLite
// starts the WAL over only when every frame was copied, so under steady
// writes the WAL would grow without end: once it holds ckptRestartFrames
// frames, the checkpointer runs one more PASSIVE checkpoint inside the write
// gate (after the urgent writers, like any other writer), which has only the
// few frames since its previous pass to copy, and the next writer starts the
// WAL from its beginning. SQLite's own checkpoint on commit stays on as a
// backstop (sqliteDSN), at a size this one does not reach while it runs.
//
// A WAL that was copied whole is started over by the next write, which
// first writes a new WAL header and, at synchronous=NORMAL, waits for its
// fsync (about a millisecond here). Left to chance, that writer is most
// often a webhook's recording, the first write after a quiet moment. So
// after a pass that copied everything, the checkpointer makes the smallest
// write there is itself (it sets the file's application id, the same value
// every time), as an urgent writer in the gate, and pays the fsync before
// the next recording arrives.
//
// Durability is unchanged: a commit is in the WAL (in the operating
// system's hands, so it survives a crash of the process) before the writer
// returns, whoever copies it later.
type checkpointer struct {
	db   *sql.DB // for the passes
	wdb  *sql.DB // the store's writer, for startOver
	gate *writeGate
	// every is the least time between two passes: the commits of that
	// time are copied together.
	every time.Duration
	// restartFrames is the WAL size, in frames, at which a pass inside the
	// gate lets the WAL start over.
	restartFrames int
	kick          chan struct{}
	cancel        context.CancelFunc
	done          sync.WaitGroup
	// passes counts completed passes, startOvers the writes that started
	// the WAL over (tests read them).
	passes, startOvers atomic.Int64
}

const (
	// ckptEvery paces the passes: at 1,000 commits a second a pass copies
	// some hundreds of frames.
	ckptEvery = 100 * time.Millisecond
	// ckptRestartFrames is about 32 MB of 4 KiB pages: the pass inside the
	// gate, a stall of a few milliseconds for the writers, comes once in
	// some seconds at 1,000 webhooks a second.
	ckptRestartFrames = 8000
	// ckptBackstopPages is SQLite's own wal_autocheckpoint: it checkpoints
	// on commit only if the checkpointer fell this far behind.
	ckptBackstopPages = 20000
)

// startCheckpointer starts the checkpointer's goroutine, which stop ends:
// a pass at most every so often, and one inside the gate once the WAL
// holds restartFrames frames.
func startCheckpointer(db, wdb *sql.DB, gate *writeGate, every time.Duration, restartFrames int) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, wdb: wdb, gate: gate, every: every, restartFrames: restartFrames,
		kick: make(chan struct{}, 1), cancel: cancel}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		c.run(ctx)
	}()
	return c
}

// wrote tells the checkpointer that a write committed. It never blocks.
func (c *checkpointer) wrote() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// stop ends the goroutine and waits for it, before the database closes.
func (c *checkpointer) stop() {
	c.cancel()
	c.done.Wait()
}

func (c *checkpointer) run(ctx context.Context) {
	timer := time.NewTimer(c.every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		// Let the commits of a moment gather, so one pass (and its
		// fsyncs) copies them all.
		timer.Reset(c.every)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		frames, copied, err := c.pass(ctx)
		switch {
		case err != nil:
		case frames >= c.restartFrames:
			if c.gate.acquire(ctx, false) == nil {
				if frames, copied, err := c.pass(ctx); err == nil && copied == frames {
					_ = c.startOver(ctx)
				}
				c.gate.release()
			}
		case frames > 0 && copied == frames:
			if c.gate.acquire(ctx, true) == nil {
				_ = c.startOver(ctx)
				c.gate.release()
			}
		}
		// An error (the database is gone, ctx ended) is not the
		// writers' concern: the next write retries, and SQLite's own
		// checkpoint is the backstop.
		c.passes.Add(1)
	}
}

// pass runs a PASSIVE checkpoint and returns the WAL's size in frames
// before it and how many of them are now in the database.
func (c *checkpointer) pass(ctx context.Context) (frames, copied int, err error) {
	var busy int
	err = c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	return frames, copied, err
}

// applicationID marks the file as depsd's (SQLite's application_id,
// "deps"); startOver writes it because a write must add a frame.
const applicationID = 0x64657073

// startOver makes one small write, which starts a fully copied WAL over
// (or, if a reader still uses the WAL, appends one frame to it). The
// caller holds the write gate.
func (c *checkpointer) startOver(ctx context.Context) error {
	_, err := c.wdb.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID))
	if err == nil {
		c.startOvers.Add(1)
	}
	return err
}
