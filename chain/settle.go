package chain

import (
	"fmt"
	"strings"
	"time"
)

// topoOrder returns the members so that every member comes after its
// in-chain upstreams, and every member's in-chain dependents. Members are
// chosen acyclic when the chain starts, but the graph can change under a
// chain that merges later: members left on a cycle come last, in path
// order, and simply wait; cyclic reports them.
func (c *Chain) topoOrder() (order []*Member, down map[*Member][]*Member, cyclic bool) {
	pending := make(map[*Member]int, len(c.Members))
	down = make(map[*Member][]*Member, len(c.Members))
	for _, m := range c.Members {
		for _, u := range m.Upstreams {
			if um := c.member(u); um != nil {
				pending[m]++
				down[um] = append(down[um], m)
			}
		}
	}
	order = make([]*Member, 0, len(c.Members))
	for _, m := range c.Members {
		if pending[m] == 0 {
			order = append(order, m)
		}
	}
	for i := 0; i < len(order); i++ {
		for _, d := range down[order[i]] {
			if pending[d]--; pending[d] == 0 {
				order = append(order, d)
			}
		}
	}
	if len(order) < len(c.Members) {
		cyclic = true
		placed := make(map[*Member]bool, len(order))
		for _, m := range order {
			placed[m] = true
		}
		for _, m := range c.Members {
			if !placed[m] {
				order = append(order, m)
			}
		}
	}
	return order, down, cyclic
}

// settle brings every waiting or blocked member up to date with its
// upstreams, in dependency order, and returns the members that became ready
// to build (their state is now Pending; the caller writes their actions).
// In full mode:
//   - a member with a failed, canceled, stale, blocked or expired in-chain upstream
//     is blocked, and says which project stopped it;
//   - a member whose in-chain upstreams all ended skipped is skipped;
//   - a member whose in-chain upstreams all succeeded or were skipped
//     is ready;
//   - any other is waiting, and says for whom.
//
// It then sets the chain's state. First-level chains have no in-chain
// upstreams, so their waiting members are simply ready.
//
// A member's state follows from what it sees of its upstreams alone
// (seenOf), so once the chain is a fixpoint only the members changed since
// (Chain.changed) and the dependents of those that now look different can
// move: settle looks at just those, in the same order, and at every member
// the first time and while members sit on a cycle (where one pass in order
// is not a fixpoint).
func (c *Chain) settle(now time.Time) []*Member {
	b := c.shape()
	seeds := b.unsettled
	b.unsettled = nil
	var ready []*Member
	// visit settles m and reports whether its dependents see it changed.
	visit := func(m *Member) bool {
		changed, isReady := c.settleMember(m, now)
		if changed {
			c.changed(m)
			b.recount(m)
		}
		if isReady {
			ready = append(ready, m)
		}
		return b.see(m)
	}
	if b.cyclic || !b.settled {
		for _, m := range b.order {
			visit(m)
		}
		b.settled = !b.cyclic
	} else {
		b.walk(seeds, visit)
	}
	// visit's changes went to unsettled, and are settled now.
	b.unsettled = nil
	for m := range seeds {
		b.recount(m)
	}
	c.updateState(now)
	return ready
}

// settleMember brings m up to date with its upstreams if it is waiting or
// blocked, and reports whether it changed and whether it became ready.
func (c *Chain) settleMember(m *Member, now time.Time) (changed, ready bool) {
	if m.State != Waiting && m.State != MemberBlocked {
		return false, false
	}
	state, why := Waiting, ""
	var waitFor, skipped []string
	ups := 0
	for _, u := range m.Upstreams {
		um := c.member(u)
		if um == nil {
			continue
		}
		ups++
		switch {
		case um.State == MemberSkipped:
			skipped = append(skipped, u)
		case um.State == Failed || um.State == Canceled || um.State == Stale:
			if state != MemberBlocked {
				state, why = MemberBlocked, blockedBy(um)
			}
		case um.State == MemberBlocked || um.State == MemberExpired:
			if state != MemberBlocked {
				state, why = MemberBlocked, um.Why
			}
		case um.State != Success:
			waitFor = append(waitFor, u)
		}
	}
	switch {
	case state == MemberBlocked:
	case len(waitFor) > 0:
		why = "waiting for " + strings.Join(waitFor, ", ")
	case ups > 0 && len(skipped) == ups:
		// Settled and unchanged (docs/design/nodes.md): nothing it is
		// built on was built in this chain.
		state, why = MemberSkipped, "skipped: nothing it is built on changed in this chain ("+strings.Join(skipped, ", ")+" skipped)"
		m.FinishedAt = now
	default:
		state, why = Pending, "queued"
		ready = true
	}
	if m.State != state || m.Why != why {
		m.State, m.Why = state, why
		c.touch(now)
		changed = true
	}
	return changed, ready
}

// blockedBy says why a member is blocked by the failed, canceled or
// stale u.
func blockedBy(u *Member) string {
	if u.State == Stale {
		return fmt.Sprintf("blocked: %s was %s", u.Project, u.VerifyDetail)
	}
	verb := "failed"
	if u.State == Canceled {
		verb = "was canceled"
	}
	if u.PipelineID != 0 {
		return fmt.Sprintf("blocked: %s %s (pipeline %d)", u.Project, verb, u.PipelineID)
	}
	return fmt.Sprintf("blocked: %s %s", u.Project, verb)
}

// updateState derives the chain's state from its members' (counted by
// its book, which settle keeps up to date). Expired and merged chains keep
// theirs.
func (c *Chain) updateState(now time.Time) {
	if !c.State.Active() {
		return
	}
	b := c.shape()
	next := Finished
	switch {
	case c.IsValidation():
		next = c.validationState(b)
	case b.unfinished > 0:
		next = Running
	case b.unsuccessful > 0:
		next = Blocked
	}
	if next != c.State {
		c.State = next
		c.touch(now)
	}
	switch {
	case (c.State == Finished || c.State == ChainCanceled) && c.EndedAt.IsZero():
		c.EndedAt = now
		c.touch(now)
	case c.State != Finished && c.State != ChainCanceled && !c.EndedAt.IsZero():
		c.EndedAt = time.Time{} // a blocked chain resumed
		c.touch(now)
	}
}
