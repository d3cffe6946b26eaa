package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// RecordEvents adds webhook events to the inbox in one transaction (the
// daemon's group commit), in the order given, so the handlers can
// acknowledge the deliveries once it returns. Each Key is a delivery's
// Idempotency-Key: if an event with that key is still kept (processed
// events are pruned after a week), or an earlier event of the same batch
// has it, its duplicate flag is true and nothing is written for it. An
// empty key (a GitLab too old to send one) is replaced by a random one:
// such deliveries cannot be deduplicated. On error nothing is recorded.
func (s *Store) RecordEvents(ctx context.Context, evs []chain.NewEvent) (duplicate []bool, err error) {
	duplicate = make([]bool, len(evs))
	if len(evs) == 0 {
		return duplicate, nil
	}
	keys := make([]string, len(evs))
	payloads := make([]string, len(evs))
	for i, ne := range evs {
		keys[i] = ne.Key
		if keys[i] == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			keys[i] = "nokey-" + hex.EncodeToString(b[:])
		}
		payload, err := json.Marshal(ne.Event)
		if err != nil {
			return nil, fmt.Errorf("record event %s: %w", keys[i], err)
		}
		payloads[i] = string(payload)
	}
	// A webhook's request context ends when GitLab hangs up; once the
	// transaction has begun, its statements run to the end.
	stmtCtx := context.WithoutCancel(ctx)
	now := encodeTime(time.Now())
	if s.dialect.kind == KindPostgres {
		if err := s.recordEventsPostgres(ctx, keys, evs, payloads, now, duplicate); err != nil {
			return nil, fmt.Errorf("record %d events (first key %s): %w", len(evs), keys[0], err)
		}
		return duplicate, nil
	}
	// Recordings go before other writers of this process (gate.go).
	err = s.write(withUrgentWrites(ctx), func(sqlTx *sql.Tx) error {
		tx := cachedTx{Tx: sqlTx, cache: s.stmts}
		for i := range evs {
			// One cached statement per event: the next seq, and nothing
			// written if the key is kept already (from an earlier batch or
			// this one).
			res, err := tx.ExecContext(stmtCtx, `INSERT INTO events (seq, key, kind, payload, received_at, result)
				VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM events), $1, $2, $3, $4, '')
				ON CONFLICT (key) DO NOTHING`, keys[i], evs[i].Event.Kind(), payloads[i], now)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			duplicate[i] = n == 0
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record %d events (first key %s): %w", len(evs), keys[0], err)
	}
	return duplicate, nil
}

// recordEventsPostgres writes a batch without the write lock, in one
// statement (one round trip, atomic without a transaction of its own): the
// seqs come from a sequence and the unique key dedupes (a concurrent insert
// of the same key waits for the other and then does nothing), so webhooks
// are acknowledged while the engine holds the lock. The rows go in in key
// order: two replicas inserting overlapping keys then wait for each other
// in the same order and cannot deadlock (PostgreSQL would abort one, and its
// webhooks would get a 503); the seqs still follow the batch's order. Seqs
// may commit out of order: events are applied in seq order of those
// committed, and a status never moves a member backwards. It fills in
// duplicate.
func (s *Store) recordEventsPostgres(ctx context.Context, keys []string, evs []chain.NewEvent, payloads []string,
	now any, duplicate []bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Bounded well inside GitLab's 10 s webhook timeout, so that an
	// unreachable database is answered 503 rather than a timeout.
	stmtCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	first := make(map[string]int, len(evs))
	var rowKeys, kinds, rowPayloads []string
	for i := range evs {
		if _, ok := first[keys[i]]; ok {
			duplicate[i] = true
			continue
		}
		first[keys[i]] = i
		rowKeys = append(rowKeys, keys[i])
		kinds = append(kinds, evs[i].Event.Kind())
		rowPayloads = append(rowPayloads, payloads[i])
	}
	// The seqs follow the batch's order (nextval after the sort, as
	// PostgreSQL evaluates a volatile select list), the inserts (and the
	// waits on a concurrent insert of the same key) the keys' order.
	rows, err := s.db.QueryContext(stmtCtx, `WITH batch AS (
			SELECT k, kind, payload, n FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS r(k, kind, payload, n)
		), seqs AS MATERIALIZED (
			SELECT n, nextval('events_seq') AS seq FROM (SELECT n FROM batch ORDER BY n) o
		)
		INSERT INTO events (seq, key, kind, payload, received_at, result)
		SELECT seqs.seq, batch.k, batch.kind, batch.payload, $4::text, '' FROM batch JOIN seqs USING (n)
		ORDER BY batch.k COLLATE "C"
		ON CONFLICT (key) DO NOTHING RETURNING key`, rowKeys, kinds, rowPayloads, now)
	if err != nil {
		return err
	}
	inserted := make(map[string]bool, len(rowKeys))
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return err
		}
		inserted[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for k, i := range first {
		duplicate[i] = !inserted[k]
	}
	return nil
}

// eventPrefetch is how many unprocessed events NextEvent reads at once in
// a write transaction: the inbox applies several events per transaction,
// and on PostgreSQL each read is a round trip (and a walk over the index
// entries of events processed since the last vacuum), all under the write
// lock.
const eventPrefetch = 16

// NextEvent returns the oldest unprocessed event. In a write transaction
// it reads the next few at once and answers from them until MarkEvent has
// taken them all: the write lock keeps every other writer from marking
// them meanwhile. Events recorded after the read are found once those are
// used up, unless the read found the inbox drained (on PostgreSQL seqs may
// commit out of order: events are applied in seq order of those committed,
// see recordEventsPostgres).
func (t chainTx) NextEvent(ctx context.Context) (chain.StoredEvent, bool, error) {
	if t.cc == nil {
		evs, err := t.readEvents(ctx, 1)
		if err != nil || len(evs) == 0 {
			return chain.StoredEvent{}, false, err
		}
		return evs[0], true, nil
	}
	if len(t.cc.events) == 0 {
		if t.cc.eventsDrained {
			return chain.StoredEvent{}, false, nil
		}
		evs, err := t.readEvents(ctx, eventPrefetch)
		if err != nil || len(evs) == 0 {
			return chain.StoredEvent{}, false, err
		}
		t.cc.events = evs
		// Fewer than asked for: the inbox held no more when read. Events
		// recorded since (on PostgreSQL, recordings do not wait for the
		// write lock) are the next transaction's, which their recording
		// wakes: asking again would cost this one a round trip before its
		// commit, on the path from a webhook to its pipelines.
		t.cc.eventsDrained = len(evs) < eventPrefetch
	}
	return t.cc.events[0], true, nil
}

// readEvents reads the oldest n unprocessed events.
func (t chainTx) readEvents(ctx context.Context, n int) ([]chain.StoredEvent, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT seq, key, payload, received_at FROM events
		WHERE processed_at IS NULL ORDER BY seq LIMIT $1`, n)
	if err != nil {
		return nil, fmt.Errorf("read next events: %w", err)
	}
	defer rows.Close()
	var evs []chain.StoredEvent
	for rows.Next() {
		var se chain.StoredEvent
		var payload string
		var received sql.NullString
		if err := rows.Scan(&se.Seq, &se.Key, &payload, &received); err != nil {
			return nil, fmt.Errorf("read next events: %w", err)
		}
		if err := json.Unmarshal([]byte(payload), &se.Event); err != nil {
			// A payload this depsd cannot read is returned empty: the
			// engine marks it processed instead of stalling the inbox
			// behind it.
			se.Event = chain.Event{}
		}
		if se.ReceivedAt, err = decodeTime(received); err != nil {
			return nil, fmt.Errorf("event %d: %w", se.Seq, err)
		}
		evs = append(evs, se)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read next events: %w", err)
	}
	return evs, nil
}

// MarkEvent records that an event was processed, unless it already was.
func (t chainTx) MarkEvent(ctx context.Context, seq int64, at time.Time, result string) error {
	err := t.tx.execLater(ctx, `UPDATE events SET processed_at = $1, result = $2
		WHERE seq = $3 AND processed_at IS NULL`, encodeTime(at), result, seq)
	if err != nil {
		return fmt.Errorf("mark event %d processed: %w", seq, err)
	}
	if t.cc != nil {
		t.cc.events = slices.DeleteFunc(t.cc.events, func(se chain.StoredEvent) bool { return se.Seq == seq })
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
