package store

import (
	"slices"

	"gitlab.com/depsd/depsd/chain"
)

// recordingAhead is a recording that goes to PostgreSQL with the BEGIN of
// the write transaction that applies it (chain.RecordingFirst, the
// Recorder's quiet path): insertReadingAheadPostgres and, for a lone
// pipeline event, PipelineSeen's look-up of its pipeline join the batch
// that begins the transaction, takes the lock and reads the chains'
// versions (readAhead). The path from a webhook to its pipelines then
// makes two round trips before its commit, not four.
type recordingAhead struct {
	evs   []chain.NewEvent
	rec   recording
	first map[string]int
	// pipelineID is the pipeline whose look-up is sent; 0: none.
	pipelineID int64

	// What came back: the events to apply, whether the older ones were
	// all read, and the look-up. read: they did.
	events  []chain.StoredEvent
	drained bool
	seen    chain.PipelineSeen
	read    bool
}

func newRecordingAhead(evs []chain.NewEvent) (*recordingAhead, error) {
	rec, err := newRecording(evs)
	if err != nil {
		return nil, err
	}
	a := &recordingAhead{evs: evs, rec: rec}
	if p := evs[0].Event.Pipeline; len(evs) == 1 && p != nil && p.Variables[chain.VarActionID] == "" {
		a.pipelineID = p.PipelineID
	}
	return a, nil
}

// statements are the statements to send with the BEGIN (readAhead.then).
func (a *recordingAhead) statements() []aheadStatement {
	first, keys, kinds, payloads := a.rec.rows()
	a.first = first
	stmts := []aheadStatement{{query: insertReadingAheadPostgres,
		args: []any{keys, kinds, payloads, a.rec.now, eventPrefetch},
		read: func(rows rowScanner) error {
			var err error
			a.events, a.drained, err = a.rec.readAhead(rows, a.first, eventPrefetch)
			a.read = err == nil
			return err
		}}}
	if a.pipelineID != 0 {
		stmts = append(stmts, aheadStatement{query: pipelineSeenQuery,
			args: []any{a.pipelineID, string(chain.Success)},
			read: func(rows rowScanner) error {
				if !rows.Next() {
					return rows.Err()
				}
				var err error
				a.seen.Action, a.seen.HasAction, err = scanAction(rows.Scan, &a.seen.Counted, &a.seen.Started)
				return err
			}})
	}
	return stmts
}

// take answers Tx.RecordEvents of evs from what came back, if evs are the
// events sent and their rows came back: the events to apply go to tc
// (NextEvent answers from them), and the pipeline's look-up too, if it
// still holds (no older event is applied before it).
func (a *recordingAhead) take(evs []chain.NewEvent, tc *txCache) (duplicate []bool, ok bool) {
	if a == nil || !a.read || len(evs) != len(a.evs) || &evs[0] != &a.evs[0] {
		return nil, false
	}
	tc.events, tc.eventsDrained = a.events, a.drained
	if a.pipelineID != 0 && len(a.events) == 1 && a.events[0].Key == a.rec.keys[0] {
		tc.seen = &seenAhead{pipelineID: a.pipelineID, seen: a.seen}
	}
	return slices.Clone(a.rec.duplicate), true
}

// seenAhead is a pipeline's PipelineSeen read with the BEGIN.
type seenAhead struct {
	pipelineID int64
	seen       chain.PipelineSeen
}
