package chain

import (
	"container/heap"
	"slices"
	"strings"
)

// book is what the engine keeps with a chain between its transactions, so
// that applying an event costs time in proportion to what the event
// changes, not to the chain's size (a store that caches the active chains
// hands the engine the same *Chain every time; see Tx.ActiveChains):
//
//   - derived from the chain's shape (its members and their in-chain
//     upstreams), computed once and again only after the shape changed
//     (reshaped: members added or removed, upstreams recomputed by a
//     merge): the topological order, every member's in-chain dependents,
//     the members by current action, and counts of member states;
//   - what changed: the members changed since the last save (SaveSet, so
//     that a store writes exactly those) and since the last settle (so
//     that settle looks only at them and their descendants).
//
// Every change to a member in this package goes through Chain.changed (or
// reshaped); code outside the package that changes members gets its chain
// written whole (SaveSet reports all when the chain is not tracked).
type book struct {
	shaped    bool
	order     []*Member             // topological order (topoOrder)
	pos       map[*Member]int       // index in order
	down      map[*Member][]*Member // in-chain dependents
	cyclic    bool                  // members on a cycle: settle looks at every member
	byAction  map[string]*Member    // by ActionID; may be stale, checked on use
	countedAs []MemberState         // by pos: the state counted in the two below
	seenAs    []seen                // by pos: the member as its dependents saw it at the last settle
	// unfinished and unsuccessful count the members by their counted
	// state, for updateState.
	unfinished, unsuccessful int

	tracking bool                 // inside an engine transaction (begin..end)
	all      bool                 // every member must be written at the next save
	changed  map[*Member]struct{} // changed since the last save
	// settled: the chain is a fixpoint of settle apart from the members in
	// unsettled (changed since the last settle).
	settled   bool
	unsettled map[*Member]struct{}

	// statuses are the commit statuses last written for the chain's root
	// pipelines, by pipeline (wantStatuses): unchanged ones are not
	// written again.
	statuses map[int64]statusWant
}

// bk returns c's book, creating an empty one.
func (c *Chain) bk() *book {
	if c.book == nil {
		c.book = &book{}
	}
	return c.book
}

// begin starts an engine transaction's work on c: from here every change
// to it is recorded until end.
func (c *Chain) begin() {
	b := c.bk()
	b.tracking = true
}

// end closes the engine transaction's work on c once it was saved (or
// needed no save): the next transaction starts with nothing to write.
func (c *Chain) end() {
	b := c.bk()
	b.tracking, b.all, b.changed = false, false, nil
	c.dirty = false
}

// changed records that member m of c changed (or may change: the caller
// holds it to change it).
func (c *Chain) changed(m *Member) {
	b := c.bk()
	if b.changed == nil {
		b.changed = map[*Member]struct{}{}
	}
	b.changed[m] = struct{}{}
	if b.unsettled == nil {
		b.unsettled = map[*Member]struct{}{}
	}
	b.unsettled[m] = struct{}{}
}

// reshaped records that c's members or their upstreams changed: what was
// derived from them is recomputed when next needed, the next settle looks
// at every member and the next save writes every member.
func (c *Chain) reshaped() {
	b := c.bk()
	*b = book{tracking: b.tracking, all: true}
}

// rewrite makes the next save write every member of c: for changes made
// without Chain.changed (expiry ends a chain by changing its members).
func (c *Chain) rewrite() {
	c.reshaped()
}

// SaveSet tells a store which members to write to save c: the members
// changed since c was last saved, sorted by project, with all false; or
// all true when every member must be written (c is new, members were added
// or removed, it ended, or it was changed outside an engine transaction:
// such changes are not followed, and c then also forgets what the engine
// derived from it).
func (c *Chain) SaveSet() (members []*Member, all bool) {
	b := c.book
	if b == nil || !b.tracking {
		c.book = nil
		return nil, true
	}
	if b.all {
		return nil, true
	}
	members = make([]*Member, 0, len(b.changed))
	for m := range b.changed {
		members = append(members, m)
	}
	slices.SortFunc(members, func(x, y *Member) int { return strings.Compare(x.Project, y.Project) })
	return members, false
}

