package chain_test

import (
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

func TestLinearChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b")
	id := e.rebuild("base")
	e.wantStates(id, "a=waiting b=waiting base=pending")
	if n := e.send(); n != 1 {
		t.Fatalf("sent %d, want 1", n)
	}
	v := e.wantStates(id, "a=waiting b=waiting base=triggered")
	if m := member(v, "a"); m.Why != "waiting for base" {
		t.Errorf("a why = %q", m.Why)
	}
	if m := member(v, "base"); m.PipelineID == 0 || m.PipelineURL == "" || m.TriggeredAt == nil {
		t.Errorf("base has no pipeline recorded: %+v", m)
	}
	e.finish("base", "running")
	e.wantStates(id, "a=waiting b=waiting base=running")
	e.finish("base", "success")
	e.wantStates(id, "a=pending b=waiting base=success")
	e.send()
	vars := e.latest("a").vars
	if vars[chain.VarChainID] != "1" || vars[chain.VarUpstream] != "base" || !strings.HasPrefix(vars[chain.VarActionID], "a-") {
		t.Errorf("variables of a's pipeline = %v", vars)
	}
	e.finish("a", "success")
	e.send()
	e.finish("b", "success")
	v = e.wantStates(id, "a=success b=success base=success")
	if v.State != chain.Finished || v.Ended == nil {
		t.Errorf("chain state = %s, ended %v; want finished", v.State, v.Ended)
	}
	e.wantCounts(map[string]int{"base": 1, "a": 1, "b": 1})
	if len(v.Reasons) != 1 || v.Reasons[0].Kind != chain.ReasonRebuild || v.Roots[0] != "base" {
		t.Errorf("roots/reasons = %v %+v", v.Roots, v.Reasons)
	}
}

func TestDiamondBuildsBottomOnceAfterBothParents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>b", "a>c", "b>c")
	id := e.rebuild("base")
	e.send()
	e.finish("base", "success")
	if n := e.send(); n != 2 {
		t.Fatalf("sent %d after base, want 2 (a and b)", n)
	}
	e.finish("a", "success")
	v := e.wantStates(id, "a=success b=triggered base=success c=waiting")
	if m := member(v, "c"); m.Why != "waiting for b" || strings.Join(m.Upstreams, ",") != "a,b" {
		t.Errorf("c = %+v", m)
	}
	if n := e.send(); n != 0 {
		t.Fatalf("c sent before b succeeded")
	}
	e.finish("b", "success")
	e.send()
	e.finish("c", "success")
	e.wantStates(id, "a=success b=success base=success c=success")
	e.wantCounts(map[string]int{"base": 1, "a": 1, "b": 1, "c": 1})
	if got := e.latest("c").vars[chain.VarUpstream]; got != "a,b" {
		t.Errorf("DEPSD_UPSTREAM of c = %q, want a,b", got)
	}
}

func TestFailureBlocksDescendantsUntilALaterSuccess(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, status, why string
		resume            func(e *env)
	}{
		{"failed then new pipeline", "failed", "blocked: base failed (pipeline 1001)", func(e *env) {
			e.external("base", 5555, "success") // a developer's fix
		}},
		{"canceled then retry", "canceled", "blocked: base was canceled (pipeline 1001)", func(e *env) {
			e.finish("base", "running") // GitLab retry: same pipeline again
			e.finish("base", "success")
		}},
		{"skipped then new pipeline", "skipped", "blocked: base failed (pipeline 1001)", func(e *env) {
			e.external("base", 5556, "success")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, chain.Full, "base>a", "a>b", "x")
			id := e.rebuild("base")
			e.send()
			e.finish("base", tc.status)
			v := e.wantStates(id, "a=blocked b=blocked base="+map[string]string{"failed": "failed", "canceled": "canceled", "skipped": "failed"}[tc.status])
			if v.State != chain.Blocked {
				t.Errorf("chain state = %s, want blocked", v.State)
			}
			for _, p := range []string{"a", "b"} {
				if m := member(v, p); m.Why != tc.why {
					t.Errorf("%s why = %q, want %q", p, m.Why, tc.why)
				}
			}
			tc.resume(e)
			v = e.wantStates(id, "a=pending b=waiting base=success")
			if v.State != chain.Running {
				t.Errorf("chain state = %s, want running", v.State)
			}
			e.send()
			e.finish("a", "success")
			e.send()
			e.finish("b", "success")
			e.wantStates(id, "a=success b=success base=success")
			if cs, _ := e.engine.Chains(e.ctx, chain.Filter{}); len(cs) != 1 {
				t.Errorf("%d chains, want 1: the resuming success starts none", len(cs))
			}
		})
	}
}

