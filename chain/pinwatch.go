package chain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// NotifyPins wakes RunPins: a pipeline of a member waiting for its pin
// merge request came, or its branch was pushed to. It never blocks.
func (e *Engine) NotifyPins() { wake(e.pinsC) }

// RunPins follows the pin merge requests of waiting members until ctx
// ends (ReconcilePins): at once when woken, and every PinInterval. The
// daemon runs it on the leader. Errors are logged and retried.
func (e *Engine) RunPins(ctx context.Context) error {
	for {
		if _, err := e.ReconcilePins(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("following pin merge requests failed", "err", err)
		}
		if !e.sleep(ctx, e.pinsC, e.cfg.PinInterval) {
			return nil
		}
	}
}

// waitingMerge is a member whose pin merge request is open, or merged
// and waiting for its pipeline.
type waitingMerge struct {
	chainID   int64
	node      string
	projectID int64
	iid       int64
	url       string
	mergeSHA  string
	since     time.Time
	upstreams []string
}

// ReconcilePins reads the merge request of every member waiting for one
// (WaitingMerge, its merge request opened) and acts on what it finds:
//   - merged: the merge's commit is recorded on the member, and the
//     pipeline of that commit on the target branch, once one exists, is
//     applied as any pipeline event: it is the member's build
//     (applyToMerge), whether its webhook came or not;
//   - closed (or deleted): the member is skipped, and its descendants
//     nothing else of the chain changed with it;
//   - open for Config.PinTimeout: likewise skipped (the merge request
//     stays open; merged later, its pipeline is a success of the project
//     as any other);
//   - open under auto-merge without GitLab's auto-merge set (no pipeline
//     ran when it was opened): it is asked again.
//
// It returns how many members moved. GitLab errors of one merge request
// are logged and skipped; the first is returned after the others.
func (e *Engine) ReconcilePins(ctx context.Context) (int, error) {
	var todo []waitingMerge
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		chains, err := tx.ActiveChains(ctx)
		for _, c := range chains {
			for _, m := range c.Members {
				if m.State == WaitingMerge && m.MergeRequestIID != 0 && m.ProjectID != 0 {
					todo = append(todo, waitingMerge{chainID: c.ID, node: m.Project, projectID: m.ProjectID, iid: m.MergeRequestIID,
						url: m.MergeRequest, mergeSHA: m.MergeSHA, since: m.TriggeredAt, upstreams: m.Pinned})
				}
			}
		}
		return err
	})
	if err != nil || len(todo) == 0 {
		return 0, err
	}
	repo, ok := e.cfg.GitLab.(Repository)
	if !ok {
		return 0, errors.New("follow pin merge requests: no GitLab client that reads merge requests")
	}
	moved := 0
	var first error
	fail := func(w waitingMerge, err error) {
		e.log.Warn("follow pin merge request failed", "project", w.node, "merge_request", w.iid, "err", err)
		if first == nil {
			first = fmt.Errorf("follow pin merge request !%d of %s: %w", w.iid, w.node, err)
		}
	}
	for _, w := range todo {
		if ctx.Err() != nil {
			return moved, ctx.Err()
		}
		if w.mergeSHA == "" {
			mr, err := repo.GetMergeRequest(ctx, w.projectID, w.iid)
			if errors.Is(err, gitlab.ErrNotFound) {
				mr, err = gitlab.MergeRequest{IID: w.iid, State: gitlab.MergeRequestClosed}, nil
			}
			if err != nil {
				fail(w, err)
				continue
			}
			switch mr.State {
			case gitlab.MergeRequestMerged:
				// A fast-forward merge has no merge commit: the target's
				// head is then the source's.
				w.mergeSHA = cmp.Or(mr.MergeCommitSHA, mr.SHA)
				ok, err := e.pinsMerged(ctx, w)
				if err != nil {
					return moved, err
				}
				if ok {
					moved++
				}
			case gitlab.MergeRequestClosed:
				ok, err := e.pinsEnded(ctx, w, fmt.Sprintf("merge request !%d was closed without being merged", w.iid))
				if err != nil {
					return moved, err
				}
				if ok {
					moved++
				}
				continue
			default:
				if !e.now().Before(w.since.Add(e.cfg.PinTimeout)) {
					ok, err := e.pinsEnded(ctx, w, fmt.Sprintf("merge request !%d was not merged within %s (pins.timeout)", w.iid, e.cfg.PinTimeout))
					if err != nil {
						return moved, err
					}
					if ok {
						moved++
					}
					continue
				}
				if mr.State == gitlab.MergeRequestOpened && !mr.AutoMerge && e.cfg.Pins.For(w.node) == PinAutoMerge {
					if _, err := repo.MergeMergeRequest(ctx, w.projectID, w.iid, gitlab.MergeOptions{AutoMerge: true, SHA: mr.SHA}); err == nil {
						_ = e.recordWrites(ctx, []Write{{ChainID: w.chainID, At: e.now(), Project: w.node, Kind: "merge-request",
							Detail: fmt.Sprintf("set merge request !%d to merge when its pipeline succeeds", w.iid), URL: w.url}})
					}
				}
				continue
			}
		}
		// Merged: the merge's own pipeline on the target branch, the
		// first of its commit there.
		ref, _ := e.nodeRef(ctx, w.node)
		ps, err := e.cfg.GitLab.ListPipelines(ctx, w.projectID, gitlab.PipelineFilter{Ref: ref, SHA: w.mergeSHA, Source: "any", Limit: 20})
		if err != nil {
			fail(w, err)
			continue
		}
		var p *gitlab.Pipeline
		for i := range ps {
			if ps[i].Source == SourceChildPipeline || (ps[i].SHA != "" && ps[i].SHA != w.mergeSHA) {
				continue
			}
			if p == nil || ps[i].ID < p.ID {
				p = &ps[i]
			}
		}
		if p == nil {
			continue // not created yet: its webhook, or the next round
		}
		ev := PipelineEvent{ProjectID: w.projectID, Project: w.node, PipelineID: p.ID, Status: p.Status, Ref: cmp.Or(p.Ref, ref),
			SHA: w.mergeSHA, Source: p.Source, URL: p.WebURL, At: e.now()}
		ch, err := e.applyReconciled(ctx, ev)
		if err != nil {
			return moved, err
		}
		if ch {
			moved++
		}
	}
	return moved, first
}

