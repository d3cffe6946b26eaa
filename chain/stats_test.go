package chain_test

import (
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// Stats counts the blocked chains and says since when the one that has
// waited longest has not moved: what an alert on a blocked chain reads.
func TestStatsSayHowLongTheOldestBlockedChainWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, chain.Full, "x>y", "p>q", "r>s")
	stats := func() chain.Stats {
		t.Helper()
		s, err := e.engine.Stats(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, root := range []string{"x", "p", "r"} {
		e.rebuild(root)
	}
	e.send()
	steps := []struct {
		name        string
		act         func()
		wantBlocked int
		wantSince   time.Time // zero: none blocked
	}{
		{"all running", func() {}, 0, time.Time{}},
		{"x fails", func() { e.clock.Advance(time.Minute); e.finish("x", "failed") }, 1, t0.Add(time.Minute)},
		{"p fails later", func() { e.clock.Advance(time.Minute); e.finish("p", "failed") }, 2, t0.Add(time.Minute)},
		{"x fixed", func() { e.clock.Advance(time.Minute); e.external("x", 7001, "success") }, 1, t0.Add(2 * time.Minute)},
		{"p fixed", func() { e.clock.Advance(time.Minute); e.external("p", 7002, "success") }, 0, time.Time{}},
	}
	for _, st := range steps {
		st.act()
		s := stats()
		if s.ActiveChains != 3 || s.BlockedChains != st.wantBlocked || !s.BlockedSince.Equal(st.wantSince) {
			t.Fatalf("%s: stats %d active, %d blocked since %v; want 3 active, %d blocked since %v",
				st.name, s.ActiveChains, s.BlockedChains, s.BlockedSince, st.wantBlocked, st.wantSince)
		}
	}
}