func TestDuplicateDeliveryAndOwnPipelinesStartNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a")
	ev := chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 77, Status: "success", Ref: "main", Source: "push"}
	for i := range 3 {
		dup, err := e.engine.RecordEvent(e.ctx, "same-key", chain.Event{Pipeline: &ev})
		if err != nil || dup != (i > 0) {
			t.Fatalf("delivery %d: duplicate=%v err=%v", i, dup, err)
		}
	}
	if n, err := e.engine.ProcessInbox(e.ctx); n != 1 || err != nil {
		t.Fatalf("ProcessInbox = %d, %v; want 1", n, err)
	}
	// The same pipeline under another key (a second hook) starts nothing new.
	e.deliver(ev)
	cs, _ := e.engine.Chains(e.ctx, chain.Filter{})
	if len(cs) != 1 || states(cs[0]) != "a=pending base=success" {
		t.Fatalf("chains = %+v", cs)
	}
	e.send()
	e.finish("a", "success") // depsd's own pipeline: advances, starts nothing
	// A pipeline carrying some DEPSD_ACTION_ID unknown here (another depsd).
	e.deliver(chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 78, Status: "success", Ref: "main",
		Source: "api", Variables: map[string]string{chain.VarActionID: "a-elsewhere"}})
	// Other refs and tags never count.
	e.deliver(chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 79, Status: "success", Ref: "feature"})
	e.deliver(chain.PipelineEvent{ProjectID: e.ids["base"], Project: "base", PipelineID: 80, Status: "success", Ref: "main", Tag: true})
	cs, _ = e.engine.Chains(e.ctx, chain.Filter{})
	if len(cs) != 1 || cs[0].State != chain.Finished {
		t.Fatalf("chains = %+v; want one finished", cs)
	}
	e.wantCounts(map[string]int{"a": 1, "base": 0})
}

// In first-level mode depsd's own pipelines trigger their dependents too;
// the same success of one delivered again, after the chain that built it
// ended, triggers nothing more: the event names its action, and what the
// pipeline started is looked up all the same.
func TestFirstLevelOwnSuccessDeliveredTwiceTriggersOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.FirstLevel, "base>a", "a>b")
	e.external("base", 77, "success") // a
	e.send()
	e.finish("a", "success") // b
	e.send()
	e.finish("a", "success") // again (a second hook, or the reconciler)
	e.send()
	e.wantCounts(map[string]int{"a": 1, "b": 1})
}

func TestOverlappingChainsMerge(t *testing.T) {
	t.Parallel()
	t.Run("waiting member built once for both changes", func(t *testing.T) {
		e := newEnv(t, chain.Full, "base>mid", "mid>leaf", "other>leaf")
		id := e.rebuild("base")
		if id2 := e.rebuild("other"); id2 != id {
			t.Fatalf("second rebuild made chain %d, want merged into %d", id2, id)
		}
		v := e.wantStates(id, "base=pending leaf=waiting mid=waiting other=pending")
		if strings.Join(v.Roots, ",") != "base,other" || len(v.Reasons) != 2 {
			t.Errorf("roots %v reasons %d", v.Roots, len(v.Reasons))
		}
		e.send()
		e.finish("other", "success")
		e.finish("base", "success")
		e.send()
		if m := member(e.chain(id), "leaf"); m.Why != "waiting for mid" {
			t.Errorf("leaf why = %q", m.Why)
		}
		e.finish("mid", "success")
		e.send()
		e.finish("leaf", "success")
		e.wantStates(id, "base=success leaf=success mid=success other=success")
		e.wantCounts(map[string]int{"leaf": 1, "mid": 1})
	})
	t.Run("pending member withdrawn for a new upstream counts one build", func(t *testing.T) {
		e := newEnv(t, chain.Full, "base>leaf", "other>leaf")
		id := e.rebuild("base")
		e.send()
		e.finish("base", "success")
		e.wantStates(id, "base=success leaf=pending")
		if id2 := e.rebuild("other"); id2 != id { // leaf's action, never claimed, is taken back
			t.Fatalf("second rebuild made chain %d, want merged into %d", id2, id)
		}
		e.wantStates(id, "base=success leaf=waiting other=pending")
		e.send()
		e.finish("other", "success")
		e.send()
		e.finish("leaf", "success")
		v := e.wantStates(id, "base=success leaf=success other=success")
		if m := member(v, "leaf"); m.Builds != 1 {
			t.Errorf("leaf builds = %d, want 1: the withdrawn action built nothing", m.Builds)
		}
		e.wantCounts(map[string]int{"leaf": 1})
	})
	t.Run("running member requeued once for three changes", func(t *testing.T) {
		e := newEnv(t, chain.Full, "base>a", "a>b")
		id := e.rebuild("base")
		e.send()
		e.finish("base", "success")
		e.send()
		e.finish("a", "running")
		for i := range 3 {
			e.external("base", int64(500+i), "success")
		}
		e.wantStates(id, "a=running+requeued b=waiting base=success")
		e.finish("a", "success") // the first build ends: the queued one starts
		e.wantStates(id, "a=pending b=waiting base=success")
		e.send()
		e.finish("a", "success")
		e.send()
		e.finish("b", "success")
		v := e.wantStates(id, "a=success b=success base=success")
		if m := member(v, "a"); m.Builds != 2 {
			t.Errorf("a builds = %d, want 2", m.Builds)
		}
		e.wantCounts(map[string]int{"base": 1, "a": 2, "b": 1})
	})
	t.Run("finished member reset by a new upstream change", func(t *testing.T) {
		e := newEnv(t, chain.Full, "base>a", "base>slow")
		id := e.rebuild("base")
		e.send()
		e.finish("base", "success")
		e.send()
		e.finish("a", "success")
		e.external("base", 900, "success")
		v := e.wantStates(id, "a=pending base=success slow=triggered+requeued")
		if len(v.Reasons) != 2 || v.Reasons[1].PipelineID != 900 {
			t.Errorf("reasons = %+v", v.Reasons)
		}
		e.send()
		e.finish("a", "success")
		e.finish("slow", "failed") // the queued build still happens
		e.wantStates(id, "a=success base=success slow=pending")
		e.send()
		e.finish("slow", "success")
		e.wantCounts(map[string]int{"a": 2, "slow": 2})
	})
	t.Run("two active chains joined by a third change", func(t *testing.T) {
		e := newEnv(t, chain.Full, "x>xa", "y>ya", "z>xa", "z>ya")
		idx, idy := e.rebuild("x"), e.rebuild("y")
		if idx == idy {
			t.Fatal("disjoint rebuilds share a chain")
		}
		if id := e.rebuild("z"); id != idx {
			t.Fatalf("z went to chain %d, want the oldest %d", id, idx)
		}
		e.wantStates(idx, "x=pending xa=waiting y=pending ya=waiting z=pending")
		if v := e.chain(idy); v.State != chain.Merged || v.MergedInto != idx || len(v.Members) != 0 {
			t.Errorf("chain %d = %s into %d with %d members", idy, v.State, v.MergedInto, len(v.Members))
		}
	})
}

func TestCyclesAreSkippedAndReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "a>b", "b>a", "b>tail", "base>c")
	id := e.rebuild("base")
	v := e.wantStates(id, "base=pending c=waiting")
	want := map[string]string{
		"a":    "on dependency cycle a → b → a (never followed)",
		"b":    "on dependency cycle a → b → a (never followed)",
		"tail": "reachable only through a dependency cycle (never followed)",
	}
	if len(v.Skipped) != len(want) {
		t.Fatalf("skipped = %+v", v.Skipped)
	}
	for _, s := range v.Skipped {
		if want[s.Project] != s.Why {
			t.Errorf("skipped %s: %q, want %q", s.Project, s.Why, want[s.Project])
		}
	}
	if _, err := e.engine.Rebuild(e.ctx, "a", chain.Reason{}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("Rebuild(a) = %v, want a cycle error", err)
	}
	if _, err := e.engine.Rebuild(e.ctx, "nope", chain.Reason{}); err == nil {
		t.Error("Rebuild of an unknown project succeeded")
	}
}

func TestRebuildPlan(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "base>a", "base>b", "a>c", "b>c")
	g, err := e.store.Graph(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := chain.RebuildPlan(g, "base")
	if len(got) != 3 || strings.Join(got[1], ",") != "a,b" || got[2][0] != "c" {
		t.Errorf("plan = %v", got)
	}
}

// A scheduled rebuild asked for again (its process died before it could
// record the fire's outcome, and the next leader fires it again) starts
// nothing new, whether its chain still runs or has finished; the next
// fire of the schedule starts a chain as usual. The same holds for an
// image change's rebuild of one user.
func TestScheduledRebuildStartsOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode   chain.Mode
		reason chain.Reason
	}{
		{chain.Full, chain.Reason{Kind: chain.ReasonSchedule, Detail: "0 3 * * *"}},
		{chain.FirstLevel, chain.Reason{Kind: chain.ReasonSchedule, Detail: "0 3 * * *"}},
		{chain.Full, chain.Reason{Kind: chain.ReasonDigest, Detail: "docker.io/library/debian:12 sha256:1→sha256:2"}},
	} {
		mode := tt.mode
		t.Run(string(mode)+" "+string(tt.reason.Kind), func(t *testing.T) {
			e := newEnv(t, mode, "base>app")
			fire := tt.reason
			fire.At = time.Date(2025, 1, 6, 3, 0, 0, 0, time.UTC)
			again := func(want int64) {
				t.Helper()
				id, err := e.engine.Rebuild(e.ctx, "base", fire)
				if err != nil || id != want {
					t.Fatalf("the same fire again: chain %d, %v; want chain %d", id, err, want)
				}
			}
			id, err := e.engine.Rebuild(e.ctx, "base", fire)
			if err != nil {
				t.Fatal(err)
			}
			again(id)
			e.send()
			again(id)
			e.finish("base", "success")
			e.send()
			e.finish("app", "success")
			if v := e.chain(id); v.State != chain.Finished || len(v.Reasons) != 1 {
				t.Fatalf("chain %d: %s with reasons %+v; want finished, one reason", id, v.State, v.Reasons)
			}
			again(id)
			e.send()
			e.wantCounts(map[string]int{"base": 1, "app": 1})

			next := fire
			next.At = fire.At.Add(24 * time.Hour)
			if id2, err := e.engine.Rebuild(e.ctx, "base", next); err != nil || id2 == id {
				t.Fatalf("the next day's fire: chain %d, %v; want a new chain", id2, err)
			}
		})
	}
}
