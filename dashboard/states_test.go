package dashboard

import (
	"slices"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/verify"
)

// TestEveryVerificationStateIsShown: each state an image's verification
// can end in has its own glyph, and the pages order them as verify.States
// does (stalest first).
func TestEveryVerificationStateIsShown(t *testing.T) {
	seen := map[string]verify.State{}
	for _, s := range verify.States() {
		g := verdictIcon(s)
		if g == "" {
			t.Errorf("verification state %s has no glyph", s)
		}
		if other, ok := seen[g]; ok {
			t.Errorf("verification states %s and %s share the glyph %s", s, other, g)
		}
		seen[g] = s
	}
	rows := []verify.Row{}
	for _, s := range verify.States() {
		rows = append(rows, verify.Row{Project: "p", State: s})
	}
	slices.Reverse(rows)
	got := summarize(rows, func(string) (time.Time, bool) { return time.Time{}, true })
	if got["p"].State != verify.States()[0] {
		t.Errorf("a project's images sum up to %s, want the stalest, %s", got["p"].State, verify.States()[0])
	}
}

// TestEveryMemberStateIsShown: each state a member can be in has a glyph
// (states differ without colour; verifying and stale have their own) and
// its place in a chain's counts.
func TestEveryMemberStateIsShown(t *testing.T) {
	for _, s := range chain.MemberStates() {
		g := stateIcon(s)
		if g == "?" {
			t.Errorf("member state %s has no glyph", s)
		}
		for _, own := range []chain.MemberState{chain.Verifying, chain.Stale} {
			if s != own && g == stateIcon(own) {
				t.Errorf("member states %s and %s share the glyph %s", s, own, g)
			}
		}
		if !slices.Contains(memberOrder(), s) {
			t.Errorf("member state %s is not counted on the chains page", s)
		}
	}
}
