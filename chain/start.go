package chain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// rootSuccess describes a root whose own build already happened: the
// successful pipeline that starts the chain.
type rootSuccess struct {
	pipelineID int64
	url        string
}

// startFull starts a full-mode chain at root, or merges the change into the
// active chain(s) it overlaps. done is nil for a rebuild (the root is built)
// and set when the root's pipeline already succeeded. It returns the chain
// that holds the change, or nil when there is nothing to build.
//
// Merging (a project is a member of at most one active full-mode chain):
//   - every active chain sharing a project with the new one is merged into
//     the oldest of them, which keeps its id; roots, reasons and skipped
//     projects accumulate;
//   - a member already waiting or blocked is unchanged: it is built once,
//     after all its in-chain upstreams;
//   - a member waiting for its pin merge request waits again: its pins
//     move (the same branch and merge request) once its upstreams are
//     built anew;
//   - a member pending, triggered or running is marked requeued (at most
//     one queued build): when its pipeline ends it waits again and is
//     triggered once more after its upstreams, and its descendants wait for
//     that second build;
//   - a member that already finished (success, failed, canceled, stale,
//     skipped) or whose images are being verified is reset to waiting: the change
//     needs a new build;
//   - the root of a successful pipeline is left as it is if it is already a
//     member (its success counts only when it is a build of the chain);
//   - in-chain upstreams are recomputed from the current graph.
func (t *txn) startFull(root string, done *rootSuccess, reason Reason) (*Chain, error) {
	var members []string
	for _, w := range t.g.Waves(root) {
		members = append(members, w...)
	}
	if !slices.Contains(members, root) {
		return nil, fmt.Errorf("%s: %w", root, t.cycleError(root))
	}
	if done != nil && len(members) == 1 {
		return nil, nil // nothing downstream
	}
	set := make(map[string]bool, len(members))
	for _, p := range members {
		set[p] = true
	}

	var over []*Chain
	for _, c := range t.chains {
		if c.Mode != Full || !c.State.Active() || c.IsValidation() {
			continue
		}
		if slices.ContainsFunc(c.Members, func(m *Member) bool { return set[m.Project] }) {
			over = append(over, c)
		}
	}
	var target *Chain
	if len(over) == 0 {
		c, err := t.newChain(Full)
		if err != nil {
			return nil, err
		}
		target = c
	} else {
		slices.SortFunc(over, func(a, b *Chain) int { return int(a.ID - b.ID) })
		target = over[0]
		for _, o := range over[1:] {
			t.absorb(target, o)
		}
	}

	target.addRoot(root)
	target.Reasons = append(target.Reasons, reason)
	for _, s := range t.skipped(root, set) {
		if !slices.Contains(target.Skipped, s) {
			target.Skipped = append(target.Skipped, s)
		}
	}
	for _, p := range members {
		m := target.member(p)
		switch {
		case p == root && done != nil:
			if m == nil {
				target.add(&Member{Project: p, State: Success, PipelineID: done.pipelineID,
					PipelineURL: done.url, FinishedAt: t.now})
			}
		case m == nil:
			target.add(&Member{Project: p, State: Waiting})
		case m.State == Pending:
			// Queued but never claimed: withdraw the action, so the member
			// waits for its new upstreams and is built once, after them.
			withdrawn, err := t.withdraw(m)
			if err != nil {
				return nil, err
			}
			if !withdrawn {
				m.Requeued = true
			}
		case m.State == WaitingMerge:
			// Its pins move again once its upstreams are built anew: the
			// same branch and merge request are updated then. A pin move
			// never sent is withdrawn.
			if _, err := t.withdraw(m); err != nil {
				return nil, err
			}
			m.reset()
		case m.State.Building():
			m.Requeued = true
		case m.State == Success || m.State == Verifying || m.State == Failed || m.State == Canceled || m.State == Stale || m.State == MemberSkipped:
			// Built (or being verified, or failed, canceled, stale,
			// skipped):
			// the change needs a new build.
			m.reset()
		}
	}
	for _, m := range target.Members {
		m.Upstreams = slices.DeleteFunc(t.g.Upstream(m.Project), func(u string) bool { return target.member(u) == nil })
		m.Pinned = slices.DeleteFunc(t.g.PinnedUpstream(m.Project), func(u string) bool { return target.member(u) == nil })
	}
	target.reshaped()
	target.touch(t.now)
	if err := t.settle(target); err != nil {
		return nil, err
	}
	return target, nil
}

// withdraw takes back the action of a pending member if no worker ever
// claimed it (a claimed one may be creating its pipeline right now) or
// this transaction claimed it for the outbox (sent only once committed;
// checkHanded gives it back), and puts the member back to waiting. It
// reports whether it did.
func (t *txn) withdraw(m *Member) (bool, error) {
	a, ok, err := t.tx.Action(t.ctx, m.ActionID)
	if err != nil || !ok || (a.Attempts > 0 && !t.handedHere(a.ID)) || a.State != ActionPending {
		return false, err
	}
	a.State = ActionObsolete
	if err := t.tx.UpdateAction(t.ctx, a); err != nil {
		return false, err
	}
	if a.Kind != ActionPins {
		m.Builds-- // the action built nothing
	}
	m.State, m.Why, m.ActionID = Waiting, "", ""
	return true, nil
}

