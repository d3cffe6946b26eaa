package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// RecordEvent records an accepted webhook event in the inbox and wakes the
// processor. The webhook handler calls it before answering 2xx; key is the
// delivery's Idempotency-Key. A duplicate (same key within the retention
// period) is reported and not recorded again.
func (e *Engine) RecordEvent(ctx context.Context, key string, ev Event) (duplicate bool, err error) {
	if ev.Pipeline == nil && ev.Push == nil {
		return false, errors.New("record event: empty event")
	}
	dups, err := e.cfg.Store.RecordEvents(ctx, []NewEvent{{Key: key, Event: ev}})
	if err != nil {
		return false, fmt.Errorf("record %s event: %w", ev.Kind(), err)
	}
	if !dups[0] {
		e.NotifyInbox()
	}
	return dups[0], nil
}

// ProcessInbox applies the unprocessed events in the order they were
// recorded, each in one transaction with its effects and its "processed"
// mark, and returns how many it applied. Several processors (in one process
// or several) may run at once: each event is applied once. Push events are
// handed to Rescan outside any transaction, then marked.
func (e *Engine) ProcessInbox(ctx context.Context) (int, error) {
	var g *deps.Graph
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if g == nil {
			var err error
			if g, err = e.cfg.Graph(ctx); err != nil {
				return n, fmt.Errorf("process inbox: load graph: %w", err)
			}
		}
		var push *StoredEvent
		var kind, outcome string
		got := false
		err := e.update(ctx, g, func(t *txn) error {
			se, ok, err := t.tx.NextEvent(ctx)
			if err != nil || !ok {
				return err
			}
			got, kind = true, se.Event.Kind()
			switch {
			case se.Event.Pipeline != nil:
				outcome, err = t.applyPipeline(*se.Event.Pipeline)
				if err != nil {
					return fmt.Errorf("apply event %d (pipeline %d of %s): %w", se.Seq,
						se.Event.Pipeline.PipelineID, se.Event.Pipeline.Project, err)
				}
			case se.Event.Push != nil:
				push = &se
				return nil // marked after the rescan
			default:
				outcome = "ignored: empty event"
			}
			return t.tx.MarkEvent(ctx, se.Seq, t.now, outcome)
		})
		if err != nil {
			return n, fmt.Errorf("process inbox: %w", err)
		}
		if !got {
			return n, nil
		}
		if push != nil {
			outcome = e.rescan(ctx, push.Event.Push)
			err := e.cfg.Store.UpdateChains(ctx, func(tx Tx) error {
				return tx.MarkEvent(ctx, push.Seq, e.now(), outcome)
			})
			if err != nil {
				return n, fmt.Errorf("process inbox: mark push event %d: %w", push.Seq, err)
			}
			g = nil // the rescan may have changed the graph
		}
		e.obs.EventApplied(kind, outcome)
		n++
	}
}

// rescan routes a push to Rescan and returns the outcome to record. A
// failed rescan is logged, not retried: the periodic rescan catches up.
func (e *Engine) rescan(ctx context.Context, ev *PushEvent) string {
	if e.cfg.Rescan == nil {
		return "ignored: no rescanner"
	}
	var branch string
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		p, ok, err := tx.Project(ctx, ev.Project)
		if ok {
			branch = p.DefaultBranch
		}
		return err
	})
	if err != nil {
		e.log.Warn("push: look up project", "project", ev.Project, "err", err)
	}
	if branch != "" && strings.TrimPrefix(ev.Ref, "refs/heads/") != branch {
		return "ignored: not the default branch"
	}
	if err := e.cfg.Rescan(ctx, ev.Project); err != nil {
		e.log.Warn("rescan after push failed", "project", ev.Project, "project_id", ev.ProjectID, "err", err)
		return "rescan failed: " + err.Error()
	}
	return "rescanned"
}

// ApplyPipelineEvent applies one pipeline event at once, without the inbox
// (the reconciler's path; also handy in tests and tools). It returns the
// outcome ProcessInbox would record.
func (e *Engine) ApplyPipelineEvent(ctx context.Context, ev PipelineEvent) (string, error) {
	g, err := e.cfg.Graph(ctx)
	if err != nil {
		return "", fmt.Errorf("apply pipeline event: load graph: %w", err)
	}
	var outcome string
	err = e.update(ctx, g, func(t *txn) error {
		var err error
		outcome, err = t.applyPipeline(ev)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("apply pipeline %d of %s: %w", ev.PipelineID, ev.Project, err)
	}
	return outcome, nil
}

// RunInbox processes the inbox until ctx ends: at once when woken by
// RecordEvent or NotifyInbox, and every PollInterval for events recorded by
// another process. Errors are logged and retried at the next wake.
func (e *Engine) RunInbox(ctx context.Context) error {
	for {
		if _, err := e.ProcessInbox(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("inbox processing failed", "err", err)
		}
		if !e.sleep(ctx, e.inboxC, e.cfg.PollInterval) {
			return nil
		}
	}
}

// sleep waits for a wake-up on c or d, and reports false when ctx ended.
func (e *Engine) sleep(ctx context.Context, c <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-c:
	case <-timer.C:
	}
	return true
}
