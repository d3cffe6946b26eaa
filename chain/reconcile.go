package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
)

// Reconcile is the safety net for missed webhooks (GitLab does not resend
// them and disables failing hooks). It expires chains that ran longer than
// Expiry, prunes processed events older than EventRetention, then fetches
// the status of every pipeline depsd created and still believes queued or
// running, and applies any change through the same path as a webhook
// event; for failed or canceled members it also looks for the success that
// would unblock them (reconcileBroken). It first lets the inbox apply the
// webhooks already recorded, and a pipeline whose status a webhook changed
// while the round ran is left to the next round. It returns how
// many statuses changed. GitLab errors for single
// pipelines are logged and skipped; the first is returned after the others
// were tried. The daemon calls it every --reconcile-interval.
func (e *Engine) Reconcile(ctx context.Context) (int, error) {
	if err := e.Expire(ctx); err != nil {
		return 0, err
	}
	if err := e.awaitInbox(ctx, e.cfg.InboxWait); err != nil {
		return 0, fmt.Errorf("reconcile: %w", err)
	}
	start := e.now()
	todo, err := e.livePipelines(ctx)
	if err != nil {
		return 0, fmt.Errorf("reconcile: %w", err)
	}
	if len(todo) > 0 && e.cfg.GitLab == nil {
		return 0, errors.New("reconcile: no GitLab client")
	}
	changed := 0
	var first error
	// The reads wait behind pipeline creations in the client's limiter
	// (gitlab.PriorityUrgent), so during a large rebuild a round can take
	// long and what it listed at its start goes stale. Now and then it
	// looks again, and skips a pipeline whose status a webhook has moved
	// since (it ended, or it started running): the hook works, and the
	// next round reads it if it is still live then. Looking again reads
	// every member of the active chains, so it happens at most every
	// reconcileRecheck, and rarely enough to cost at most a twentieth of
	// the round.
	checked := e.now()
	recheck := max(reconcileRecheck, 20*checked.Sub(start))
	for i := range todo {
		if now := e.now(); now.Sub(checked) >= recheck {
			fresh, err := e.livePipelines(ctx)
			if err != nil {
				return changed, fmt.Errorf("reconcile: %w", err)
			}
			current := make(map[int64]MemberState, len(fresh))
			for _, f := range fresh {
				current[f.pipelineID] = f.state
			}
			for j := range todo[i:] {
				l := &todo[i+j]
				if st, ok := current[l.pipelineID]; !ok || st != l.state {
					l.moved = true
				}
			}
			checked = e.now()
			recheck = max(reconcileRecheck, 20*checked.Sub(now))
		}
		l := todo[i]
		if l.moved {
			continue
		}
		p, err := e.cfg.GitLab.GetPipeline(ctx, l.projectID, l.pipelineID)
		if errors.Is(err, gitlab.ErrNotFound) {
			// Deleted on GitLab: it will never end. Count it as canceled.
			p, err = gitlab.Pipeline{ID: l.pipelineID, Status: "canceled"}, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return changed, ctx.Err()
			}
			e.log.Warn("reconcile: get pipeline failed", "project", l.project, "pipeline_id", l.pipelineID, "err", err)
			if first == nil {
				first = fmt.Errorf("reconcile: %w", err)
			}
			continue
		}
		cls := classify(p.Status)
		if (cls == classQueued && l.state == Triggered) || (cls == classRunning && l.state == MemberRunning) {
			continue
		}
		ev := PipelineEvent{
			ProjectID: l.projectID, Project: l.project, PipelineID: l.pipelineID, Status: p.Status,
			Ref: p.Ref, Tag: p.Tag, SHA: p.SHA, Source: "api", Variables: map[string]string{VarActionID: l.actionID},
			URL: p.WebURL, At: e.now(),
		}
		if ev.Ref == "" { // a pipeline deleted on GitLab: its node's ref
			ev.Ref, ev.Tag = e.nodeRef(ctx, l.project)
		}
		moved, err := e.applyReconciled(ctx, ev)
		if err != nil {
			return changed, err
		}
		if moved {
			changed++
		}
	}
	n, err := e.reconcileBroken(ctx)
	changed += n
	if first == nil {
		first = err
	}
	return changed, first
}

