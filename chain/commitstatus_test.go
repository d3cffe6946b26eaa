package chain_test

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
)

// commitStep never asks GitLab for a transition its state machine
// refuses (a status still pending or running only moves forward), and
// posts whatever is wanted over a final status or none.
func TestCommitStepFollowsGitLabsStateMachine(t *testing.T) {
	t.Parallel()
	const (
		none     = chain.CommitState("")
		pending  = chain.CommitPending
		running  = chain.CommitRunning
		success  = chain.CommitSuccess
		failed   = chain.CommitFailed
		canceled = chain.CommitCanceled
	)
	for _, tc := range []struct {
		have     chain.CommitState
		haveDesc string
		want     chain.CommitState
		wantDesc string
		post     chain.CommitState // "" when nothing is posted
	}{
		{none, "", pending, "0 of 2 rebuilt", pending},
		{none, "", running, "1 of 2 rebuilt", running},
		{none, "", success, "2 of 2 rebuilt", success},
		{pending, "0 of 2 rebuilt", pending, "0 of 2 rebuilt", ""},
		// pending after pending is refused: the description waits.
		{pending, "0 of 2 rebuilt", pending, "0 of 3 rebuilt", ""},
		{pending, "0 of 2 rebuilt", running, "0 of 2 rebuilt, 1 building", running},
		{pending, "0 of 2 rebuilt", failed, "0 of 2 rebuilt, 1 failed", failed},
		// running twice, and pending after running, are refused.
		{running, "0 of 2 rebuilt", running, "1 of 2 rebuilt", ""},
		{running, "0 of 2 rebuilt", pending, "0 of 2 rebuilt", ""},
		{running, "1 of 2 rebuilt", success, "2 of 2 rebuilt", success},
		{running, "1 of 2 rebuilt", canceled, "expired: 1 of 2 rebuilt", canceled},
		// A final status takes anything, as a new status.
		{failed, "0 of 2 rebuilt, 1 failed: a", running, "1 of 2 rebuilt", running},
		{failed, "0 of 2 rebuilt, 1 failed: a", failed, "0 of 3 rebuilt, 2 failed: a, b", failed},
		{failed, "0 of 2 rebuilt, 1 failed: a", failed, "0 of 2 rebuilt, 1 failed: a", ""},
		{success, "2 of 2 rebuilt", pending, "2 of 3 rebuilt", pending},
		{canceled, "x", none, "", ""},
	} {
		post, ok := chain.CommitStep(tc.have, tc.haveDesc, tc.want, tc.wantDesc)
		if ok != (tc.post != "") || post != tc.post {
			t.Errorf("CommitStep(%q %q → %q %q) = %q, %v; want %q", tc.have, tc.haveDesc, tc.want, tc.wantDesc, post, ok, tc.post)
		}
	}
}

func TestStatusDescription(t *testing.T) {
	t.Parallel()
	m := func(p string, s chain.MemberState) *chain.Member { return &chain.Member{Project: p, State: s} }
	root := &chain.Member{Project: "g/base", State: chain.Success, PipelineID: 7}
	started := []chain.Reason{{Kind: chain.ReasonPipeline, Project: "g/base", PipelineID: 7}}
	for _, tc := range []struct {
		name    string
		state   chain.State
		members []*chain.Member
		labels  map[string]string
		want    chain.CommitState
		desc    string
	}{
		{"queued", chain.Running, []*chain.Member{m("g/a", chain.Pending), m("g/b", chain.Waiting)}, nil,
			chain.CommitPending, "0 of 2 rebuilt, 1 building"},
		{"running", chain.Running, []*chain.Member{m("g/a", chain.MemberRunning), m("g/b", chain.Waiting)}, nil,
			chain.CommitRunning, "0 of 2 rebuilt, 1 building"},
		{"finished", chain.Finished, []*chain.Member{m("g/a", chain.Success), m("g/b", chain.Success)}, nil,
			chain.CommitSuccess, "2 of 2 rebuilt"},
		{"a failure named", chain.Blocked,
			[]*chain.Member{m("apps/shop", chain.Failed), m("apps/web", chain.MemberBlocked), m("g/a", chain.Success)},
			map[string]string{"apps/shop": "apps/shop"}, chain.CommitFailed, "1 of 3 rebuilt, 1 failed: apps/shop, 1 blocked"},
		{"a failure not to be named", chain.Blocked,
			[]*chain.Member{m("apps/shop", chain.Failed), m("g/a", chain.Canceled)},
			map[string]string{"g/a": "g/a"}, chain.CommitFailed, "0 of 2 rebuilt, 2 failed: g/a and 1 more"},
		{"no failure may be named", chain.Blocked, []*chain.Member{m("apps/shop", chain.Failed)}, nil,
			chain.CommitFailed, "0 of 1 rebuilt, 1 failed"},
		{"expired with nothing failed", chain.Expired, []*chain.Member{m("g/a", chain.MemberExpired)}, nil,
			chain.CommitCanceled, "expired: 0 of 1 rebuilt, 1 unfinished"},
		{"expired with a failure", chain.Expired, []*chain.Member{m("g/a", chain.Failed), m("g/b", chain.MemberExpired)},
			map[string]string{"g/a": "g/a"}, chain.CommitFailed, "expired: 0 of 2 rebuilt, 1 failed: g/a, 1 unfinished"},
		{"finished with a member skipped", chain.Finished, []*chain.Member{m("g/a", chain.Success), m("g/b", chain.MemberSkipped)}, nil,
			chain.CommitSuccess, "1 of 2 rebuilt, 1 skipped"},
		{"canceled by a person", chain.ChainCanceled, []*chain.Member{m("g/a", chain.Success), m("g/b", chain.Canceled)},
			map[string]string{"g/b": "g/b"}, chain.CommitCanceled, "canceled: 1 of 2 rebuilt, 1 failed: g/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &chain.Chain{ID: 1, State: tc.state, Reasons: started, Members: append([]*chain.Member{root}, tc.members...)}
			state, desc := chain.StatusOf(c, tc.labels)
			if state != tc.want || desc != tc.desc {
				t.Errorf("status = %q %q, want %q %q", state, desc, tc.want, tc.desc)
			}
		})
	}
	t.Run("at most 255 bytes, names as many as fit", func(t *testing.T) {
		var members []*chain.Member
		labels := map[string]string{}
		for i := range 40 {
			p := "group/subgroup/a-rather-long-project-name-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
			members = append(members, m(p, chain.Failed))
			labels[p] = p
		}
		c := &chain.Chain{ID: 1, State: chain.Blocked, Reasons: started, Members: append([]*chain.Member{root}, members...)}
		_, desc := chain.StatusOf(c, labels)
		if len(desc) > 255 || !strings.HasPrefix(desc, "0 of 40 rebuilt, 40 failed: group/") || !strings.HasSuffix(desc, " more") {
			t.Errorf("description (%d bytes) = %q", len(desc), desc)
		}
	})
}

// A status names a project only where everyone who sees the root's commit
// may see it.
func TestMayName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		root, member string
		want         bool
	}{
		{"public", "public", true},
		{"public", "internal", false},
		{"public", "private", false},
		{"internal", "public", true},
		{"internal", "internal", true},
		{"internal", "private", false},
		{"private", "internal", true},
		{"private", "private", false},
		{"private", "", false},
		{"", "internal", false},
		{"", "public", true},
	} {
		if got := chain.MayName(tc.root, tc.member); got != tc.want {
			t.Errorf("MayName(%q, %q) = %v, want %v", tc.root, tc.member, got, tc.want)
		}
	}
}
