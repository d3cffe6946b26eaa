package chain

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// Digest pins (docs/chains.md, "Pinned bases"). A member that pins an
// in-chain upstream by digest is not rebuilt when that upstream changed:
// a rebuild would build on the pin again. Once its in-chain upstreams
// succeeded (and were verified), depsd opens one merge request in its
// project (branch PinBranch) moving each pin to the upstream's new digest
// (an outbox action of kind ActionPins, sendpins.go), and the member is
// WaitingMerge. When the merge request is merged, the merge's own pipeline
// on the target branch is the member's build (matched by the merge's
// commit, applyToMerge) and the chain goes on below it; closed unmerged,
// or not merged within Config.PinTimeout, the member ends MemberSkipped.

// WaitingMerge: the member pins an in-chain upstream by digest, its
// upstreams succeeded, and the merge request moving its pins is being
// opened or waits to be merged (MergeRequest). Unfinished: its
// descendants wait. It leaves for Triggered/Running when the merge's
// pipeline on the target branch appears (its success counts as the
// member's build), for MemberSkipped when the merge request is closed
// unmerged or Config.PinTimeout passes, and for Pending when the target
// branch already pins the new digests (nothing to move: it is built).
const WaitingMerge MemberState = "waiting-merge"

// PinMode is what depsd does for a member that pins a changed upstream
// (pins.mode, per project in pins.projects).
type PinMode string

const (
	// PinMergeRequest (the default): open a merge request moving the pins;
	// someone merges it.
	PinMergeRequest PinMode = "merge-request"
	// PinAutoMerge: the same, set to merge when its pipeline succeeds
	// (GitLab's auto-merge), where the project allows it.
	PinAutoMerge PinMode = "auto-merge"
	// PinIgnore: no merge request; the member is skipped, and so are
	// the descendants nothing else of the chain changed.
	PinIgnore PinMode = "ignore"
)

// PinModes are the modes, as the configuration names them.
func PinModes() []PinMode { return []PinMode{PinMergeRequest, PinAutoMerge, PinIgnore} }

// PinRules say each project's PinMode: the first override whose Match (a
// project path or a glob, * within a segment) matches, else Default (else
// PinMergeRequest).
type PinRules struct {
	Default   PinMode
	Overrides []PinOverride
}

// PinOverride is the mode of the projects Match matches.
type PinOverride struct {
	Match string
	Mode  PinMode
}

// For returns the mode of project (a path; a node's project is looked up).
func (r PinRules) For(project string) PinMode {
	project = deps.NodeProject(project)
	for _, o := range r.Overrides {
		if ok, _ := path.Match(o.Match, project); ok {
			return o.Mode
		}
	}
	if r.Default != "" {
		return r.Default
	}
	return PinMergeRequest
}

// ActionKind says what an outbox action does.
type ActionKind string

const (
	// ActionPipeline ("", as actions were before pins) creates the
	// member's pipeline.
	ActionPipeline ActionKind = ""
	// ActionPins opens or updates the merge request that moves the
	// member's pins (Action.Pins).
	ActionPins ActionKind = "pins"
)

// PinsRequest is what a pins action moves, and what its send did.
type PinsRequest struct {
	// File is the Containerfile holding the pins, on Action.Ref (the
	// target branch); Default says the target is the default branch.
	File    string  `json:"file"`
	Default bool    `json:"default,omitempty"`
	Mode    PinMode `json:"mode"`
	// Upstreams are the in-chain upstreams whose pins move, each with
	// the digests its verified build published, by image (host/path:tag).
	Upstreams []PinUpstream `json:"upstreams"`
	// Done is what the send did, once it did.
	Done *PinsDone `json:"done,omitempty"`
}

// PinUpstream is an upstream whose pins move, and its new images.
type PinUpstream struct {
	Node   string            `json:"node"`
	Images map[string]string `json:"images"`
}

