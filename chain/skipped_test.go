package chain

import (
	"strings"
	"testing"
	"time"
)

// TestSkippedIsSettledAndUnchanged checks the rule of docs/design/nodes.md:
// a skipped member is final, neither broken nor unfinished; a descendant
// waits for it no more; one whose in-chain upstreams all ended skipped is
// itself skipped ("nothing it is built on changed in this chain"), one
// with another upstream that succeeded is built; and a chain whose members
// all succeeded or were skipped is finished.
func TestSkippedIsSettledAndUnchanged(t *testing.T) {
	now := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	if MemberSkipped.Broken() || MemberSkipped.Unfinished() || MemberSkipped.Building() {
		t.Fatalf("skipped: broken %v, unfinished %v, building %v; want none", MemberSkipped.Broken(), MemberSkipped.Unfinished(), MemberSkipped.Building())
	}
	found := false
	for _, s := range MemberStates() {
		found = found || s == MemberSkipped
	}
	if !found {
		t.Fatal("MemberStates() does not list skipped")
	}
	// base → ruby → app → web; tools → app.
	build := func() *Chain {
		c := &Chain{ID: 1, Mode: Full, State: Running}
		for _, m := range []*Member{
			{Project: "base", State: Success},
			{Project: "ruby", State: MemberSkipped, Upstreams: []string{"base"}, Why: "skipped: merge request closed"},
			{Project: "tools", State: Waiting, Upstreams: []string{"base"}},
			{Project: "app", State: Waiting, Upstreams: []string{"ruby", "tools"}},
			{Project: "web", State: Waiting, Upstreams: []string{"app"}},
			{Project: "docs", State: Waiting, Upstreams: []string{"ruby"}},
		} {
			c.add(m)
		}
		c.begin()
		return c
	}

	c := build()
	ready := c.settle(now)
	if got := projects(ready); strings.Join(got, ",") != "tools" {
		t.Errorf("ready %v, want tools alone (app still waits for tools)", got)
	}
	if m := c.member("docs"); m.State != MemberSkipped || !strings.Contains(m.Why, "ruby") {
		t.Errorf("docs, whose only in-chain upstream was skipped: %s (%q), want skipped naming ruby", m.State, m.Why)
	}
	if m := c.member("app"); m.State != Waiting || m.Why != "waiting for tools" {
		t.Errorf("app: %s (%q), want waiting for tools alone", m.State, m.Why)
	}
	if c.State != Running {
		t.Errorf("chain %s, want running", c.State)
	}

	// tools succeeds: app has an upstream that changed, so it is built.
	c.member("tools").State = Success
	c.changed(c.member("tools"))
	ready = c.settle(now)
	if got := projects(ready); strings.Join(got, ",") != "app" {
		t.Errorf("ready %v, want app (tools changed)", got)
	}

	// ruby and tools both skipped: app and web below it are skipped, and
	// the chain is finished.
	c = build()
	c.member("tools").State = MemberSkipped
	c.changed(c.member("tools"))
	if ready := c.settle(now); len(ready) != 0 {
		t.Errorf("ready %v, want none", projects(ready))
	}
	for _, p := range []string{"app", "web", "docs"} {
		if m := c.member(p); m.State != MemberSkipped || m.FinishedAt.IsZero() {
			t.Errorf("%s: %s (finished %v), want skipped", p, m.State, m.FinishedAt)
		}
	}
	if c.State != Finished || c.EndedAt.IsZero() {
		t.Errorf("chain %s, want finished: every member succeeded or was skipped", c.State)
	}
}
