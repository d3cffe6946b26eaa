package chain

import (
	"fmt"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// Outcomes of applying a pipeline event, recorded with the event and passed
// to the Observer.
const (
	outcomeAdvanced  = "advanced"
	outcomeNoChange  = "no change"
	outcomeStarted   = "started chain"
	outcomeMerged    = "merged into chain"
	outcomeUnblocked = "unblocked"
)

// applyPipeline applies one pipeline status change, from a webhook, the
// reconciler or the outbox worker, and returns a short outcome:
//
//   - an event is about the node of its ref (eventNode): the project's
//     default branch, a branch it follows, or its release tags; events of
//     other refs and of projects not in the store are ignored;
//   - an event of a pipeline depsd created (matched by its DEPSD_ACTION_ID
//     variable, of an action of the event's own project, or by its pipeline
//     id) moves the member whose current action it is (Member.applyStatus),
//     and settles its chain; another project's action id makes a pipeline
//     no more depsd's than one without;
//   - a pipeline of the commit that merged a member's pin merge request,
//     on its branch, is that member's build (applyToMerge), counted once;
//     while the merge request is open, a pipeline of the member's branch
//     is held (ReconcilePins decides);
//   - a success that is no member's current build unblocks the project
//     where it failed, was canceled or is stale in an active chain (a
//     retry or a new pipeline, whoever created it);
//   - a success is verified where the project publishes images
//     (verify.go): a member's under the configured VerifyMode, any other
//     for the record only;
//   - in full mode, a success of a pipeline depsd did not create that
//     unblocked nothing starts a chain at the project (merged into
//     overlapping chains);
//   - in first-level mode, every success of a project, depsd's included,
//     triggers its direct dependents.
func (t *txn) applyPipeline(ev PipelineEvent) (string, error) {
	p, ok, err := t.project(deps.NodeProject(ev.Project))
	if err != nil {
		return "", err
	}
	if !ok {
		return "ignored: project not in scope", nil
	}
	if isCandidate(ev) {
		// A merge request pipeline: its image is a candidate, never a
		// release, whatever its ref (premerge.go).
		return t.applyCandidate(ev, p)
	}
	node, ok := eventNode(p, ev.Ref, ev.Tag, t.e.cfg.Refs)
	switch {
	case !ok && ev.Tag:
		return "ignored: not a release tag", nil
	case !ok:
		// A branch no node follows may be a merge request's source.
		return t.queueBranchCandidate(ev, p)
	}
	// From here on the event is about its node: members, roots and
	// actions are nodes.
	ev.Project = node
	if ev.Source == SourceChildPipeline {
		// A child pipeline reports beside its parent; the parent's status
		// is the project's.
		return "ignored: child pipeline", nil
	}

	// A pipeline depsd created names its action: one look-up by id. Any
	// other is looked up by its id, together with whether it counted or
	// started a chain before; an event that named its action reads those
	// only if it gets to them. Nothing below changes the answers before
	// the event's changes are saved.
	actionID := ev.Variables[VarActionID]
	var seen PipelineSeen
	if actionID != "" {
		seen.Action, seen.HasAction, err = t.tx.Action(t.ctx, actionID)
		if err == nil && seen.HasAction && !sameProject(seen.Action, ev) {
			// Another project's action id (anyone who may set variables
			// in this project can copy one): this pipeline is not that
			// build, nor depsd's. It is looked at as any other is.
			a := seen.Action
			t.after = append(t.after, func() {
				t.e.log.Warn("pipeline carries the action id of another project; not ours", "action_id", a.ID,
					"action_project", a.Project, "project", ev.Project, "pipeline_id", ev.PipelineID)
			})
			actionID = ""
		}
	}
	if actionID == "" {
		seen, err = t.tx.PipelineSeen(t.ctx, ev.PipelineID)
	}
	if err != nil {
		return "", fmt.Errorf("find action of pipeline %d: %w", ev.PipelineID, err)
	}
	seenAll := actionID == ""
	readSeen := func() error {
		if seenAll {
			return nil
		}
		seenAll = true
		s, err := t.tx.PipelineSeen(t.ctx, ev.PipelineID)
		seen.Counted, seen.Started = s.Counted, s.Started
		return err
	}
	ours := actionID != "" || seen.HasAction
	if !ours && t.e.cfg.Mode == Full {
		// The merge of a pin merge request: its pipeline is the member's
		// build (pins.go).
		h, s, ch, err := t.applyToMerge(ev)
		if err != nil {
			return "", err
		}
		if h {
			switch {
			case s || ch:
				return outcomeAdvanced, nil
			case classify(ev.Status) == classSuccess:
				// Verified for the record (a build of the branch
				// the merge request targets), acted on by nothing.
				if err := t.verifyOutside(ev, p.ID); err != nil {
					return "", err
				}
				return "held: its pin merge request decides", nil
			}
			return outcomeNoChange, nil
		}
	}
	if !ours && ev.Source == "api" && classify(ev.Status) == classSuccess && (p.Ident == IdentInputs || p.Ident == IdentNone) {
		// In a project whose pipelines carry no action id, an api
		// pipeline nobody recorded may be the one a send created before
		// its record was lost (a crash): its resend adopts it, and the
		// reconciler then reports its status. It starts nothing.
		if unrecorded, err := t.sendUnrecorded(ev.Project); err != nil || unrecorded {
			return "ignored: api pipeline a resend may adopt", err
		}
	}
	handled, succeeded, changed := false, false, false
	if seen.HasAction {
		if h, s, ch, err := t.applyToAction(seen.Action, ev); err != nil {
			return "", err
		} else {
			handled, succeeded, changed = h, s, ch
		}
	}

	if classify(ev.Status) != classSuccess || (handled && !succeeded) {
		if changed {
			return outcomeAdvanced, nil
		}
		return outcomeNoChange, nil
	}

	unblocked := false
	if !handled && t.e.cfg.Mode == Full {
		// The same success can come twice (the reconciler and a late
		// webhook, or a retried job of that pipeline): once it counted
		// for a member, it starts nothing more.
		if err := readSeen(); err != nil || seen.Counted {
			return "ignored: pipeline already handled", err
		}
		if unblocked, err = t.unblock(ev); err != nil {
			return "", err
		}
	}
	reason := Reason{Kind: ReasonPipeline, Project: ev.Project, PipelineID: ev.PipelineID,
		Detail: fmt.Sprintf("pipeline %d succeeded", ev.PipelineID), At: t.now}
	switch {
	case t.e.cfg.Mode == FirstLevel:
		if err := readSeen(); err != nil || seen.Started {
			return "ignored: pipeline already handled", err
		}
		if !handled {
			if err := t.verifyOutside(ev, p.ID); err != nil {
				return "", err
			}
		}
		c, err := t.startFirstLevel(ev.Project, reason)
		if err != nil || c == nil {
			return "no dependents", err
		}
		if err := t.addChainStatus(c, ev, p.ID); err != nil {
			return "", err
		}
		return outcomeStarted, nil
	case handled:
		return outcomeAdvanced, nil
	case unblocked:
		return outcomeUnblocked, nil
	case ours:
		return "ignored: pipeline created by depsd", nil
	case !t.g.Has(ev.Project):
		return "ignored: project not in the graph", nil
	}
	if err := readSeen(); err != nil || seen.Started {
		return "ignored: pipeline already handled", err
	}
	if err := t.verifyOutside(ev, p.ID); err != nil {
		return "", err
	}
	before := len(t.chains)
	c, err := t.startFull(ev.Project, &rootSuccess{pipelineID: ev.PipelineID, url: ev.URL}, reason)
	if err != nil {
		// A root on a cycle: reported by scans; the event is handled.
		return "ignored: " + err.Error(), nil
	}
	if c == nil {
		return "no dependents", nil
	}
	if err := t.addChainStatus(c, ev, p.ID); err != nil {
		return "", err
	}
	if len(t.chains) > before {
		return outcomeStarted, nil
	}
	return outcomeMerged, nil
}

// sameProject reports whether ev is of a's project: by id where both
// have one (a renamed project keeps its id), else by path.
func sameProject(a Action, ev PipelineEvent) bool {
	if a.ProjectID != 0 && ev.ProjectID != 0 {
		return a.ProjectID == ev.ProjectID
	}
	return strings.EqualFold(deps.NodeProject(a.Project), deps.NodeProject(ev.Project))
}

// applyToAction applies ev to the member whose action a is. It records the
// pipeline on the action if the worker has not yet (the webhook can arrive
// before the create call returned), and on the member if it is still the
// member's current action.
func (t *txn) applyToAction(a Action, ev PipelineEvent) (handled, succeeded, changed bool, err error) {
	if a.PipelineID != 0 && ev.PipelineID != 0 && a.PipelineID != ev.PipelineID {
		// A second pipeline with the same action id: only if a create was
		// duplicated; the first one recorded is the member's.
		actionID := a.ID
		t.after = append(t.after, func() {
			t.e.log.Warn("second pipeline for one action", "action_id", actionID, "pipeline_id", ev.PipelineID, "project", ev.Project)
		})
		return false, false, false, nil
	}
	if a.State != ActionSent || a.PipelineID == 0 {
		a.State, a.PipelineID, a.PipelineURL, a.SentAt, a.LeaseUntil = ActionSent, ev.PipelineID, ev.URL, t.now, time.Time{}
		a.LastError = ""
		if err := t.tx.UpdateAction(t.ctx, a); err != nil {
			return false, false, false, fmt.Errorf("record pipeline of action %s: %w", a.ID, err)
		}
	}
	c, m := t.memberByAction(a.ID)
	if m == nil {
		return false, false, false, nil // the member moved on (expired, reset by a merge)
	}
	if m.PipelineID == 0 {
		m.PipelineID, m.PipelineURL, m.TriggeredAt = ev.PipelineID, ev.URL, t.now
		if m.State == Pending {
			m.State, m.Why = Triggered, ""
		}
		c.touch(t.now)
		changed = true
	}
	if m.PipelineID != ev.PipelineID {
		return false, false, changed, nil
	}
	ch, succ := m.applyStatus(ev.PipelineID, ev.Status, ev.URL, t.now)
	if succ {
		if err := t.verifyAfter(c, m); err != nil {
			return false, false, false, err
		}
	}
	if ch || changed {
		c.touch(t.now)
		if err := t.settle(c); err != nil {
			return false, false, false, err
		}
	}
	return true, succ, ch || changed, nil
}

// unblock marks the project succeeded where it failed or was canceled in an
// active chain, and settles those chains: its descendants go on.
func (t *txn) unblock(ev PipelineEvent) (bool, error) {
	any := false
	for _, c := range t.chains {
		if !c.State.Active() || c.IsValidation() {
			continue // a validation's failure is its answer
		}
		m := c.member(ev.Project)
		if m == nil || (m.State != Failed && m.State != Canceled && m.State != Stale) {
			continue
		}
		if ev.PipelineID < m.PipelineID {
			// GitLab's pipeline ids only grow: an older pipeline was built
			// before this chain's change (a retry keeps its id).
			continue
		}
		m.State, m.Why, m.Requeued, m.ActionID = Success, fmt.Sprintf("succeeded in pipeline %d", ev.PipelineID), false, ""
		m.PipelineID, m.PipelineURL, m.FinishedAt = ev.PipelineID, ev.URL, t.now
		m.Verified, m.VerifyDetail = "", ""
		c.changed(m)
		c.touch(t.now)
		if err := t.verifyAfter(c, m); err != nil {
			return false, err
		}
		if err := t.settle(c); err != nil {
			return false, err
		}
		any = true
	}
	return any, nil
}

// sendUnrecorded reports whether an action of project in an active chain
// was claimed but has no pipeline recorded yet.
func (t *txn) sendUnrecorded(project string) (bool, error) {
	for _, c := range t.chains {
		if !c.State.Active() {
			continue
		}
		for _, m := range c.Members {
			if m.Project != project || m.State != Pending || m.ActionID == "" {
				continue
			}
			a, ok, err := t.tx.Action(t.ctx, m.ActionID)
			if err != nil {
				return false, fmt.Errorf("read action %s: %w", m.ActionID, err)
			}
			if ok && a.State == ActionPending && a.Attempts > 0 {
				return true, nil
			}
		}
	}
	return false, nil
}