// PinsDone is the outcome of a pins action.
type PinsDone struct {
	// MergeRequest is the merge request's iid (0 when nothing moved) and
	// URL; Commit the commit on its source branch.
	MergeRequest int64  `json:"merge_request,omitempty"`
	URL          string `json:"url,omitempty"`
	Commit       string `json:"commit,omitempty"`
	// Moved are the pins the merge request moves.
	Moved []deps.PinMoved `json:"moved,omitempty"`
	// Nothing: the target branch already pins the new digests; the member
	// is built instead.
	Nothing bool `json:"nothing,omitempty"`
}

// PinBranch is the branch depsd writes the pin moves for target to: its
// own, never a protected one. One per project and target branch, however
// many pins move.
func PinBranch(target string, isDefault bool) string {
	if isDefault {
		return "depsd/pins"
	}
	return "depsd/pins-" + target
}

// Write is one thing depsd wrote to GitLab for a chain (a commit, a
// merge request opened, updated, set to merge or closed, a note): what
// `depsd chains ID` and the chain's page list.
type Write struct {
	ChainID int64     `json:"-"`
	At      time.Time `json:"at"`
	Project string    `json:"project"`
	// Kind is commit, merge-request, note or close.
	Kind   string `json:"kind"`
	Ref    string `json:"ref,omitempty"`
	Detail string `json:"detail"`
	URL    string `json:"url,omitempty"`
}

// pinnedChanged returns the in-chain upstreams of m whose pins move:
// those m pins that succeeded in this chain.
func (c *Chain) pinnedChanged(m *Member) []*Member {
	var out []*Member
	for _, u := range m.Pinned {
		if um := c.member(u); um != nil && um.State == Success && slices.Contains(m.Upstreams, u) {
			out = append(out, um)
		}
	}
	return out
}

// enqueuePins decides for a ready member that pins an upstream that
// changed: a pins action instead of a build (the member is WaitingMerge),
// or the member skipped with the reason. It reports handled false when
// the member is built as any other (none of its pins moves), and done
// false when the member ended (skipped) and its chain must settle again.
func (t *txn) enqueuePins(c *Chain, m *Member) (handled, done bool, err error) {
	if c.Mode != Full || len(m.Pinned) == 0 || c.IsValidation() {
		return false, true, nil
	}
	ups := c.pinnedChanged(m)
	if len(ups) == 0 {
		return false, true, nil
	}
	names := make([]string, len(ups))
	for i, u := range ups {
		names[i] = u.Project
	}
	skip := func(why string) (bool, bool, error) {
		m.State, m.Why, m.FinishedAt = MemberSkipped, "skipped: "+why, t.now
		m.ActionID = ""
		c.changed(m)
		c.touch(t.now)
		return true, false, nil
	}
	mode := t.e.cfg.Pins.For(m.Project)
	if mode == PinIgnore {
		return skip(fmt.Sprintf("it pins %s by digest and pins: ignore applies to it (no merge request; its pins stay)", strings.Join(names, ", ")))
	}
	if _, kind, _ := deps.ParseNode(m.Project); kind == deps.NodeTags {
		return skip(fmt.Sprintf("it pins %s by digest, and a release's pins move in a new release (depsd writes no tag)", strings.Join(names, ", ")))
	}
	req := &PinsRequest{Mode: mode}
	for _, u := range ups {
		if len(u.Images) == 0 && u.Verified == "" && t.e.verifies(u.Project) {
			// A root built before the chain started, or a success under
			// images.verify: report: its verification is queued, and
			// its new digest is what the pin moves to
			// (applyVerification settles m again).
			m.State, m.Why = Waiting, fmt.Sprintf("waiting for the new image of %s to be verified: its pin moves to that digest", u.Project)
			c.changed(m)
			c.touch(t.now)
			return true, true, nil
		}
		if len(u.Images) == 0 {
			return skip(fmt.Sprintf("it pins %s by digest, whose new image digest depsd did not read (its images were not verified), so the pin cannot move", u.Project))
		}
		req.Upstreams = append(req.Upstreams, PinUpstream{Node: u.Project, Images: u.Images})
	}
	p, ref, ok, err := t.node(m.Project)
	if err != nil {
		return true, true, err
	}
	if !ok {
		m.State, m.Why, m.FinishedAt = Failed, "project is no longer in scope (or no longer has this ref)", t.now
		c.changed(m)
		c.touch(t.now)
		return true, false, nil
	}
	req.File, req.Default = p.Files[m.Project], ref == p.DefaultBranch
	if req.File == "" {
		return skip(fmt.Sprintf("it pins %s by digest, but depsd knows no Containerfile of it to move the pins in", strings.Join(names, ", ")))
	}
	a := Action{
		ID: newActionID(), Kind: ActionPins, Pins: req, ChainID: c.ID, Project: m.Project, ProjectID: p.ID, Ref: ref,
		Upstreams: names, State: ActionPending, NextAttemptAt: t.now, CreatedAt: t.now,
	}
	if err := t.addAction(c, &a); err != nil {
		return true, true, err
	}
	m.State, m.ProjectID, m.ActionID = WaitingMerge, p.ID, a.ID
	m.Why = fmt.Sprintf("opening a merge request on %s that moves its pins of %s", PinBranch(ref, req.Default), strings.Join(names, ", "))
	m.MergeRequest, m.MergeRequestIID, m.MergeSHA = "", 0, ""
	m.PipelineID, m.PipelineURL, m.TriggeredAt, m.FinishedAt = 0, "", time.Time{}, time.Time{}
	c.changed(m)
	c.indexAction(m)
	c.touch(t.now)
	chainID, project, actionID := c.ID, m.Project, a.ID
	t.after = append(t.after, func() {
		t.e.log.Info("pin move queued", "chain_id", chainID, "project", project, "action_id", actionID)
	})
	return true, true, nil
}

