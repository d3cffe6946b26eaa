package chain

import (
	"fmt"
	"strings"
	"time"
)

// topoOrder returns the members so that every member comes after its
// in-chain upstreams. Members are chosen acyclic when the chain starts, but
// the graph can change under a chain that merges later: members left on a
// cycle come last, in path order, and simply wait.
func (c *Chain) topoOrder() []*Member {
	pending := make(map[string]int, len(c.Members))
	down := make(map[string][]*Member, len(c.Members))
	for _, m := range c.Members {
		for _, u := range m.Upstreams {
			if c.member(u) != nil {
				pending[m.Project]++
				down[u] = append(down[u], m)
			}
		}
	}
	order := make([]*Member, 0, len(c.Members))
	for _, m := range c.Members {
		if pending[m.Project] == 0 {
			order = append(order, m)
		}
	}
	for i := 0; i < len(order); i++ {
		for _, d := range down[order[i].Project] {
			if pending[d.Project]--; pending[d.Project] == 0 {
				order = append(order, d)
			}
		}
	}
	if len(order) < len(c.Members) {
		placed := make(map[string]bool, len(order))
		for _, m := range order {
			placed[m.Project] = true
		}
		for _, m := range c.Members {
			if !placed[m.Project] {
				order = append(order, m)
			}
		}
	}
	return order
}

// settle brings every waiting or blocked member up to date with its
// upstreams, in dependency order, and returns the members that became ready
// to build (their state is now Pending; the caller writes their actions).
// In full mode:
//   - a member with a failed, canceled, blocked or expired in-chain upstream
//     is blocked, and says which project stopped it;
//   - a member whose in-chain upstreams all succeeded is ready;
//   - any other is waiting, and says for whom.
//
// It then sets the chain's state. First-level chains have no in-chain
// upstreams, so their waiting members are simply ready.
func (c *Chain) settle(now time.Time) []*Member {
	var ready []*Member
	for _, m := range c.topoOrder() {
		if m.State != Waiting && m.State != MemberBlocked {
			continue
		}
		state, why := Waiting, ""
		var waitFor []string
		for _, u := range m.Upstreams {
			um := c.member(u)
			if um == nil {
				continue
			}
			switch {
			case um.State == Failed || um.State == Canceled:
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
		default:
			state, why = Pending, "queued"
			ready = append(ready, m)
		}
		if m.State != state || m.Why != why {
			m.State, m.Why = state, why
			c.touch(now)
		}
	}
	c.updateState(now)
	return ready
}

// blockedBy says why a member is blocked by the failed or canceled u.
func blockedBy(u *Member) string {
	verb := "failed"
	if u.State == Canceled {
		verb = "was canceled"
	}
	if u.PipelineID != 0 {
		return fmt.Sprintf("blocked: %s %s (pipeline %d)", u.Project, verb, u.PipelineID)
	}
	return fmt.Sprintf("blocked: %s %s", u.Project, verb)
}

// updateState derives the chain's state from its members'. Expired and
// merged chains keep theirs.
func (c *Chain) updateState(now time.Time) {
	if !c.State.Active() {
		return
	}
	next := Finished
	for _, m := range c.Members {
		switch {
		case m.State.Unfinished():
			next = Running
		case m.State != Success && next == Finished:
			next = Blocked
		}
		if next == Running {
			break
		}
	}
	if next != c.State {
		c.State = next
		c.touch(now)
	}
	switch {
	case c.State == Finished && c.EndedAt.IsZero():
		c.EndedAt = now
		c.touch(now)
	case c.State != Finished && !c.EndedAt.IsZero():
		c.EndedAt = time.Time{} // a blocked chain resumed
		c.touch(now)
	}
}