// awaitInbox waits, for at most limit, until the inbox has applied the
// events it held when called. They are statuses webhooks already brought:
// while the inbox works through a backlog (a burst of webhooks on a busy
// machine), members whose pipelines ended still look live, and reading
// them from GitLab would only spend the rate limit on what is on its way.
// Past limit (an inbox that does not drain) the round goes on regardless.
func (e *Engine) awaitInbox(ctx context.Context, limit time.Duration) error {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	var until int64 // the first event recorded after the call
	for first := true; ; first = false {
		var oldest int64
		var backlog int
		found := false
		err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
			se, ok, err := tx.NextEvent(ctx)
			if err != nil || !ok {
				return err
			}
			found, oldest = true, se.Seq
			if first {
				backlog, err = tx.CountEvents(ctx)
			}
			return err
		})
		if err != nil {
			return err
		}
		if first {
			until = oldest + int64(backlog)
		}
		if !found || oldest >= until {
			return nil
		}
		if e.inboxWaitHook != nil {
			e.inboxWaitHook()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return nil
		case <-time.After(inboxPoll):
		}
	}
}

// inboxPoll is how often awaitInbox looks at the inbox.
const inboxPoll = 100 * time.Millisecond

// reconcileRecheck is how often a reconcile round looks at the chains
// again while it reads pipelines from GitLab.
const reconcileRecheck = time.Second

// livePipeline is a pipeline depsd created for a chain member and still
// believes queued or running.
type livePipeline struct {
	project    string
	projectID  int64
	pipelineID int64
	actionID   string
	state      MemberState
	moved      bool // its status changed since the round began
}

// livePipelines lists the pipelines the reconciler reads.
func (e *Engine) livePipelines(ctx context.Context) ([]livePipeline, error) {
	var todo []livePipeline
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		chains, err := tx.ActiveChains(ctx)
		for _, c := range chains {
			for _, m := range c.Members {
				if (m.State == Triggered || m.State == MemberRunning) && m.PipelineID != 0 && m.ProjectID != 0 {
					todo = append(todo, livePipeline{project: m.Project, projectID: m.ProjectID,
						pipelineID: m.PipelineID, actionID: m.ActionID, state: m.State})
				}
			}
		}
		return err
	})
	return todo, err
}

// reconcileBroken looks for the success that would unblock a failed,
// canceled or stale member, in case its webhook never came: the member's
// own pipeline retried to success (a retry keeps the pipeline id; not for
// a stale member, whose pipeline succeeded), or a newer successful
// pipeline of the project on its default branch. It costs two
// requests per broken member.
func (e *Engine) reconcileBroken(ctx context.Context) (int, error) {
	type broken struct {
		project    string
		projectID  int64
		pipelineID int64
		actionID   string
		since      time.Time
		stale      bool // its pipeline succeeded: only a newer one counts
	}
	var todo []broken
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		chains, err := tx.ActiveChains(ctx)
		for _, c := range chains {
			if c.IsValidation() {
				continue // a validation's failure is its answer
			}
			for _, m := range c.Members {
				if (m.State == Failed || m.State == Canceled || m.State == Stale) && m.ProjectID != 0 {
					todo = append(todo, broken{m.Project, m.ProjectID, m.PipelineID, m.ActionID, m.FinishedAt, m.State == Stale})
				}
			}
		}
		return err
	})
	if err != nil || len(todo) == 0 {
		return 0, err
	}
	if e.cfg.GitLab == nil {
		return 0, errors.New("reconcile: no GitLab client")
	}
	changed := 0
	var first error
	for _, b := range todo {
		ref, tag := e.nodeRef(ctx, b.project)
		p, found, err := e.successSince(ctx, b.projectID, b.pipelineID, !b.stale, ref, b.since)
		if err != nil {
			if ctx.Err() != nil {
				return changed, ctx.Err()
			}
			e.log.Warn("reconcile: look for a success failed", "project", b.project, "err", err)
			if first == nil {
				first = fmt.Errorf("reconcile: %w", err)
			}
			continue
		}
		if !found {
			continue
		}
		ev := PipelineEvent{ProjectID: b.projectID, Project: b.project, PipelineID: p.ID, Status: p.Status,
			Ref: p.Ref, Tag: tag, SHA: p.SHA, Source: p.Source, URL: p.WebURL, At: e.now()}
		if p.ID == b.pipelineID {
			ev.Variables = map[string]string{VarActionID: b.actionID}
		}
		moved, err := e.applyReconciled(ctx, ev)
		if err != nil {
			return changed, err
		}
		if moved {
			changed++
		}
	}
	return changed, first
}