// shape computes what is derived from c's shape, if it is not known.
func (c *Chain) shape() *book {
	b := c.bk()
	if b.shaped {
		return b
	}
	b.order, b.down, b.cyclic = c.topoOrder()
	b.pos = make(map[*Member]int, len(b.order))
	b.byAction = make(map[string]*Member, len(b.order))
	b.countedAs = make([]MemberState, len(b.order))
	b.unfinished, b.unsuccessful = 0, 0
	for i, m := range b.order {
		b.pos[m] = i
		if m.ActionID != "" {
			b.byAction[m.ActionID] = m
		}
		b.countedAs[i] = m.State
		b.count(m.State, 1)
	}
	b.seenAs = make([]seen, len(b.order))
	b.shaped = true
	return b
}

// count adds d to the counts of state s.
func (b *book) count(s MemberState, d int) {
	if s.Unfinished() {
		b.unfinished += d
	}
	if s != Success && s != MemberSkipped {
		b.unsuccessful += d
	}
}

// recount brings the state counts up to date for member m.
func (b *book) recount(m *Member) {
	i, ok := b.pos[m]
	if !ok || b.countedAs[i] == m.State {
		return
	}
	b.count(b.countedAs[i], -1)
	b.count(m.State, 1)
	b.countedAs[i] = m.State
}

// byAction returns the member of c whose current action is id, or nil.
func (c *Chain) byAction(id string) *Member {
	b := c.shape()
	if m := b.byAction[id]; m != nil && m.ActionID == id && c.member(m.Project) == m {
		return m
	}
	return nil
}

// indexAction records that m's current action is m.ActionID.
func (c *Chain) indexAction(m *Member) {
	if b := c.book; b != nil && b.shaped && m.ActionID != "" {
		b.byAction[m.ActionID] = m
	}
}

// posHeap orders positions in the topological order, lowest first.
type posHeap []int

func (h posHeap) Len() int           { return len(h) }
func (h posHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h posHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *posHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *posHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// seen is what a member's dependents see of it when they settle: one of
// blocked (with the reason they repeat), succeeded, skipped or not yet.
type seen struct {
	blocked, succeeded, skipped bool
	why                         string
}

// seenOf returns what m's dependents see of it (Chain.settleMember).
func seenOf(m *Member) seen {
	switch m.State {
	case Failed, Canceled, Stale:
		return seen{blocked: true, why: blockedBy(m)}
	case MemberBlocked, MemberExpired:
		return seen{blocked: true, why: m.Why}
	case Success:
		return seen{succeeded: true}
	case MemberSkipped:
		return seen{skipped: true}
	}
	return seen{}
}

// see records what m's dependents see of it now, and reports whether that
// differs from what they saw at the last settle.
func (b *book) see(m *Member) bool {
	i, ok := b.pos[m]
	if !ok {
		return false
	}
	s := seenOf(m)
	if b.seenAs[i] == s {
		return false
	}
	b.seenAs[i] = s
	return true
}

// walk calls visit, in topological order and once each, on the members
// settle must look at when only the members in seeds changed since the
// chain was last a fixpoint of settle: the seeds, and the dependents of
// every member visit reports to look different to them.
func (b *book) walk(seeds map[*Member]struct{}, visit func(*Member) bool) {
	h := make(posHeap, 0, len(seeds))
	queued := make(map[int]bool, len(seeds))
	push := func(m *Member) {
		if i, ok := b.pos[m]; ok && !queued[i] {
			queued[i] = true
			heap.Push(&h, i)
		}
	}
	for m := range seeds {
		push(m)
	}
	for h.Len() > 0 {
		m := b.order[heap.Pop(&h).(int)]
		if visit(m) {
			for _, d := range b.down[m] {
				push(d)
			}
		}
	}
}
