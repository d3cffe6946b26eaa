package chain_test

import (
	"errors"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

var ann = chain.Actor{Name: "ann", ID: 101, Address: "192.0.2.7"}

// TestRetryUnblocksTheChain: a retry of a failed member builds it again
// (one new pipeline, through the outbox), its descendants wait for it
// instead of being blocked, and the chain finishes once it succeeds.
func TestRetryUnblocksTheChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	e.finish("a", "failed")
	v := e.wantStates(id, "a=failed b=blocked base=success")
	if v.State != chain.Blocked {
		t.Fatalf("chain is %s, want blocked", v.State)
	}
	if err := e.engine.Retry(e.ctx, id, "b", ann); !errors.Is(err, chain.ErrNotNow) {
		t.Errorf("retry of a blocked member: %v, want ErrNotNow", err)
	}
	if err := e.engine.Retry(e.ctx, id, "nope", ann); !errors.Is(err, chain.ErrNotFound) {
		t.Errorf("retry of a non-member: %v, want ErrNotFound", err)
	}
	if err := e.engine.Retry(e.ctx, id, "a", ann); err != nil {
		t.Fatal(err)
	}
	v = e.wantStates(id, "a=pending b=waiting base=success")
	if v.State != chain.Running {
		t.Errorf("chain is %s after the retry, want running", v.State)
	}
	// Twice asked, built once: the member is no longer failed.
	if err := e.engine.Retry(e.ctx, id, "a", ann); !errors.Is(err, chain.ErrNotNow) {
		t.Errorf("second retry: %v, want ErrNotNow", err)
	}
	if n := e.send(); n != 1 {
		t.Fatalf("sent %d after the retry, want 1", n)
	}
	e.wantCounts(map[string]int{"a": 2})
	e.finish("a", "success")
	e.send()
	e.finish("b", "success")
	v = e.wantStates(id, "a=success b=success base=success")
	if v.State != chain.Finished {
		t.Errorf("chain is %s, want finished", v.State)
	}
	if m := member(v, "a"); m.Builds != 2 {
		t.Errorf("a's builds = %d, want 2", m.Builds)
	}
	e.wantCounts(map[string]int{"base": 1, "a": 2, "b": 1})
	log, err := e.engine.Audit(e.ctx, chain.AuditFilter{ChainID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != chain.AuditRetry || log[0].Target != "a" || log[0].Actor != "ann" ||
		log[0].ActorID != 101 || log[0].Address != "192.0.2.7" || log[0].At.IsZero() || log[0].Outcome != chain.OutcomeDone {
		t.Errorf("audit log = %+v, want one retry of a by ann", log)
	}
}

// TestSkipSettlesAMemberUnchanged: a skipped member is final and counts
// as settled: a descendant with another built upstream is built, one
// whose in-chain upstreams all ended skipped is skipped too, and a chain
// of successes and skips is finished.
func TestSkipSettlesAMemberUnchanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>x", "a>d", "x>d", "a>only", "only>leaf")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	e.finish("a", "failed")
	e.finish("x", "success")
	e.wantStates(id, "a=failed base=success d=blocked leaf=blocked only=blocked x=success")
	if err := e.engine.Skip(e.ctx, id, "a", "  ", ann); !errors.Is(err, chain.ErrReasonRequired) {
		t.Errorf("skip without a reason: %v, want ErrReasonRequired", err)
	}
	if err := e.engine.Skip(e.ctx, id, "x", "why not", ann); !errors.Is(err, chain.ErrNotNow) {
		t.Errorf("skip of a succeeded member: %v, want ErrNotNow", err)
	}
	if err := e.engine.Skip(e.ctx, id, "a", "flaky test, fixed upstream tomorrow", ann); err != nil {
		t.Fatal(err)
	}
	v := e.wantStates(id, "a=skipped base=success d=pending leaf=skipped only=skipped x=success")
	if m := member(v, "a"); !strings.Contains(m.Why, "ann") || !strings.Contains(m.Why, "flaky test") {
		t.Errorf("a's why = %q, want who and why", m.Why)
	}
	if m := member(v, "only"); !strings.Contains(m.Why, "nothing it is built on changed") {
		t.Errorf("only's why = %q", m.Why)
	}
	// Final: a late success of a's failed pipeline (a retry on GitLab)
	// changes nothing.
	e.finish("a", "success")
	e.wantStates(id, "a=skipped base=success d=pending leaf=skipped only=skipped x=success")
	e.send()
	e.finish("d", "success")
	v = e.wantStates(id, "a=skipped base=success d=success leaf=skipped only=skipped x=success")
	if v.State != chain.Finished || v.Ended == nil {
		t.Errorf("chain is %s, want finished", v.State)
	}
	e.wantCounts(map[string]int{"a": 1, "d": 1, "only": 0, "leaf": 0})
	log, err := e.engine.Audit(e.ctx, chain.AuditFilter{ChainID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Action != chain.AuditSkip || log[0].Reason != "flaky test, fixed upstream tomorrow" {
		t.Errorf("audit log = %+v", log)
	}
}

// TestSkipABlockedMember: a blocked member may be skipped too; its
// descendants stop waiting for it.
func TestSkipABlockedMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b", "b>c")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	e.finish("a", "canceled")
	e.wantStates(id, "a=canceled b=blocked base=success c=blocked")
	if err := e.engine.Skip(e.ctx, id, "b", "b is retired", ann); err != nil {
		t.Fatal(err)
	}
	v := e.wantStates(id, "a=canceled b=skipped base=success c=skipped")
	if v.State != chain.Blocked {
		t.Errorf("chain is %s, want blocked (a is still canceled)", v.State)
	}
	if err := e.engine.Skip(e.ctx, id, "a", "not needed", ann); err != nil {
		t.Fatal(err)
	}
	if v := e.chain(id); v.State != chain.Finished {
		t.Errorf("chain is %s, want finished", v.State)
	}
}

// TestCancelWithdrawsUnsentActions: a canceled chain's pending actions
// are never sent, its running pipelines are no longer waited for, and it
// reacts to nothing after.
func TestCancelWithdrawsUnsentActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>b", "a>c")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	e.send()
	e.finish("a", "running")
	id2 := e.rebuild("b") // merges: b's running build gets one more queued
	if id2 != id {
		t.Fatalf("rebuild of b made chain %d, want it merged into %d", id2, id)
	}
	if err := e.engine.Cancel(e.ctx, id, "wrong base pushed", ann); err != nil {
		t.Fatal(err)
	}
	v := e.wantStates(id, "a=canceled b=canceled base=success c=canceled")
	if v.State != chain.ChainCanceled || v.Ended == nil {
		t.Fatalf("chain is %s, want canceled", v.State)
	}
	if m := member(v, "a"); !strings.Contains(m.Why, "left running") || !strings.Contains(m.Why, "ann") {
		t.Errorf("a's why = %q", m.Why)
	}
	if n := e.send(); n != 0 {
		t.Errorf("sent %d after the cancel, want 0", n)
	}
	e.finish("a", "success")
	e.finish("b", "success")
	e.send()
	e.wantStates(id, "a=canceled b=canceled base=success c=canceled")
	e.wantCounts(map[string]int{"base": 1, "a": 1, "b": 1, "c": 0})
	if err := e.engine.Cancel(e.ctx, id, "again", ann); !errors.Is(err, chain.ErrNotNow) {
		t.Errorf("cancel of a canceled chain: %v, want ErrNotNow", err)
	}
	if err := e.engine.Cancel(e.ctx, 999, "", ann); !errors.Is(err, chain.ErrNotFound) {
		t.Errorf("cancel of an unknown chain: %v, want ErrNotFound", err)
	}
	got, err := e.engine.Chains(e.ctx, chain.Filter{State: chain.ChainCanceled})
	if err != nil || len(got) != 1 {
		t.Errorf("canceled chains = %d (%v), want 1", len(got), err)
	}
}

// TestRebuildByIsAudited: a rebuild a person asks for is the same
// rebuild as depsd rebuild's, with its audit entry written with it.
func TestRebuildByIsAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	id, err := e.engine.RebuildBy(e.ctx, "base", ann)
	if err != nil {
		t.Fatal(err)
	}
	v := e.wantStates(id, "a=waiting base=pending")
	if len(v.Reasons) != 1 || v.Reasons[0].Kind != chain.ReasonRebuild || !strings.Contains(v.Reasons[0].Detail, "ann") {
		t.Errorf("reasons = %+v", v.Reasons)
	}
	if err := e.engine.AuditRefused(e.ctx, chain.AuditEntry{Action: chain.AuditRetry, ChainID: id, Target: "a"}, chain.Actor{Name: "rob", ID: 7}, "refused: Reporter on a"); err != nil {
		t.Fatal(err)
	}
	log, err := e.engine.Audit(e.ctx, chain.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].Actor != "rob" || log[0].Outcome != "refused: Reporter on a" ||
		log[1].Action != chain.AuditRebuild || log[1].Target != "base" || log[1].ChainID != id {
		t.Errorf("audit log (newest first) = %+v", log)
	}
}