// successSince returns a successful pipeline of the project: the failed
// pipeline itself after a retry, or a newer one on ref.
func (e *Engine) successSince(ctx context.Context, projectID, failedID int64, retried bool, ref string, since time.Time) (gitlab.Pipeline, bool, error) {
	if failedID != 0 && retried {
		p, err := e.cfg.GitLab.GetPipeline(ctx, projectID, failedID)
		if err != nil && !errors.Is(err, gitlab.ErrNotFound) {
			return p, false, err
		}
		if err == nil && p.Status == "success" {
			return p, true, nil
		}
	}
	ps, err := e.cfg.GitLab.ListPipelines(ctx, projectID, gitlab.PipelineFilter{Ref: ref, Source: "any", UpdatedAfter: since, Limit: 5})
	if err != nil {
		return gitlab.Pipeline{}, false, err
	}
	for _, p := range ps { // newest first
		if p.ID > failedID && p.Status == "success" && p.Source != SourceChildPipeline {
			return p, true, nil
		}
	}
	return gitlab.Pipeline{}, false, nil
}

// applyReconciled applies a status the reconciler found as a webhook would,
// and reports whether anything moved.
func (e *Engine) applyReconciled(ctx context.Context, ev PipelineEvent) (bool, error) {
	outcome, err := e.ApplyPipelineEvent(ctx, ev)
	if err != nil {
		return false, fmt.Errorf("reconcile: %w", err)
	}
	if outcome == outcomeNoChange {
		return false, nil
	}
	e.obs.EventApplied("reconcile", outcome)
	e.log.Info("reconciled pipeline status", "project", ev.Project, "pipeline_id", ev.PipelineID, "status", ev.Status)
	return true, nil
}

// nodeRef is the ref node's pipelines run on (buildRef), and whether it
// is a tag.
func (e *Engine) nodeRef(ctx context.Context, node string) (ref string, tag bool) {
	_ = e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		p, _, err := tx.Project(ctx, deps.NodeProject(node))
		ref, _ = buildRef(node, p, e.cfg.Refs)
		return err
	})
	_, kind, _ := deps.ParseNode(node)
	return ref, kind == deps.NodeTags && ref != "" && !e.rebuildsBranch(node)
}

// rebuildsBranch reports whether node is a project's release tags rebuilt
// on its default branch (rebuild: branch).
func (e *Engine) rebuildsBranch(node string) bool {
	rule, _ := e.cfg.Refs.For(deps.NodeProject(node))
	return rule.Rebuild == deps.RebuildBranch
}

// Expire ends the active chains into which no new work came for Expiry:
// their unfinished members are marked expired, their unsent actions
// obsolete, and the chain no longer reacts. It also prunes processed inbox
// events older than EventRetention. Reconcile calls it.
func (e *Engine) Expire(ctx context.Context) error {
	err := e.update(ctx, nil, func(t *txn) error {
		for _, c := range t.chains {
			if !c.State.Active() || t.now.Before(c.lastStart().Add(e.cfg.Expiry)) || c.waitsForMerge(t.now, e.cfg.PinTimeout) {
				continue
			}
			if err := t.expire(c); err != nil {
				return err
			}
		}
		_, err := t.tx.PruneEvents(t.ctx, t.now.Add(-e.cfg.EventRetention))
		return err
	})
	if err != nil {
		return fmt.Errorf("expire chains: %w", err)
	}
	return nil
}

func (t *txn) expire(c *Chain) error {
	for _, m := range c.Members {
		if !m.State.Unfinished() && m.State != MemberBlocked {
			continue
		}
		if waitsForAction(m.State) && m.ActionID != "" {
			a, ok, err := t.tx.Action(t.ctx, m.ActionID)
			if err != nil {
				return err
			}
			if ok && a.State == ActionPending {
				a.State, a.LeaseUntil = ActionObsolete, time.Time{}
				if err := t.tx.UpdateAction(t.ctx, a); err != nil {
					return err
				}
			}
		}
		prev := m.State
		m.State, m.Requeued = MemberExpired, false
		m.Why = fmt.Sprintf("chain expired while %s", prev)
		if m.FinishedAt.IsZero() {
			m.FinishedAt = t.now
		}
	}
	c.State, c.EndedAt = Expired, t.now
	c.touch(t.now)
	return nil
}
