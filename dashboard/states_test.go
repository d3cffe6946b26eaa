package dashboard

import (
	"slices"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

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
