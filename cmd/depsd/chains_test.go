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

// TestPrintChainShowsPinMoves: a member waiting for its pin merge request
// shows the merge request's link where a pipeline would be, and what depsd
// wrote to GitLab for the chain is listed under its own heading.
func TestPrintChainShowsPinMoves(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mr := "https://gitlab.example.com/g/app/-/merge_requests/4"
	var buf bytes.Buffer
	printChain(&buf, chain.ChainView{ID: 7, Mode: chain.Full, State: chain.Running, Roots: []string{"ruby"}, Started: at,
		Members: []chain.MemberView{
			{Project: "ruby", State: chain.Success},
			{Project: "app", State: chain.WaitingMerge, Upstreams: []string{"ruby"}, Pinned: []string{"ruby"}, MergeRequest: mr,
				Why: "waiting for merge request !4 to be merged (moves r/ruby:3 sha256:1f38c0d0a1f2 → sha256:2a11e9f8d7c6)"},
		},
		Writes: []chain.Write{
			{At: at, Project: "app", Kind: "commit", Ref: "depsd/pins", Detail: "commit 5e1f0a2b3c4d on depsd/pins (from main): Move the digest pins of ruby"},
			{At: at, Project: "app", Kind: "merge-request", Ref: "depsd/pins", Detail: "opened merge request !4", URL: mr},
		}})
	out := buf.String()
	for _, want := range []string{
		"1     app      waiting-merge  " + mr + "  waiting for merge request !4",
		"written to GitLab:",
		"  2026-01-02T03:04:05Z  app  commit 5e1f0a2b3c4d on depsd/pins (from main): Move the digest pins of ruby",
		"  2026-01-02T03:04:05Z  app  opened merge request !4 " + mr,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
