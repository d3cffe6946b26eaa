package chain

import (
	"context"
	"fmt"
	"sync"

	"gitlab.com/depsd/depsd/gitlab"
)

// sentRecords gathers the pipelines the senders created while one
// transaction records earlier ones, so that the next transaction records
// them all: each recording waits for the write lock, and on PostgreSQL
// eight senders recording one pipeline per transaction spent a fifth of a
// 2,000-project rebuild's time under the lock on BEGIN, the active chains'
// versions and COMMIT.
type sentRecords struct {
	mu      sync.Mutex
	queue   []*sentRecord
	leading bool // a caller of recordSent is recording the queue
}

// sentRecord is one pipeline to record, and where its caller waits.
type sentRecord struct {
	ev   PipelineEvent
	done chan error
}

// recordSent records the action's pipeline through the same path as its
// webhook: the member becomes triggered (or further, if an adopted pipeline
// already ran). The first caller to find no recording under way records
// the queue, in rounds, until it is empty; the others wait for their
// outcome.
func (e *Engine) recordSent(ctx context.Context, a Action, p gitlab.Pipeline) error {
	r := &sentRecord{done: make(chan error, 1), ev: PipelineEvent{
		ProjectID: a.ProjectID, Project: a.Project, PipelineID: p.ID, Status: p.Status,
		Ref: a.Ref, SHA: p.SHA, Source: "api", Variables: map[string]string{VarActionID: a.ID},
		URL: p.WebURL, At: e.now(),
	}}
	q := &e.sent
	q.mu.Lock()
	q.queue = append(q.queue, r)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if lead {
		for {
			q.mu.Lock()
			batch := q.queue
			q.queue = nil
			if len(batch) == 0 {
				q.leading = false
				q.mu.Unlock()
				break
			}
			q.mu.Unlock()
			e.recordSentBatch(ctx, batch)
		}
	}
	select {
	case err := <-r.done:
		if err != nil {
			return fmt.Errorf("record pipeline %d of %s: %w", p.ID, a.Project, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err() // the leader still records it
	}
}

// recordSentBatch records the batch in one transaction, each pipeline's
// changes written before the next is applied (as the inbox does); if that
// fails, each in a transaction of its own, so one that cannot be recorded
// does not hold back the others.
func (e *Engine) recordSentBatch(ctx context.Context, batch []*sentRecord) {
	g, err := e.cfg.Graph(ctx)
	if err != nil {
		for _, r := range batch {
			r.done <- fmt.Errorf("load graph: %w", err)
		}
		return
	}
	apply := func(rs []*sentRecord) error {
		return e.update(ctx, g, func(t *txn) error {
			for _, r := range rs {
				t.now = e.now()
				if _, err := t.applyPipeline(r.ev); err != nil {
					return err
				}
				if err := t.saveChanges(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if len(batch) > 1 {
		if err := apply(batch); err == nil {
			for _, r := range batch {
				r.done <- nil
			}
			return
		}
	}
	for _, r := range batch {
		r.done <- apply([]*sentRecord{r})
	}
}
