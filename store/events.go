package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	rec, err := newRecording(evs)
	if err != nil || len(evs) == 0 {
		return rec.duplicate, err
	}
	if s.dialect.kind == KindPostgres {
		// Bounded well inside GitLab's 10 s webhook timeout, so that an
		// unreachable database is answered 503 rather than a timeout.
		stmtCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := ctx.Err(); err != nil {
			return nil, rec.wrap(err)
		}
		if err := rec.insertPostgres(stmtCtx, s.db); err != nil {
			return nil, rec.wrap(err)
		}
		return rec.duplicate, nil
	}
	// Recordings go before other writers of this process (gate.go).
	err = s.write(withUrgentWrites(ctx), func(sqlTx *sql.Tx) error {
		// A webhook's request context ends when GitLab hangs up; once
		// the transaction has begun, its statements run to the end.
		_, err := rec.insertSQLite(context.WithoutCancel(ctx), cachedTx{Tx: sqlTx, cache: s.stmts})
		return err
	})
	if err != nil {
		return nil, rec.wrap(err)
	}
	return rec.duplicate, nil
}

// RecordEvents implements chain.Tx: Store.RecordEvents inside this write
// transaction, so that the events can be applied before the same commit.
func (t chainTx) RecordEvents(ctx context.Context, evs []chain.NewEvent) (duplicate []bool, err error) {
	if t.cc != nil {
		a := t.cc.recorded
		t.cc.recorded = nil
		if dups, ok := a.take(evs, t.cc); ok {
			return dups, nil
		}
	}
	rec, err := newRecording(evs)
	if err != nil || len(evs) == 0 {
		return rec.duplicate, err
	}
	// Only UpdateChains's transactions can write, and theirs have a pipe
	// exactly on PostgreSQL.
	if err := t.flushMarks(ctx); err != nil {
		return nil, err
	}
	readAhead := t.cc != nil && len(t.cc.events) == 0 && !t.cc.eventsDrained
	switch {
	case t.tx.pipe != nil && readAhead:
		// PostgreSQL, where the events are read by the same round trip
		// (NextEvent answers from them).
		t.cc.events, t.cc.eventsDrained, err = rec.insertPostgresReadingAhead(ctx, t.tx, eventPrefetch)
	case t.tx.pipe != nil:
		err = rec.insertPostgres(ctx, t.tx)
	case readAhead:
		// SQLite: the older events are read first, and the ones
		// recorded here are known without reading them back.
		t.cc.events, t.cc.eventsDrained, err = rec.insertSQLiteReadingAhead(ctx, t, eventPrefetch)
	default:
		_, err = rec.insertSQLite(ctx, t.tx)
	}
	if err != nil {
		return nil, rec.wrap(err)
	}
	return rec.duplicate, nil
}

// recording is one batch of events as written: keys (an empty one
// replaced by a random one) and payloads, and each event's duplicate flag
// once written.
type recording struct {
	evs      []chain.NewEvent
	keys     []string
	payloads []string
	// now is received_at as written, at as read back.
	now       any
	at        time.Time
	duplicate []bool
}

func newRecording(evs []chain.NewEvent) (recording, error) {
	at := time.Now().UTC().Round(0) // no monotonic reading: as read back
	r := recording{evs: evs, keys: make([]string, len(evs)), payloads: make([]string, len(evs)),
		now: encodeTime(at), at: at, duplicate: make([]bool, len(evs))}
	for i, ne := range evs {
		r.keys[i] = ne.Key
		if r.keys[i] == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			r.keys[i] = "nokey-" + hex.EncodeToString(b[:])
		}
		payload, err := json.Marshal(ne.Event)
		if err != nil {
			return recording{}, fmt.Errorf("record event %s: %w", r.keys[i], err)
		}
		r.payloads[i] = string(payload)
	}
	return r, nil
}

func (r recording) wrap(err error) error {
	return fmt.Errorf("record %d events (first key %s): %w", len(r.evs), r.keys[0], err)
}

