package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// TestPrintChainShowsVerification: `depsd chains ID` shows the verdict on
// each member's images once some member has one, and why a member is
// stale or its images unknown; without verdicts the table is as before.
func TestPrintChainShowsVerification(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	detail := "built on registry.test/ruby:3 sha256:0123456789ab, not sha256:ba9876543210 (base annotation)"
	for _, tc := range []struct {
		name    string
		members []chain.MemberView
		want    []string
		notWant string
	}{
		{"no verdicts", []chain.MemberView{
			{Project: "ruby", State: chain.Success},
			{Project: "shop", State: chain.Pending, Upstreams: []string{"ruby"}, Why: "queued"},
		}, []string{"WAVE  PROJECT  STATE    PIPELINE  WHY", "0     ruby     success  -", "1     shop     pending  -         queued"}, "IMAGES"},
		{"stale and unknown", []chain.MemberView{
			{Project: "ruby", State: chain.Success, Verified: chain.ImageUnknown, VerifyDetail: "no upstream image to judge against"},
			{Project: "shop", State: chain.Stale, Upstreams: []string{"ruby"}, Verified: chain.ImageStale, VerifyDetail: detail,
				Why: "still stale after a rebuild without cache: " + detail},
			{Project: "web", State: chain.MemberBlocked, Upstreams: []string{"shop"}, Why: "blocked: shop was " + detail},
		}, []string{
			"WAVE  PROJECT  STATE    IMAGES   PIPELINE  WHY",
			"0     ruby     success  unknown  -         no upstream image to judge against",
			"1     shop     stale    stale    -         still stale after a rebuild without cache: " + detail,
			"2     web      blocked  -        -         blocked: shop was " + detail,
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			printChain(&buf, chain.ChainView{ID: 7, Mode: chain.Full, State: chain.Blocked, Roots: []string{"ruby"}, Started: started, Members: tc.members})
			out := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tc.notWant != "" && strings.Contains(out, tc.notWant) {
				t.Errorf("output has %q:\n%s", tc.notWant, out)
			}
		})
	}
}