// pinsMerged records the merge of w's merge request on its member, still
// waiting for it.
func (e *Engine) pinsMerged(ctx context.Context, w waitingMerge) (bool, error) {
	changed := false
	err := e.update(ctx, nil, func(t *txn) error {
		c, m := t.waitingFor(w)
		if m == nil || m.MergeSHA != "" {
			return nil
		}
		m.MergeSHA = w.mergeSHA
		m.Why = fmt.Sprintf("merge request !%d merged as %s; waiting for its pipeline", w.iid, shortSHA(w.mergeSHA))
		c.touch(t.now)
		changed = true
		project, iid, sha := w.node, w.iid, w.mergeSHA
		t.after = append(t.after, func() {
			t.e.log.Info("pin merge request merged", "project", project, "merge_request", iid, "sha", sha)
		})
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("record the merge of !%d of %s: %w", w.iid, w.node, err)
	}
	return changed, nil
}

// pinsEnded skips w's member, still waiting for its merge request, for
// why, and settles its chain: its descendants whose in-chain upstreams all
// ended skipped are skipped too.
func (e *Engine) pinsEnded(ctx context.Context, w waitingMerge, why string) (bool, error) {
	changed := false
	err := e.update(ctx, nil, func(t *txn) error {
		c, m := t.waitingFor(w)
		if m == nil || m.MergeSHA != "" {
			return nil
		}
		m.State, m.FinishedAt = MemberSkipped, t.now
		m.Why = fmt.Sprintf("skipped: %s; its pins of %s stay as they were, and what is built only on it is not rebuilt for this change",
			why, strings.Join(w.upstreams, ", "))
		c.touch(t.now)
		changed = true
		project := w.node
		t.after = append(t.after, func() { t.e.log.Info("pin merge request not merged; member skipped", "project", project, "why", why) })
		return t.settle(c)
	})
	if err != nil {
		return false, fmt.Errorf("skip %s: %w", w.node, err)
	}
	return changed, nil
}

// waitingFor finds w's member, still waiting for the same merge request,
// and records it as changed.
func (t *txn) waitingFor(w waitingMerge) (*Chain, *Member) {
	for _, c := range t.chains {
		if !c.State.Active() || c.IsValidation() {
			continue
		}
		if m := c.member(w.node); m != nil && m.State == WaitingMerge && m.MergeRequestIID == w.iid {
			c.changed(m)
			return c, m
		}
	}
	return nil, nil
}

// waitsForMerge reports whether a member of c waits for a pin merge
// request opened less than timeout ago: the chain does not expire before
// PinTimeout ends the wait.
func (c *Chain) waitsForMerge(now time.Time, timeout time.Duration) bool {
	for _, m := range c.Members {
		if m.State == WaitingMerge && !m.TriggeredAt.IsZero() && now.Before(m.TriggeredAt.Add(timeout)) {
			return true
		}
	}
	return false
}
