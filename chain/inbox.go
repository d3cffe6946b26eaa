package chain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// maxInboxBatch bounds how many events one transaction of ProcessInbox
// applies; yieldAfter is how many it applies before it lets a waiting
// webhook recording in: each transaction costs a BEGIN, the read of the
// active chains and a commit (together some events' worth), which a
// transaction per event would pay while the recorder waits anyway.
const (
	maxInboxBatch = 64
	yieldAfter    = 4
)

// maxCoveredPushes bounds the push events one rescan marks besides its
// own.
const maxCoveredPushes = 1000

// outcomeRescanned is the outcome of a push whose project was rescanned.
const outcomeRescanned = "rescanned"

// WriteYielder is what a Store may also implement so that the inbox
// processor lets the webhook recorder in: UrgentWritersWaiting reports
// whether a write of this process that a webhook's answer waits for
// (RecordEvents) is queued behind the transaction in progress. It is called
// inside UpdateChains, from the goroutine holding the write lock, and must
// be cheap. A Store without it is never yielded to between events.
type WriteYielder interface {
	UrgentWritersWaiting() bool
}

// ProcessInbox applies the unprocessed events in the order they were
// recorded, each in the same transaction as its effects and its
// "processed" mark, and returns how many it applied. Several processors (in
// one process or several) may run at once: each event is applied once. Push
// events are handed to Rescan outside any transaction, then marked.
//
// Events share a transaction with the events after them, up to
// maxInboxBatch, which saves a commit (on PostgreSQL, a WAL fsync) and the
// read of the active chains per event. The chains an event changed are
// written before the next event is applied, so every event sees the chains
// exactly as if it had a transaction of its own. The transaction also ends
// when a webhook recording waits for the write lock (WriteYielder) and
// yieldAfter events are applied, so an acknowledgement waits for a few
// events, not a whole batch. If a batch fails, it is tried again from its
// first event in a transaction of its own, so that one event that cannot
// be applied does not hold back those before it.
func (e *Engine) ProcessInbox(ctx context.Context) (int, error) {
	e.inboxRuns.Add(1)
	defer e.inboxRuns.Add(-1)
	var g *deps.Graph
	yield, _ := e.cfg.Store.(WriteYielder)
	n := 0
	rescanned := map[int64]bool{} // release events whose project was rescanned
	limit := maxInboxBatch
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
		var done []appliedEvent
		var push, release *StoredEvent
		drained := false
		err := e.update(ctx, g, func(t *txn) error {
			var err error
			done, push, release, drained, err = t.applyEvents(limit, yield, rescanned)
			return err
		})
		if err != nil {
			if limit > 1 {
				limit = 1 // again, one event at a time
				continue
			}
			return n, fmt.Errorf("process inbox: %w", err)
		}
		limit = maxInboxBatch
		for _, a := range done {
			e.obs.EventApplied(a.kind, a.outcome)
		}
		n += len(done)
		if release != nil {
			// A new release: the scan reads its files (its node, its
			// ref) before the success is applied, then it is.
			ev := release.Event.Pipeline
			if err := e.cfg.Rescan(ctx, []string{deps.NodeProject(ev.Project)}); err != nil {
				e.log.Warn("rescan after a release failed", "project", ev.Project, "ref", ev.Ref, "err", err)
			}
			rescanned[release.Seq] = true
			g = nil
			continue
		}
		if push != nil {
			outcome, covered, err := e.rescanPushes(ctx, push.Event.Push)
			if err != nil {
				return n, fmt.Errorf("process inbox: %w", err)
			}
			err = e.cfg.Store.UpdateChains(ctx, func(tx Tx) error {
				at := e.now()
				if err := tx.MarkEvent(ctx, push.Seq, at, outcome); err != nil {
					return err
				}
				for _, seq := range covered {
					if seq == push.Seq {
						continue
					}
					if err := tx.MarkEvent(ctx, seq, at, fmt.Sprintf("%s with event %d", outcomeRescanned, push.Seq)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return n, fmt.Errorf("process inbox: mark push event %d: %w", push.Seq, err)
			}
			g = nil // the rescan may have changed the graph
			e.obs.EventApplied(push.Event.Kind(), outcome)
			n++
			for _, seq := range covered {
				if seq != push.Seq {
					e.obs.EventApplied(push.Event.Kind(), outcomeRescanned)
					n++
				}
			}
			continue
		}
		if drained {
			// This transaction saw the inbox empty: no need for another
			// to find that out (a wake-up follows each recording).
			return n, nil
		}
	}
}

// appliedEvent is what the observer is told of an applied event.
type appliedEvent struct{ kind, outcome string }

// How applyNow goes through the inbox.
type applyMode int

const (
	// applyAll applies every event, as the inbox does (applyEvents).
	applyAll applyMode = iota
	// settleCheap settles only the events the cheap path settles
	// (settleEvents): the recorder's way in a burst, in the transaction
	// that records them, so that an event no chain can use costs no
	// second transaction and wakes no inbox.
	settleCheap
)

// applyEvents applies the oldest unprocessed events, up to limit, each
// marked processed and its chains written before the next is applied (the
// batch shares the transaction's commit). It stops before a push event:
// push is that event when it is the first (to be rescanned outside the
// transaction, then marked), nil otherwise. drained reports that the inbox
// was seen empty. With yield, it also stops once yieldAfter events are
// applied and a webhook recording waits for the write lock.
func (t *txn) applyEvents(limit int, yield WriteYielder, rescanned map[int64]bool) (done []appliedEvent, push, release *StoredEvent, drained bool, err error) {
	for len(done) < limit {
		se, ok, err := t.tx.NextEvent(t.ctx)
		if err != nil || !ok {
			return done, nil, nil, err == nil, err
		}
		if se.Event.Push != nil {
			if len(done) == 0 {
				push = &se // marked after the rescan
			}
			return done, push, nil, false, nil
		}
		if ev := se.Event.Pipeline; ev != nil && !rescanned[se.Seq] {
			if newer, err := t.newRelease(*ev); err != nil {
				return done, nil, nil, false, err
			} else if newer {
				if len(done) == 0 {
					release = &se // applied after the rescan
				}
				return done, nil, release, false, nil
			}
		}
		t.now = t.e.now()
		outcome := "ignored: empty event"
		if ev := se.Event.Pipeline; ev != nil {
			// An event no chain can use is settled without the
			// per-event look-ups (cheap.go); the others are applied.
			cheap := false
			outcome, cheap, err = t.cheapOutcome(*ev)
			if err == nil && !cheap {
				outcome, err = t.applyPipeline(*ev)
			}
			if err != nil {
				return done, nil, nil, false, fmt.Errorf("apply event %d (pipeline %d of %s): %w", se.Seq,
					ev.PipelineID, ev.Project, err)
			}
		}
		if err := t.mark(se, outcome); err != nil {
			return done, nil, nil, false, err
		}
		done = append(done, appliedEvent{se.Event.Kind(), outcome})
		if len(done) >= yieldAfter && yield != nil && yield.UrgentWritersWaiting() {
			return done, nil, nil, false, nil
		}
	}
	return done, nil, nil, false, nil
}

// settleEvents settles the oldest unprocessed events that the cheap path
// settles (cheap.go), up to limit, in order, and stops before the first it
// does not (a push, a tag's, one a chain may use): that one and those
// after it are the inbox's. drained reports that the inbox was seen
// empty.
func (t *txn) settleEvents(limit int) (done []appliedEvent, drained bool, err error) {
	for len(done) < limit {
		se, ok, err := t.tx.NextEvent(t.ctx)
		if err != nil || !ok {
			return done, err == nil, err
		}
		if se.Event.Pipeline == nil {
			return done, false, nil
		}
		outcome, cheap, err := t.cheapOutcome(*se.Event.Pipeline)
		if err == nil && cheap {
			err = t.mark(se, outcome)
		}
		if err != nil || !cheap {
			return done, false, err
		}
		done = append(done, appliedEvent{se.Event.Kind(), outcome})
	}
	return done, false, nil
}

// mark marks se processed with outcome and writes the chains it changed,
// so that the next event of the batch (which shares the commit) sees them.
func (t *txn) mark(se StoredEvent, outcome string) error {
	if err := t.tx.MarkEvent(t.ctx, se.Seq, t.now, outcome); err != nil {
		return err
	}
	return t.saveChanges()
}

// newRelease reports whether ev is the success of a release tag newer
// than the one the project's release node was read at (or of its first
// release): the scan must read that tag before the chain starts from it.
func (t *txn) newRelease(ev PipelineEvent) (bool, error) {
	if !ev.Tag || classify(ev.Status) != classSuccess || t.e.cfg.Rescan == nil {
		return false, nil
	}
	path := deps.NodeProject(ev.Project)
	rule, _ := t.e.cfg.Refs.For(path)
	tag := strings.TrimPrefix(ev.Ref, "refs/tags/")
	if !rule.FollowsTag(tag) {
		return false, nil
	}
	p, ok, err := t.project(path)
	if err != nil || !ok {
		return false, err
	}
	stored := p.Refs[deps.NodeKey(path, deps.NodeTags, "")]
	latest, ok := deps.LatestRelease([]string{stored, tag}, rule.Tags)
	return ok && latest.Tag == tag && tag != stored, nil
}

// pushedProjects is the projects a rescan for push reads: its own, then
// those of the other pushes recorded (pending), each once.
func pushedProjects(push *PushEvent, pending []StoredEvent) []string {
	projects := []string{push.Project}
	for _, se := range pending {
		if p := se.Event.Push; p != nil && p.Project != "" && !slices.Contains(projects, p.Project) {
			projects = append(projects, p.Project)
		}
	}
	return projects
}

// rescanPushes answers ev, the oldest push in the inbox: a push to a
// branch that is followed calls Rescan, at least RescanGap after the last
// rescan for pushes ended. It returns the outcome to record for ev and
// the other pushes the rescan covers (to be marked with it). A failed
// rescan is logged, not retried: the periodic rescan catches up.
//
// The rescan reads GitLab as it is when it runs: every push delivered
// before it starts is in what it reads of the projects pushed to. So the
// pushes recorded by then, further in the inbox too, are covered by one
// rescan of all their projects: a burst of pushes costs one rescan, and
// a stream of them (a bot moving a base in hundreds of Containerfiles)
// one every RescanGap, not one each.
func (e *Engine) rescanPushes(ctx context.Context, ev *PushEvent) (outcome string, covered []int64, err error) {
	if e.cfg.Rescan == nil {
		return "ignored: no rescanner", nil, nil
	}
	var branch string
	var followed Project
	err = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		p, ok, err := tx.Project(ctx, ev.Project)
		if ok {
			branch, followed = p.DefaultBranch, p
		}
		return err
	})
	if err != nil {
		e.log.Warn("push: look up project", "project", ev.Project, "err", err)
	}
	pushed := strings.TrimPrefix(ev.Ref, "refs/heads/")
	rule, _ := e.cfg.Refs.For(ev.Project)
	if branch != "" && !followsBranch(followed, pushed) && !rule.FollowsBranch(pushed) {
		return "ignored: not a followed branch", nil, nil
	}
	if err := e.waitRescanGap(ctx); err != nil {
		return "", nil, err
	}
	var pending []StoredEvent
	err = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		pending, err = tx.UnprocessedPushes(ctx, maxCoveredPushes)
		return err
	})
	if err != nil {
		return "", nil, fmt.Errorf("read push events: %w", err)
	}
	projects := pushedProjects(ev, pending)
	// A merge of a pin merge request pushes to its target: its member
	// learns of the merge sooner than at the next round.
	e.NotifyPins()
	err = e.cfg.Rescan(ctx, projects)
	e.lastRescan.Store(time.Now().UnixNano())
	if err != nil {
		e.log.Warn("rescan after push failed", "project", ev.Project, "project_id", ev.ProjectID, "projects", len(projects), "err", err)
		return "rescan failed: " + err.Error(), nil, nil
	}
	for _, se := range pending {
		covered = append(covered, se.Seq)
	}
	return outcomeRescanned, covered, nil
}

// waitRescanGap waits until RescanGap passed since the last rescan for
// pushes ended (in real time: it paces work, whatever the engine's clock).
func (e *Engine) waitRescanGap(ctx context.Context) error {
	last := e.lastRescan.Load()
	if e.cfg.RescanGap <= 0 || last == 0 {
		return nil
	}
	wait := time.Until(time.Unix(0, last).Add(e.cfg.RescanGap))
	if wait <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
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
// NotifyInbox (the Recorder calls it after each batch), and every
// PollInterval for events recorded by another process. Errors are logged
// and retried at the next wake.
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
