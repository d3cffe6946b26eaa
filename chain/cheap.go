package chain

import (
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// Outcomes of the inbox's cheap path (cheapOutcome): the event was settled
// without the per-event look-ups, because no chain can use it.
const (
	outcomeSettledNoChain      = "settled: no chain holds the project"
	outcomeSettledNoDownstream = "settled: nothing downstream"
)

// cheapOutcome decides, from what the transaction holds in memory (the
// graph, the active chains, the project as cached), whether a pipeline
// event can move no chain, now or later, and so needs none of the
// per-event look-ups of applyPipeline (its action, PipelineSeen): ok is
// then true and outcome is what to record. The inbox marks such events
// processed and goes on. It is the decision ARCHITECTURE.md ("The inbox's
// two paths") explains; what applyPipeline would do with such an event:
//
//   - an event that carries an action id may be depsd's own pipeline (its
//     member moves, its action records the pipeline): never cheap;
//   - a tag's pipeline may be a new release (rescanned first), a merge
//     request's feeds pre-merge validation, and an event whose ref is no
//     node's, or of a project not stored, is ignored by applyPipeline
//     before any look-up: never cheap (nothing to save);
//   - a project with a member in an active chain, any node of it, may be
//     unblocked by a success, its waiting-merge member built by the merge's
//     pipeline, its api pipeline adopted by a resend, or (in a project
//     whose pipelines carry no action id) its member moved through the
//     pipeline id recorded on its action: never cheap;
//   - otherwise a status other than success changes nothing: cheap;
//   - a success starts a chain where its node has something downstream,
//     and is verified for the record where its project publishes images:
//     cheap only without either. Decided with the graph of this
//     transaction, as applyPipeline would: a success of a project that
//     gains dependents at a later scan is caught up as before (CatchUp).
func (t *txn) cheapOutcome(ev PipelineEvent) (outcome string, ok bool, err error) {
	if t.e.fullPathOnly || t.g == nil || ev.Variables[VarActionID] != "" || ev.Tag ||
		isCandidate(ev) || ev.Source == SourceChildPipeline {
		return "", false, nil
	}
	path := deps.NodeProject(ev.Project)
	p, found, err := t.project(path)
	if err != nil || !found {
		return "", false, err
	}
	node, ok := eventNode(p, ev.Ref, ev.Tag, t.e.cfg.Refs)
	if !ok || t.projectInChain(path) {
		return "", false, nil
	}
	if classify(ev.Status) != classSuccess {
		return outcomeSettledNoChain, true, nil
	}
	if t.g.HasDownstream(node) || t.e.verifies(node) {
		return "", false, nil
	}
	return outcomeSettledNoDownstream, true, nil
}

// projectInChain reports whether a node of project path is a member of an
// active chain of the transaction (as changed so far). Members are sorted
// by node key, and a project's nodes other than its default branch share
// the prefix "path@": two binary searches per chain.
func (t *txn) projectInChain(path string) bool {
	prefix := path + "@"
	for _, c := range t.chains {
		if !c.State.Active() {
			continue
		}
		if c.member(path) != nil {
			return true
		}
		i := lowerBound(c.Members, prefix)
		if i < len(c.Members) && strings.HasPrefix(c.Members[i].Project, prefix) {
			return true
		}
	}
	return false
}

// lowerBound is the index of the first member whose node key is not
// before key.
func lowerBound(ms []*Member, key string) int {
	lo, hi := 0, len(ms)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ms[mid].Project < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