// absorb merges the active chain o into target.
func (t *txn) absorb(target, o *Chain) {
	for _, m := range o.Members {
		if target.member(m.Project) == nil {
			target.add(m)
		}
	}
	for _, r := range o.Roots {
		target.addRoot(r)
	}
	target.Reasons = append(target.Reasons, o.Reasons...)
	for _, s := range o.Skipped {
		if !slices.Contains(target.Skipped, s) {
			target.Skipped = append(target.Skipped, s)
		}
	}
	o.Members = nil
	o.reshaped()
	o.State, o.MergedInto, o.EndedAt = Merged, target.ID, t.now
	o.touch(t.now)
	target.touch(t.now)
	targetID, oID := target.ID, o.ID
	t.after = append(t.after, func() {
		t.e.log.Info("chains merged", "chain_id", targetID, "merged", oID)
	})
}

// startFirstLevel records a first-level chain for a success of root: its
// direct dependents, each triggered at once. Dependents on a cycle are
// skipped (following them would loop forever).
func (t *txn) startFirstLevel(root string, reason Reason) (*Chain, error) {
	cyc := t.cycles()
	var downs []string
	var skipped []Skip
	for _, d := range t.g.Downstream(root) {
		if path, ok := cyc[d]; ok {
			skipped = append(skipped, Skip{Project: d, Why: "on dependency cycle " + strings.Join(path, " → ") + " (never followed)"})
			continue
		}
		downs = append(downs, d)
	}
	if len(downs) == 0 && len(skipped) == 0 {
		return nil, nil
	}
	c, err := t.newChain(FirstLevel)
	if err != nil {
		return nil, err
	}
	c.Roots, c.Reasons, c.Skipped = []string{root}, []Reason{reason}, skipped
	for _, d := range downs {
		c.add(&Member{Project: d, State: Waiting})
	}
	if err := t.settle(c); err != nil {
		return nil, err
	}
	return c, nil
}

// rebuildOne starts a chain whose only member is root (first-level mode).
func (t *txn) rebuildOne(root string, reason Reason) (*Chain, error) {
	if path, ok := t.cycles()[root]; ok {
		return nil, fmt.Errorf("%s is on dependency cycle %s (never followed)", root, strings.Join(path, " → "))
	}
	c, err := t.newChain(FirstLevel)
	if err != nil {
		return nil, err
	}
	c.Roots, c.Reasons = []string{root}, []Reason{reason}
	c.add(&Member{Project: root, State: Waiting})
	if err := t.settle(c); err != nil {
		return nil, err
	}
	return c, nil
}

// cycles maps every project on a cycle to the cycle reported for it.
func (t *txn) cycles() map[string][]string {
	out := map[string][]string{}
	for _, c := range t.g.Cycles() {
		for _, p := range c[:len(c)-1] {
			if _, ok := out[p]; !ok {
				out[p] = c
			}
		}
	}
	return out
}

func (t *txn) cycleError(p string) error {
	if path, ok := t.cycles()[p]; ok {
		return cycleError(path)
	}
	return fmt.Errorf("%w (reachable only through a dependency cycle)", ErrCycle)
}

// ErrCycle is returned by Rebuild for a project on, or reachable only
// through, a dependency cycle: cycles are never followed.
var ErrCycle = errors.New("on a dependency cycle")

// cycleError names the cycle a project is on and matches ErrCycle.
type cycleError []string

func (c cycleError) Error() string {
	return "on dependency cycle " + strings.Join(c, " → ") + " (never followed)"
}

func (c cycleError) Is(target error) bool { return target == ErrCycle }

// skipped lists what a chain at root leaves out, and why.
func (t *txn) skipped(root string, members map[string]bool) []Skip {
	all := append([]string{root}, t.g.Affected(root)...)
	if len(all) == len(members) {
		return nil
	}
	cyc := t.cycles()
	var out []Skip
	for _, p := range all {
		if members[p] {
			continue
		}
		why := "reachable only through a dependency cycle (never followed)"
		if path, ok := cyc[p]; ok {
			why = "on dependency cycle " + strings.Join(path, " → ") + " (never followed)"
		}
		out = append(out, Skip{Project: p, Why: why})
	}
	return out
}

// lastStart is when new work last entered c: expiry counts from it, so that
// a change merged into an old chain gets the full expiry period.
func (c *Chain) lastStart() time.Time {
	t := c.StartedAt
	for _, r := range c.Reasons {
		if r.At.After(t) {
			t = r.At
		}
	}
	return t
}
