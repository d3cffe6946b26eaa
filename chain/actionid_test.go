package chain_test

import (
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// A pipeline of project x carrying the DEPSD_ACTION_ID of y's pending build
// (a developer of x copied it into x's variables) is x's pipeline, not y's
// build: y is still built, once, by depsd, y's dependents wait for that
// build, and x's success counts as any success of x does (a chain at x).
func TestActionIDFromAnotherProjectIsNotOurs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x>xdown", "y>ydown")
	var yAction string
	chain.SetSendHook(e.engine, func(a chain.Action) {
		if a.Project == "y" && yAction == "" {
			yAction = a.ID
		}
	})
	// y's first create fails (retried later): its action waits, unsent.
	e.gl.createErr = func(int64) (error, bool) { return errBoom, false }
	id := e.rebuild("y")
	e.send()
	e.gl.createErr = nil
	if yAction == "" {
		t.Fatal("test setup: y's action was not claimed")
	}
	e.wantStates(id, "y=pending ydown=waiting")

	e.deliver(chain.PipelineEvent{ProjectID: e.ids["x"], Project: "x", PipelineID: 7001, Status: "success",
		Ref: "main", Source: "api", Variables: map[string]string{chain.VarActionID: yAction}, At: e.clock.Now()})

	v := e.chain(id)
	if m := member(v, "y"); m.State != chain.Pending || m.PipelineID != 0 {
		t.Fatalf("x's pipeline was taken for y's build: y = %s, pipeline %d (%s)", m.State, m.PipelineID, states(v))
	}
	if m := member(v, "ydown"); m.State != chain.Waiting {
		t.Fatalf("ydown = %s before y was built", m.State)
	}
	// x's success is x's: it starts x's own chain.
	cs, err := e.engine.Chains(e.ctx, chain.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("%d chains, want y's and one started by x's success", len(cs))
	}
	// y is still built by depsd, once.
	e.clock.Advance(time.Minute) // past the backoff
	e.send()
	if n := e.count("y"); n != 1 {
		t.Fatalf("%d pipelines created for y, want 1", n)
	}
	e.finish("y", "success")
	e.send()
	e.wantStates(id, "y=success ydown=triggered")
}