// waitsForAction reports whether a member in state s still wants its
// current action sent: a build pending, or a pin move not yet sent.
func waitsForAction(s MemberState) bool { return s == Pending || s == WaitingMerge }

// applyToMerge applies a pipeline event no action of depsd's claims to
// the member whose pin merge request it builds: the merge's pipeline on
// the target branch, matched by the merge's commit (never by an action
// id: depsd did not create it), becomes the member's build, once. While
// the merge request is open (depsd has not yet seen it merged), a
// pipeline of the member's branch is held: the reconciler reads the
// merge request, and then the merge's pipelines.
func (t *txn) applyToMerge(ev PipelineEvent) (handled, succeeded, changed bool, err error) {
	if ev.Tag || ev.SHA == "" {
		return false, false, false, nil
	}
	for _, c := range t.chains {
		if !c.State.Active() || c.Mode != Full || c.IsValidation() {
			continue
		}
		m := c.member(ev.Project)
		if m == nil || m.MergeRequestIID == 0 {
			continue
		}
		switch {
		case m.State == WaitingMerge && m.MergeSHA != "" && ev.SHA == m.MergeSHA:
			// The merge's pipeline: the member's build from here.
			c.changed(m)
			m.ActionID = ""
			m.PipelineID, m.PipelineURL, m.TriggeredAt = ev.PipelineID, ev.URL, t.now
			m.State, m.Why = Triggered, fmt.Sprintf("merge request !%d merged; pipeline %d builds it", m.MergeRequestIID, ev.PipelineID)
			m.Builds++
			_, succ := m.applyStatus(ev.PipelineID, ev.Status, ev.URL, t.now)
			if succ {
				if err := t.verifyAfter(c, m); err != nil {
					return false, false, false, err
				}
			}
			c.touch(t.now)
			if err := t.settle(c); err != nil {
				return false, false, false, err
			}
			return true, succ, true, nil
		case m.State.Building() && m.ActionID == "" && m.MergeSHA != "" && m.PipelineID == ev.PipelineID:
			c.changed(m)
			ch, succ := m.applyStatus(ev.PipelineID, ev.Status, ev.URL, t.now)
			if succ {
				if err := t.verifyAfter(c, m); err != nil {
					return false, false, false, err
				}
			}
			if ch {
				c.touch(t.now)
				if err := t.settle(c); err != nil {
					return false, false, false, err
				}
			}
			return true, succ, ch, nil
		case m.State == WaitingMerge && m.MergeSHA == "":
			// Held: the reconciler reads the merge request and, once
			// merged, the merge's pipeline (reconcilePins).
			t.after = append(t.after, t.e.NotifyPins)
			return true, false, false, nil
		}
	}
	return false, false, false, nil
}