// insertSQLite writes the batch in tx, which holds the write lock: one
// cached statement per event, the next seq, and nothing written if the key
// is kept already (from an earlier batch or this one). It returns each
// event's seq, 0 for a duplicate.
func (r recording) insertSQLite(ctx context.Context, tx cachedTx) ([]int64, error) {
	seqs := make([]int64, len(r.evs))
	for i := range r.evs {
		err := tx.QueryRowContext(ctx, `INSERT INTO events (seq, key, kind, payload, received_at, result)
			VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM events), $1, $2, $3, $4, '')
			ON CONFLICT (key) DO NOTHING RETURNING seq`, r.keys[i], r.evs[i].Event.Kind(), r.payloads[i], r.now).Scan(&seqs[i])
		r.duplicate[i] = errIsNotFound(err)
		if err != nil && !r.duplicate[i] {
			return nil, err
		}
	}
	return seqs, nil
}

// given is event i of the batch, written at seq, as NextEvent would read
// it back: the engine takes it without the read and the decoding.
func (r recording) given(i int, seq int64) aheadEvent {
	return aheadEvent{se: chain.StoredEvent{Seq: seq, Key: r.keys[i], Event: asRead(r.evs[i].Event), ReceivedAt: r.at}}
}

// asRead is ev as read back from its payload, as far as the engine can
// tell: its own copy, its times without a monotonic clock reading.
func asRead(ev chain.Event) chain.Event {
	if p := ev.Pipeline; p != nil {
		c := *p
		c.At = c.At.Round(0)
		c.Variables = maps.Clone(c.Variables)
		if c.MergeRequest != nil {
			mr := *c.MergeRequest
			c.MergeRequest = &mr
		}
		ev.Pipeline = &c
	}
	if p := ev.Push; p != nil {
		c := *p
		c.At = c.At.Round(0)
		c.Changed = slices.Clone(c.Changed)
		ev.Push = &c
	}
	return ev
}

// insertSQLiteReadingAhead is insertSQLite in a write transaction that
// will apply the events (Recorder, applyNow): it first reads the
// unprocessed events recorded before (up to n), and returns them followed
// by those it wrote, which it need not read back, and whether the older
// ones were all read.
func (r recording) insertSQLiteReadingAhead(ctx context.Context, t chainTx, n int) (ahead []aheadEvent, drained bool, err error) {
	older, err := t.readEvents(ctx, n)
	if err != nil {
		return nil, false, err
	}
	seqs, err := r.insertSQLite(ctx, t.tx)
	if err != nil || len(older) == n {
		return older, false, err
	}
	for i, seq := range seqs {
		if !r.duplicate[i] {
			older = append(older, r.given(i, seq))
		}
	}
	return older, true, nil
}

// querier is what insertPostgres runs its statement on: the pool, or a
// transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// insertPostgres writes the batch in one statement (one round trip, atomic
// without a transaction of its own). On the pool it needs no write lock:
// the seqs come from a sequence and the unique key dedupes (a concurrent
// insert of the same key waits for the other and then does nothing), so
// webhooks are acknowledged while the engine holds the lock. The rows go
// in in key order: two replicas inserting overlapping keys then wait for
// each other in the same order and cannot deadlock (PostgreSQL would abort
// one, and its webhooks would get a 503); the seqs still follow the
// batch's order. Seqs may commit out of order: events are applied in seq
// order of those committed, and a status never moves a member backwards.
func (r recording) insertPostgres(ctx context.Context, q querier) error {
	first, rowKeys, kinds, rowPayloads := r.rows()
	rows, err := q.QueryContext(ctx, insertEventsPostgres+` RETURNING key`, rowKeys, kinds, rowPayloads, r.now)
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
	r.markDuplicates(first, inserted)
	return nil
}

