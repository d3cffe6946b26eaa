package chain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrRecorderStopped is returned by Recorder.Record once the recorder's Run
// has returned: the event was not recorded.
var ErrRecorderStopped = errors.New("event recorder stopped")

// maxRecordBatch bounds how many recordings share one transaction.
const maxRecordBatch = 512

// Recorder records webhook events in the inbox with group commit: the
// recordings that arrive while a transaction runs are written together in
// the next one, so under load the webhook handlers wait for one commit
// instead of queueing for the write lock one by one. Each Record returns
// after the transaction holding its event committed, so an acknowledged
// event survives a crash. Its Run goroutine is owned by whoever runs the
// engine (the daemon).
type Recorder struct {
	e *Engine
	// lastWrite is when Run last wrote a batch (quietGap).
	lastWrite time.Time
	reqs      chan *recordReq
	stopped   chan struct{}
}

type recordReq struct {
	ev   NewEvent
	dup  bool
	err  error
	done chan struct{}
}

// NewRecorder returns a recorder for e's inbox; Record waits until Run runs.
func (e *Engine) NewRecorder() *Recorder {
	return &Recorder{e: e, reqs: make(chan *recordReq), stopped: make(chan struct{})}
}

// Record records ev with its delivery key and reports whether it is a
// duplicate (the same key recorded before, or earlier in the same batch).
// It returns once the event is committed, or with an error when it could
// not be recorded (the store is down, the recorder stopped, ctx ended
// before the event was handed over). It is called concurrently.
func (r *Recorder) Record(ctx context.Context, key string, ev Event) (duplicate bool, err error) {
	if ev.Pipeline == nil && ev.Push == nil {
		return false, errors.New("record event: empty event")
	}
	req := &recordReq{ev: NewEvent{Key: key, Event: ev}, done: make(chan struct{})}
	select {
	case r.reqs <- req:
	case <-r.stopped:
		return false, ErrRecorderStopped
	case <-ctx.Done():
		return false, fmt.Errorf("record %s event: %w", ev.Kind(), ctx.Err())
	}
	// Once handed over, the event is written whatever ctx does: wait for
	// the commit so the answer tells the truth.
	<-req.done
	return req.dup, req.err
}

// Run writes the recordings until ctx ends: it takes one, then every other
// that is waiting (up to maxRecordBatch), writes them in one transaction,
// answers each and wakes the inbox processor.
func (r *Recorder) Run(ctx context.Context) error {
	defer close(r.stopped)
	batch := make([]*recordReq, 0, maxRecordBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case req := <-r.reqs:
			batch = append(batch, req)
		}
	more:
		for len(batch) < maxRecordBatch {
			select {
			case req := <-r.reqs:
				batch = append(batch, req)
			default:
				break more
			}
		}
		r.write(ctx, batch)
	}
}

// quietGap is how long the recorder must have had nothing to write for a
// lone event to be applied in the transaction that records it (applyNow):
// the pace of a real instance between a pipeline's events. In a burst, or
// when several events waited together (after a stall, say), the recording
// settles only those no chain can use (settleCheap) and the inbox applies
// the others many to a commit, so that the acknowledgements wait for the
// recording, not for chains being moved.
const quietGap = 5 * time.Millisecond

// write records one batch and answers its waiters.
func (r *Recorder) write(ctx context.Context, batch []*recordReq) {
	evs := make([]NewEvent, len(batch))
	pipelines := true
	for i, req := range batch {
		evs[i] = req.ev
		pipelines = pipelines && req.ev.Event.Pipeline != nil
	}
	// The engine's clock, so that tests can tell a burst from a lull.
	quiet := r.e.now().Sub(r.lastWrite) >= quietGap
	// The batch was handed over: write it even if ctx just ended.
	ctx = context.WithoutCancel(ctx)
	if r.e.inboxIdle() {
		// Nothing older waits, most likely: the events are applied
		// (after a lull) or settled (most of a burst) as they are
		// recorded. Behind a backlog, the inbox's batches do it.
		mode := settleCheap
		if quiet && len(batch) == 1 && pipelines {
			mode = applyAll
		}
		dups, err := r.e.applyNow(ctx, evs, mode)
		if err == nil {
			r.lastWrite = r.e.now() // before the waiters learn it ended
			r.answer(batch, dups, nil)
			return
		}
		r.e.log.Warn("applying webhook events as they are recorded failed; recording them for the inbox", "err", err)
	}
	dups, err := r.e.cfg.Store.RecordEvents(ctx, evs)
	r.lastWrite = r.e.now()
	if r.answer(batch, dups, err) {
		r.e.NotifyInbox()
	}
}

// answer tells each waiter of batch its outcome and reports whether an
// event was added.
func (r *Recorder) answer(batch []*recordReq, dups []bool, err error) (added bool) {
	for i, req := range batch {
		if err != nil {
			req.err = fmt.Errorf("record %s event: %w", req.ev.Event.Kind(), err)
		} else {
			req.dup = dups[i]
			added = added || !dups[i]
		}
		close(req.done)
	}
	return added
}

// applyNow records evs and applies them in one write transaction: one
// commit instead of the recording's and then the inbox's, and no wake-up
// of the inbox in between. With applyAll (a lone event after a lull), on
// the path from an upstream's success to its dependents' pipelines; with
// settleCheap (a burst), for the events no chain can use, most of a busy
// instance's, which then cost the inbox nothing. Older unprocessed events
// (another process recorded them) are applied first, in order; if some
// are left (more than a few, a push event ahead, or, with settleCheap, an
// event to apply), the inbox is woken for them. Where the
// store records without the write lock and another writer holds it or is
// ahead (RecordedOnlyError), evs are recorded only, and the inbox woken.
// On error nothing is recorded.
func (e *Engine) applyNow(ctx context.Context, evs []NewEvent, mode applyMode) (duplicate []bool, err error) {
	g, err := e.cfg.Graph(ctx)
	if err != nil {
		return nil, fmt.Errorf("load graph: %w", err)
	}
	var done []appliedEvent
	drained := false
	err = e.update(RecordingFirst(ctx, evs), g, func(t *txn) error {
		var err error
		if duplicate, err = t.tx.RecordEvents(t.ctx, evs); err != nil {
			return err
		}
		if mode == settleCheap {
			done, drained, err = t.settleEvents(len(evs) + yieldAfter)
		} else {
			done, _, _, drained, err = t.applyEvents(len(evs)+yieldAfter, nil, nil)
		}
		return err
	})
	var only *RecordedOnlyError
	if errors.As(err, &only) {
		// Another writer holds the write lock or is ahead: the events
		// are recorded, and the inbox applies them once it can, while
		// the webhook is answered now.
		e.NotifyInbox()
		return only.Duplicate, nil
	}
	if err != nil {
		return nil, err
	}
	for _, a := range done {
		e.obs.EventApplied(a.kind, a.outcome)
	}
	if !drained {
		e.NotifyInbox()
	}
	return duplicate, nil
}
