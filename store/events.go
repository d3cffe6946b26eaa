package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// RecordEvent adds a webhook event to the inbox in its own transaction, so
// the handler can acknowledge the delivery once it returns. key is the
// delivery's Idempotency-Key: if an event with that key is still kept
// (processed events are pruned after a week), duplicate is true and nothing
// is written. An empty key (a GitLab too old to send one) is replaced by a
// random one: such deliveries cannot be deduplicated.
func (s *Store) RecordEvent(ctx context.Context, key string, ev chain.Event) (duplicate bool, err error) {
	if key == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		key = "nokey-" + hex.EncodeToString(b[:])
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("record event %s: %w", key, err)
	}
	// A webhook's request context ends when GitLab hangs up; once the
	// transaction has begun, its statements run to the end.
	stmtCtx := context.WithoutCancel(ctx)
	if s.dialect.kind == KindPostgres {
		// One statement, no write lock: the seq comes from a sequence and
		// the unique key dedupes (a concurrent insert of the same key
		// waits for the other and then does nothing). Webhooks are then
		// acknowledged while the engine holds the lock. Seqs may commit
		// out of order; events are applied in seq order of those
		// committed, and a status never moves a member backwards.
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("record event %s: %w", key, err)
		}
		// Bounded well inside GitLab's 10 s webhook timeout, so that an
		// unreachable database is answered 503 rather than a timeout.
		stmtCtx, cancel := context.WithTimeout(stmtCtx, 5*time.Second)
		defer cancel()
		res, err := s.db.ExecContext(stmtCtx, `INSERT INTO events (seq, key, kind, payload, received_at, result)
			VALUES (nextval('events_seq'), $1, $2, $3, $4, '') ON CONFLICT (key) DO NOTHING`,
			key, ev.Kind(), string(payload), encodeTime(time.Now()))
		if err != nil {
			return false, fmt.Errorf("record event %s: %w", key, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return false, fmt.Errorf("record event %s: %w", key, err)
		}
		return n == 0, nil
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(stmtCtx, `SELECT COUNT(*) FROM events WHERE key = $1`, key).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			duplicate = true
			return nil
		}
		_, err := tx.ExecContext(stmtCtx, `INSERT INTO events (seq, key, kind, payload, received_at, result)
			VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM events), $1, $2, $3, $4, '')`,
			key, ev.Kind(), string(payload), encodeTime(time.Now()))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record event %s: %w", key, err)
	}
	return duplicate, nil
}

// NextEvent returns the oldest unprocessed event.
func (t chainTx) NextEvent(ctx context.Context) (chain.StoredEvent, bool, error) {
	var se chain.StoredEvent
	var payload string
	var received sql.NullString
	err := t.tx.QueryRowContext(ctx, `SELECT seq, key, payload, received_at FROM events
		WHERE processed_at IS NULL ORDER BY seq LIMIT 1`).Scan(&se.Seq, &se.Key, &payload, &received)
	if errIsNotFound(err) {
		return chain.StoredEvent{}, false, nil
	}
	if err != nil {
		return chain.StoredEvent{}, false, fmt.Errorf("read next event: %w", err)
	}
	if err := json.Unmarshal([]byte(payload), &se.Event); err != nil {
		// A payload this depsd cannot read is returned empty: the engine
		// marks it processed instead of stalling the inbox behind it.
		se.Event = chain.Event{}
	}
	if se.ReceivedAt, err = decodeTime(received); err != nil {
		return chain.StoredEvent{}, false, fmt.Errorf("event %d: %w", se.Seq, err)
	}
	return se, true, nil
}

// MarkEvent records that an event was processed, unless it already was.
func (t chainTx) MarkEvent(ctx context.Context, seq int64, at time.Time, result string) error {
	_, err := t.tx.ExecContext(ctx, `UPDATE events SET processed_at = $1, result = $2
		WHERE seq = $3 AND processed_at IS NULL`, encodeTime(at), result, seq)
	if err != nil {
		return fmt.Errorf("mark event %d processed: %w", seq, err)
	}
	return nil
}

// PruneEvents deletes processed events received before before.
func (t chainTx) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM events WHERE processed_at IS NOT NULL AND received_at < $1`,
		encodeTime(before))
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// CountEvents counts the unprocessed events.
func (t chainTx) CountEvents(ctx context.Context) (int, error) {
	var n int
	if err := t.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM events WHERE processed_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}