// insertEventsPostgres inserts a batch: the seqs follow the batch's order
// (nextval after the sort, as PostgreSQL evaluates a volatile select list),
// the inserts (and the waits on a concurrent insert of the same key) the
// keys' order.
const insertEventsPostgres = `WITH batch AS (
			SELECT k, kind, payload, n FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS r(k, kind, payload, n)
		), seqs AS MATERIALIZED (
			SELECT n, nextval('events_seq') AS seq FROM (SELECT n FROM batch ORDER BY n) o
		)
		INSERT INTO events (seq, key, kind, payload, received_at, result)
		SELECT seqs.seq, batch.k, batch.kind, batch.payload, $4::text, '' FROM batch JOIN seqs USING (n)
		ORDER BY batch.k COLLATE "C"
		ON CONFLICT (key) DO NOTHING`

// rows returns the batch's keys, kinds and payloads to insert: the
// first event of each key; the later ones are marked duplicates. first
// maps each key to its first event.
func (r recording) rows() (first map[string]int, keys, kinds, payloads []string) {
	first = make(map[string]int, len(r.evs))
	for i := range r.evs {
		if _, ok := first[r.keys[i]]; ok {
			r.duplicate[i] = true
			continue
		}
		first[r.keys[i]] = i
		keys = append(keys, r.keys[i])
		kinds = append(kinds, r.evs[i].Event.Kind())
		payloads = append(payloads, r.payloads[i])
	}
	return first, keys, kinds, payloads
}

// markDuplicates sets the duplicate flag of each first event whose key
// the insert did not write (it was kept already).
func (r recording) markDuplicates(first map[string]int, inserted map[string]bool) {
	for k, i := range first {
		r.duplicate[i] = !inserted[k]
	}
}

// insertPostgresReadingAhead is insertPostgres inside a write transaction
// that will apply the events (Recorder, applyNow): the same statement
// also reads the unprocessed events recorded before (up to n), so that
// the inserted ones and those come back in one round trip, in seq order.
// It returns them, and whether the older ones were all read.
func (r recording) insertPostgresReadingAhead(ctx context.Context, q querier, n int) (ahead []aheadEvent, drained bool, err error) {
	first, rowKeys, kinds, rowPayloads := r.rows()
	rows, err := q.QueryContext(ctx, insertReadingAheadPostgres, rowKeys, kinds, rowPayloads, r.now, n)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	return r.readAhead(rows, first, n)
}

// insertReadingAheadPostgres is insertPostgresReadingAhead's statement.
// Its snapshot does not hold its own inserts: the second part reads the
// older events only.
const insertReadingAheadPostgres = `WITH ins AS (` + insertEventsPostgres + ` RETURNING seq, key, received_at)
		SELECT seq, key, NULL, received_at, true FROM ins
		UNION ALL (SELECT seq, key, payload, received_at, false FROM events WHERE processed_at IS NULL ORDER BY seq LIMIT $5)`

// readAhead reads insertReadingAheadPostgres's rows: the events to apply,
// in order, and whether the older ones were all read (n or more: the
// inserted ones come after them, in a later read).
func (r recording) readAhead(rows rowScanner, first map[string]int, n int) (ahead []aheadEvent, drained bool, err error) {
	var older, mine []aheadEvent
	inserted := make(map[string]bool, len(first))
	err = scanEvents(rows, 5, func(a aheadEvent, isMine bool) {
		if isMine {
			// Its payload is not sent back: the event is the one given.
			inserted[a.se.Key] = true
			mine = append(mine, r.given(first[a.se.Key], a.se.Seq))
		} else {
			older = append(older, a)
		}
	})
	if err != nil {
		return nil, false, err
	}
	r.markDuplicates(first, inserted)
	if len(older) == n {
		return older, false, nil
	}
	slices.SortFunc(mine, func(a, b aheadEvent) int { return cmp.Compare(a.se.Seq, b.se.Seq) })
	return append(older, mine...), true, nil
}

// eventPrefetch is how many unprocessed events NextEvent reads at once in
// a write transaction: as many as the inbox applies in one
// (chain.maxInboxBatch), since on PostgreSQL each read is a round trip
// (and a walk over the index entries of events processed since the last
// vacuum), all under the write lock, and the marks kept are written before
// it. Their payloads are decoded as the engine takes them.
const eventPrefetch = 64

