package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// verifyChannel is the PostgreSQL notification channel of the
// verification queue: a transaction that queues a verification notifies
// it, and PostgreSQL delivers the notification when that transaction
// commits (never if it rolls back).
const verifyChannel = "depsd_verify"

// WatchVerifyQueue calls wake once it listens, and again each time a
// transaction of any process sharing the store that queued a verification
// commits (PostgreSQL's LISTEN/NOTIFY): the leader, which alone verifies,
// then starts on a success another replica applied at once instead of at
// its next look at the queue. It holds one connection of the pool while it
// runs. It returns nil when ctx ends, and an error when the connection
// fails (the caller listens again; the queue is still polled meanwhile).
// On SQLite it returns nil at once: the one process's own transactions
// wake its verifier.
func (s *Store) WatchVerifyQueue(ctx context.Context, wake func()) error {
	if s.dialect.kind != KindPostgres {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listen for queued verifications: %w", err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(lockingConn)
		if !ok {
			return fmt.Errorf("listening needs pgx's connection, not %T", dc)
		}
		pc := c.pgxConn()
		// The connection listens until it is closed: it never goes back
		// to the pool (driver.ErrBadConn), where its notifications would
		// pile up unread.
		if _, err := pc.Exec(ctx, "LISTEN "+verifyChannel); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		wake() // what was queued before
		for {
			if _, err := pc.WaitForNotification(ctx); err != nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			wake()
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("listen for queued verifications: %w", err)
}
