package store

import (
	"slices"

	"gitlab.com/depsd/depsd/chain"
)

// recordingAhead is a recording that goes to PostgreSQL with the BEGIN of
// the write transaction that applies it (chain.RecordingFirst, the
// Recorder's quiet path): insertReadingAheadPostgres and, for a lone
// pipeline event, the look-up applying it starts with (its action by
// DEPSD_ACTION_ID, or else PipelineSeen of its pipeline) join the batch
// that begins the transaction, takes the lock and reads the chains'
// versions (readAhead). The path from a webhook to its pipelines then
// makes two round trips before its commit, not four.
type recordingAhead struct {
	evs []chain.NewEvent
	rec recording
	// look is the event's first look-up, sent too (its answer once read).
	look lookAhead

	// What came back: the events to apply, and whether the older ones
	// were all read. read: they did.
	events  []aheadEvent
	drained bool
	read    bool
}

func newRecordingAhead(evs []chain.NewEvent) (*recordingAhead, error) {
	rec, err := newRecording(evs)
	if err != nil {
		return nil, err
	}
	a := &recordingAhead{evs: evs, rec: rec}
	if p := evs[0].Event.Pipeline; len(evs) == 1 && p != nil {
		if id := p.Variables[chain.VarActionID]; id != "" {
			a.look.actionID = id
		} else {
			a.look.pipelineID = p.PipelineID
		}
	}
	return a, nil
}

// statements are the statements to send with the BEGIN (readAhead.then).
func (a *recordingAhead) statements() []aheadStatement {
	first, keys, kinds, payloads := a.rec.rows()
	stmts := []aheadStatement{{query: insertReadingAheadPostgres,
		args: []any{keys, kinds, payloads, a.rec.now, eventPrefetch},
		read: func(rows rowScanner) error {
			var err error
			a.events, a.drained, err = a.rec.readAhead(rows, first, eventPrefetch)
			a.read = err == nil
			return err
		}}}
	look := &a.look
	// readLook reads the look-up's row, if any: no row is no action.
	readLook := func(extra ...any) func(rowScanner) error {
		return func(rows rowScanner) error {
			if !rows.Next() {
				return rows.Err()
			}
			var err error
			look.seen.Action, look.seen.HasAction, err = scanAction(rows.Scan, extra...)
			return err
		}
	}
	switch {
	case look.actionID != "":
		stmts = append(stmts, aheadStatement{query: actionByIDQuery, args: []any{look.actionID}, read: readLook()})
	case look.pipelineID != 0:
		stmts = append(stmts, aheadStatement{query: pipelineSeenQuery, args: pipelineSeenArgs(look.pipelineID),
			read: readLook(&look.seen.Counted, &look.seen.Started)})
	}
	return stmts
}

// take answers Tx.RecordEvents of evs from what came back, if evs are the
// events sent and their rows came back: the events to apply go to tc
// (NextEvent answers from them), and the event's look-up too, if it
// still holds (no older event is applied before it).
func (a *recordingAhead) take(evs []chain.NewEvent, tc *txCache) (duplicate []bool, ok bool) {
	if a == nil || !a.read || len(evs) != len(a.evs) || &evs[0] != &a.evs[0] {
		return nil, false
	}
	tc.events, tc.eventsDrained = a.events, a.drained
	if len(a.events) == 1 && a.events[0].se.Key == a.rec.keys[0] {
		tc.looked = &a.look
	}
	return slices.Clone(a.rec.duplicate), true
}

// lookAhead is the look-up sent with the BEGIN for an event: its action
// (Tx.Action of actionID) or its pipeline (Tx.PipelineSeen of
// pipelineID), and the answer.
type lookAhead struct {
	actionID   string
	pipelineID int64
	seen       chain.PipelineSeen
}

// takeAction answers Tx.Action of id, once, if it was sent.
func (l *lookAhead) takeAction(id string) (chain.Action, bool, bool) {
	if l == nil || l.actionID == "" || l.actionID != id {
		return chain.Action{}, false, false
	}
	a, has := l.seen.Action, l.seen.HasAction
	l.actionID = ""
	return a, has, true
}

// takePipeline answers Tx.PipelineSeen of id, once, if it was sent.
func (l *lookAhead) takePipeline(id int64) (chain.PipelineSeen, bool) {
	if l == nil || l.pipelineID == 0 || l.pipelineID != id {
		return chain.PipelineSeen{}, false
	}
	l.pipelineID = 0
	return l.seen, true
}