// NextEvent returns the oldest unprocessed event. In a write transaction
// it reads the next few at once and answers from them until MarkEvent has
// taken them all: the write lock keeps every other writer from marking
// them meanwhile. Events recorded after the read are found once those are
// used up, unless the read found the inbox drained (on PostgreSQL seqs may
// commit out of order: events are applied in seq order of those committed,
// see insertPostgres).
func (t chainTx) NextEvent(ctx context.Context) (chain.StoredEvent, bool, error) {
	if t.cc == nil {
		evs, err := t.readEvents(ctx, 1)
		if err != nil || len(evs) == 0 {
			return chain.StoredEvent{}, false, err
		}
		return evs[0].decoded(), true, nil
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
	head := &t.cc.events[0]
	if head.encoded {
		head.se, head.payload, head.encoded = head.decoded(), "", false
	}
	return head.se, true, nil
}

// readEvents reads the oldest n unprocessed events (the marks kept
// written first).
func (t chainTx) readEvents(ctx context.Context, n int) ([]aheadEvent, error) {
	if err := t.flushMarks(ctx); err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT seq, key, payload, received_at FROM events
		WHERE processed_at IS NULL ORDER BY seq LIMIT $1`, n)
	if err != nil {
		return nil, fmt.Errorf("read next events: %w", err)
	}
	defer rows.Close()
	var evs []aheadEvent
	err = scanEvents(rows, 4, func(a aheadEvent, _ bool) { evs = append(evs, a) })
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// aheadEvent is an unprocessed event as read: its payload is decoded
// when the engine takes it (NextEvent), so that a transaction that ends
// before the events it read ahead (a push, a yield) decodes none of them.
type aheadEvent struct {
	se chain.StoredEvent
	// payload is the event's JSON while encoded (se.Event is not
	// filled in yet).
	payload string
	encoded bool
}

// decoded returns the event with its payload decoded. A payload this
// depsd cannot read is returned empty: the engine marks it processed
// instead of stalling the inbox behind it.
func (a aheadEvent) decoded() chain.StoredEvent {
	se := a.se
	if a.encoded && json.Unmarshal([]byte(a.payload), &se.Event) != nil {
		se.Event = chain.Event{}
	}
	return se
}

// scanEvents reads rows of (seq, key, payload, received_at), and an extra
// boolean column when cols is five, into each's call, the payloads left
// undecoded. A NULL payload is left for the caller to fill.
func scanEvents(rows rowScanner, cols int, each func(a aheadEvent, flag bool)) error {
	for rows.Next() {
		var a aheadEvent
		var payload, received sql.NullString
		var flag bool
		dest := []any{&a.se.Seq, &a.se.Key, &payload, &received, &flag}
		if err := rows.Scan(dest[:cols]...); err != nil {
			return fmt.Errorf("read next events: %w", err)
		}
		a.payload, a.encoded = payload.String, payload.Valid
		var err error
		if a.se.ReceivedAt, err = decodeTime(received); err != nil {
			return fmt.Errorf("event %d: %w", a.se.Seq, err)
		}
		each(a, flag)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read next events: %w", err)
	}
	return nil
}

// MarkEvent records that an event was processed, unless it already was.
// In a write transaction the marks are kept until the events are read
// again, or the transaction ends, and then written by one statement
// (flushMarks): the inbox marks dozens of events a transaction, each at
// its own time.
func (t chainTx) MarkEvent(ctx context.Context, seq int64, at time.Time, result string) error {
	if t.cc == nil {
		err := t.tx.execLater(ctx, `UPDATE events SET processed_at = $1, result = $2
			WHERE seq = $3 AND processed_at IS NULL`, encodeTime(at), result, seq)
		if err != nil {
			return fmt.Errorf("mark event %d processed: %w", seq, err)
		}
		return nil
	}
	t.cc.events = slices.DeleteFunc(t.cc.events, func(a aheadEvent) bool { return a.se.Seq == seq })
	if at.IsZero() {
		at = time.Now() // a mark marks
	}
	t.cc.marks = append(t.cc.marks, eventMark{seq: seq, at: encodeTime(at).(string), result: result})
	return nil
}

// eventMark is an event marked processed, not yet written.
type eventMark struct {
	seq        int64
	at, result string
}

// Statements of flushMarks: one for all the marks kept, given as arrays
// on PostgreSQL (queued with the transaction's other statements whose
// results nothing reads), as one JSON array of [seq, at, result] on
// SQLite. There the unary + keeps SQLite from walking every unprocessed
// event (events_unprocessed) and the whole list for each: the list
// drives, each event found by its seq (TestMarksFindEventsBySeq).
const (
	markEventsPostgres = `UPDATE events SET processed_at = m.at, result = m.result
		FROM unnest($1::bigint[], $2::text[], $3::text[]) AS m(seq, at, result)
		WHERE events.seq = m.seq AND events.processed_at IS NULL`
	markEventsSQLite = `UPDATE events SET processed_at = m.value ->> 1, result = m.value ->> 2
		FROM json_each($1) AS m
		WHERE events.seq = m.value ->> 0 AND +events.processed_at IS NULL`
)

// markEventsAlike is the statement that marks n events alike on SQLite.
func markEventsAlike(n int) string {
	var q strings.Builder
	q.WriteString(`UPDATE events SET processed_at = $1, result = $2 WHERE processed_at IS NULL AND seq IN (`)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "$%d", i+3)
	}
	q.WriteString(")")
	return q.String()
}

// markArgs are markEventsAlike's arguments.
func markArgs(same eventMark, marks []eventMark) []any {
	args := make([]any, 0, 2+len(marks))
	args = append(args, same.at, same.result)
	for _, m := range marks {
		args = append(args, m.seq)
	}
	return args
}

// flushMarks writes the marks MarkEvent kept, in one statement.
func (t chainTx) flushMarks(ctx context.Context) error {
	if t.cc == nil || len(t.cc.marks) == 0 {
		return nil
	}
	marks := t.cc.marks
	t.cc.marks = nil
	var err error
	if t.tx.pipe != nil {
		seqs, ats, results := make([]int64, len(marks)), make([]string, len(marks)), make([]string, len(marks))
		for i, m := range marks {
			seqs[i], ats[i], results[i] = m.seq, m.at, m.result
		}
		err = t.tx.execLater(ctx, markEventsPostgres, seqs, ats, results)
	} else if same := marks[0]; !slices.ContainsFunc(marks, func(m eventMark) bool { return m.at != same.at || m.result != same.result }) {
		// Alike (the recorder's events, settled at once): SQLite's
		// simplest statement.
		err = t.tx.execLater(ctx, markEventsAlike(len(marks)), markArgs(same, marks)...)
	} else {
		rows := make([][3]any, len(marks))
		for i, m := range marks {
			rows[i] = [3]any{m.seq, m.at, m.result}
		}
		var arg []byte
		if arg, err = json.Marshal(rows); err == nil {
			err = t.tx.execLater(ctx, markEventsSQLite, string(arg))
		}
	}
	if err != nil {
		return fmt.Errorf("mark %d events processed (first %d): %w", len(marks), marks[0].seq, err)
	}
	return nil
}

// UnprocessedPushes returns the unprocessed push events, oldest first,
// up to limit.
func (t chainTx) UnprocessedPushes(ctx context.Context, limit int) ([]chain.StoredEvent, error) {
	if err := t.flushMarks(ctx); err != nil {
		return nil, err
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT seq, key, payload, received_at FROM events
		WHERE processed_at IS NULL AND kind = 'push' ORDER BY seq LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("read unprocessed pushes: %w", err)
	}
	defer rows.Close()
	var evs []chain.StoredEvent
	if err := scanEvents(rows, 4, func(a aheadEvent, _ bool) { evs = append(evs, a.decoded()) }); err != nil {
		return nil, fmt.Errorf("read unprocessed pushes: %w", err)
	}
	return evs, nil
}

// PruneEvents deletes processed events received before before.
func (t chainTx) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	if err := t.flushMarks(ctx); err != nil {
		return 0, err
	}
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
	if err := t.flushMarks(ctx); err != nil {
		return 0, err
	}
	var n int
	if err := t.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM events WHERE processed_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}
