package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

func TestEventsRecordedInATransactionAreAppliedAsStored(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// One older event, and more than one read of the inbox takes.
		for _, n := range []int{1, eventPrefetch + 1} {
			t.Run(fmt.Sprint(n, " older"), func(t *testing.T) { testEventsRecordedInATransactionAreAppliedAsStored(t, b, n) })
		}
	})
}

// testEventsRecordedInATransactionAreAppliedAsStored: the events a write
// transaction records and then applies (the Recorder's way) come to the
// engine after the n older unprocessed ones, in order, each as a later
// read of the inbox returns it, the duplicates left out.
func testEventsRecordedInATransactionAreAppliedAsStored(t *testing.T, b backend, n int) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	at := time.Now().In(time.FixedZone("CEST", 2*3600)) // with a monotonic clock reading
	older := chain.Event{Push: &chain.PushEvent{ProjectID: 1, Project: "g/base", Ref: "main", After: "abc", At: at}}
	for i := n - 1; i > 0; i-- {
		if _, err := s.RecordEvent(ctx, fmt.Sprint("older ", i), older); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RecordEvent(ctx, "older", older); err != nil {
		t.Fatal(err)
	}
	evs := []chain.NewEvent{
		{Key: "p1", Event: chain.Event{Pipeline: &chain.PipelineEvent{ProjectID: 2, Project: "g/app", PipelineID: 7,
			Status: "running", Ref: "main", SHA: "def", Source: "push", At: at, Variables: map[string]string{},
			MergeRequest: &chain.MergeRequestRef{IID: 3, Title: "t"}}}},
		{Key: "older", Event: older},
		{Key: "p2", Event: chain.Event{Pipeline: &chain.PipelineEvent{ProjectID: 2, Project: "g/app", PipelineID: 8,
			Status: "success", Ref: "main", At: at, Variables: map[string]string{chain.VarActionID: "a-1"}}}},
		{Key: "p1", Event: chain.Event{Pipeline: &chain.PipelineEvent{ProjectID: 2, PipelineID: 9}}},
		{Key: "push", Event: chain.Event{Push: &chain.PushEvent{ProjectID: 2, Project: "g/app", Changed: []string{}, At: at}}},
	}
	var applied []chain.StoredEvent
	var dups []bool
	err := s.UpdateChains(ctx, func(tx chain.Tx) error {
		var err error
		if dups, err = tx.RecordEvents(ctx, evs); err != nil {
			return err
		}
		for {
			se, ok, err := tx.NextEvent(ctx)
			if err != nil || !ok {
				return err
			}
			applied = append(applied, se)
			if err := tx.MarkEvent(ctx, se.Seq, at, "done"); err != nil {
				return err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false, true, false}; !reflect.DeepEqual(dups, want) {
		t.Errorf("duplicates %v, want %v", dups, want)
	}
	var stored []chain.StoredEvent
	err = s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT seq, key, payload, received_at FROM events ORDER BY seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		return scanEvents(rows, 4, func(a aheadEvent, _ bool) { stored = append(stored, a.decoded()) })
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != n+3 || len(stored) != n+3 {
		t.Fatalf("applied %d events, stored %d; want %d of each", len(applied), len(stored), n+3)
	}
	for i := range stored {
		got, want := applied[i], stored[i]
		gotJSON, _ := json.Marshal(got.Event)
		wantJSON, _ := json.Marshal(want.Event)
		if got.Seq != want.Seq || got.Key != want.Key || !got.ReceivedAt.Equal(want.ReceivedAt) || string(gotJSON) != string(wantJSON) {
			t.Errorf("event %d applied as\n%d %s %v %s\nstored as\n%d %s %v %s", i, got.Seq, got.Key, got.ReceivedAt, gotJSON,
				want.Seq, want.Key, want.ReceivedAt, wantJSON)
		}
		if !reflect.DeepEqual(normalTimes(got), normalTimes(want)) {
			t.Errorf("event %d applied as %+v, stored as %+v", i, got, want)
		}
	}
	if keys := []string{stored[n-1].Key, stored[n].Key, stored[n+1].Key, stored[n+2].Key}; !reflect.DeepEqual(keys, []string{"older", "p1", "p2", "push"}) {
		t.Errorf("stored in the order %v", keys)
	}
}

// normalTimes is se with its event's times in UTC, so that DeepEqual
// compares them as instants (a zone's name does not survive the JSON).
func normalTimes(se chain.StoredEvent) chain.StoredEvent {
	if p := se.Event.Pipeline; p != nil {
		c := *p
		c.At = c.At.UTC()
		se.Event.Pipeline = &c
	}
	if p := se.Event.Push; p != nil {
		c := *p
		c.At = c.At.UTC()
		se.Event.Push = &c
	}
	return se
}

func TestMarksKeepEachEventsTimeAndResult(t *testing.T) {
	forEachBackend(t, testMarksKeepEachEventsTimeAndResult)
}

// testMarksKeepEachEventsTimeAndResult: the marks of one transaction,
// written together, keep each event's own time and result, alike or not;
// an event marked before keeps its first mark, marked alike or not; an
// event whose payload this depsd cannot read comes to the engine empty,
// in its place.
func testMarksKeepEachEventsTimeAndResult(t *testing.T, b backend) {
	s, _ := b.openTemp(t)
	ctx := t.Context()
	for i := range 6 {
		ev := chain.Event{Pipeline: &chain.PipelineEvent{ProjectID: 1, Project: "g/base", PipelineID: int64(i), Status: "running"}}
		if _, err := s.RecordEvent(ctx, fmt.Sprint("k", i), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE events SET payload = '{"pipeline": 7' WHERE key = 'k4'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }
	// Two transactions, of three events each: at times of their own,
	// then at one time with results of their own.
	results := []string{"a", "a", "d", "b", "a", "c"}
	var took []string
	for from := 0; from < len(results); from += 3 {
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			for i := from; i < from+3; i++ {
				se, ok, err := tx.NextEvent(ctx)
				if err != nil || !ok {
					return errors.Join(err, fmt.Errorf("event %d: none", i))
				}
				desc := "empty"
				if p := se.Event.Pipeline; p != nil {
					desc = fmt.Sprint(p.PipelineID)
				}
				took = append(took, se.Key+" "+desc)
				when := at(i)
				if from > 0 {
					when = at(from)
				}
				if err := tx.MarkEvent(ctx, se.Seq, when, results[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"k0 0", "k1 1", "k2 2", "k3 3", "k4 empty", "k5 5"}; !reflect.DeepEqual(took, want) {
		t.Errorf("the engine took %v, want %v", took, want)
	}
	// Marked again, alike then not: their first marks stay.
	for _, again := range [][2]string{{"again", "again"}, {"again", "again too"}} {
		err := s.UpdateChains(ctx, func(tx chain.Tx) error {
			return errors.Join(tx.MarkEvent(ctx, 2, at(99), again[0]), tx.MarkEvent(ctx, 3, at(99), again[1]))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var marks []string
	if err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT key, processed_at, result FROM events ORDER BY seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key, result string
			var processed sql.NullString
			if err := rows.Scan(&key, &processed, &result); err != nil {
				return err
			}
			when, err := decodeTime(processed)
			if err != nil {
				return err
			}
			marks = append(marks, fmt.Sprintf("%s %v %s", key, when.Sub(t0), result))
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	wantMarks := []string{"k0 0s a", "k1 1ms a", "k2 2ms d", "k3 3ms b", "k4 3ms a", "k5 3ms c"}
	if !reflect.DeepEqual(marks, wantMarks) {
		t.Errorf("marks\n%v\nwant\n%v", marks, wantMarks)
	}
}

// TestMarksFindEventsBySeq: SQLite's statement of marks looks each event
// up by its seq. Walking the unprocessed events instead, with the list
// read again for each, took 2 s for 64 marks behind a backlog of 50,000
// (and the webhooks' answers waited behind it).
func TestMarksFindEventsBySeq(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var plan []string
	err = s.read(t.Context(), func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+markEventsSQLite, `[[1, "at", "result"]]`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || !strings.HasPrefix(plan[0], "SCAN m") || !strings.Contains(plan[1], "events USING INDEX") || !strings.HasSuffix(plan[1], "(seq=?)") {
		t.Errorf("the marks' plan %q: want the list scanned and each event searched by its seq", plan)
	}
}
