package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/dashboard"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// The gauges the alerting rules read say what the store holds: blocked
// chains and how long the oldest has not moved, the live replicas, the
// hooks by the state the last check left them in (a hook a repair run
// re-enabled is no longer disabled), and whether the store answered.
func TestStateMetricsSayWhatTheAlertsWatch(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	hookReport := func(dryRun bool, actions ...gitlab.HookAction) dashboard.HookStatus {
		h := dashboard.HookStatus{URL: "https://depsd/hooks/gitlab", CheckedAt: now, Report: gitlab.HookReport{DryRun: dryRun}}
		for _, a := range actions {
			h.Report.Changes = append(h.Report.Changes, gitlab.HookChange{Action: a})
		}
		return h
	}
	type state struct {
		stats    chain.Stats
		ok       bool
		replicas int
		hooks    dashboard.HookStatus
		checked  bool
	}
	for _, tc := range []struct {
		name  string
		steps []state // observed in turn
		want  string  // the exposition of the watched metrics after the last
	}{
		{
			name:  "nothing blocked, no hook check yet",
			steps: []state{{stats: chain.Stats{ActiveChains: 2}, ok: true, replicas: 1}},
			want: `depsd_chain_blocked_longest_seconds 0
depsd_chains{state="blocked"} 0
depsd_chains{state="running"} 2
depsd_replicas 1
depsd_store_up 1
`,
		},
		{
			name: "a chain blocked for 90 s among three, two replicas; a repair run re-enabled a hook, created one, failed to re-enable one; GitLab paused one",
			steps: []state{{stats: chain.Stats{ActiveChains: 3, BlockedChains: 2, BlockedSince: now.Add(-90 * time.Second)}, ok: true, replicas: 2,
				hooks: hookReport(false, gitlab.HookReenabled, gitlab.HookCreated, gitlab.HookStillDisabled, gitlab.HookTemporarilyDisabled,
					gitlab.HookUnchanged, gitlab.HookUpdated), checked: true}},
			want: `depsd_chain_blocked_longest_seconds 90
depsd_chains{state="blocked"} 2
depsd_chains{state="running"} 1
depsd_replicas 2
depsd_store_up 1
depsd_webhooks{state="disabled"} 1
depsd_webhooks{state="failing"} 1
depsd_webhooks{state="missing"} 0
depsd_webhooks{state="ok"} 4
`,
		},
		{
			name: "a dry run finds a disabled hook and a missing one",
			steps: []state{{stats: chain.Stats{}, ok: true, replicas: 1,
				hooks: hookReport(true, gitlab.HookReenabled, gitlab.HookCreated), checked: true}},
			want: `depsd_chain_blocked_longest_seconds 0
depsd_chains{state="blocked"} 0
depsd_chains{state="running"} 0
depsd_replicas 1
depsd_store_up 1
depsd_webhooks{state="disabled"} 1
depsd_webhooks{state="failing"} 0
depsd_webhooks{state="missing"} 1
depsd_webhooks{state="ok"} 0
`,
		},
		{
			name: "the store stops answering: down, the last values kept",
			steps: []state{
				{stats: chain.Stats{ActiveChains: 1, BlockedChains: 1, BlockedSince: now.Add(-time.Hour)}, ok: true, replicas: 2},
				{ok: false},
			},
			want: `depsd_chain_blocked_longest_seconds 3600
depsd_chains{state="blocked"} 1
depsd_chains{state="running"} 0
depsd_replicas 2
depsd_store_up 0
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics(true)
			for _, st := range tc.steps {
				m.observeState(now, st.stats, st.ok, st.replicas, st.hooks, st.checked)
			}
			names := []string{"depsd_chain_blocked_longest_seconds", "depsd_chains", "depsd_replicas", "depsd_store_up", "depsd_webhooks"}
			if err := testutil.GatherAndCompare(m.registry, strings.NewReader(expositionOf(t, m, names, tc.want)), names...); err != nil {
				t.Error(err)
			}
		})
	}
}

// expositionOf adds the HELP and TYPE lines of names to want's samples, so
// that the cases list only what an operator's query would read.
func expositionOf(t *testing.T, m *metrics, names []string, want string) string {
	t.Helper()
	mfs, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, n := range names {
			if mf.GetName() != n {
				continue
			}
			b.WriteString("# HELP " + n + " " + mf.GetHelp() + "\n# TYPE " + n + " " + strings.ToLower(mf.GetType().String()) + "\n")
			for line := range strings.Lines(want) {
				if strings.HasPrefix(line, n+" ") || strings.HasPrefix(line, n+"{") {
					b.WriteString(line)
				}
			}
		}
	}
	return b.String()
}

// The leader's jobs count their runs by outcome, from 0 for both, so that
// an alert on repeated failures sees the first one.
func TestBackgroundJobRunsAreCounted(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian\n"})
	d, err := New(context.Background(), Options{Config: testConfig(t, srv), GitLab: testClient(t, srv), LeaderLease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.store.Close() })
	count := func(task, outcome string) float64 {
		return testutil.ToFloat64(d.metrics.jobRuns.WithLabelValues(task, outcome))
	}
	if count(jobReconcile, "failure") != 0 || count(jobCatchUp, "success") != 0 {
		t.Fatalf("job counters do not start at 0")
	}
	results := []error{errors.New("store down"), errors.New("store down"), nil}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := 0
	_ = d.every(ctx, jobReconcile, time.Millisecond, func(context.Context) error {
		err := results[runs]
		if runs++; runs == len(results) {
			cancel()
		}
		return err
	})
	// The last run ended with the context: every counts it not at all.
	if f, s := count(jobReconcile, "failure"), count(jobReconcile, "success"); f != 2 || s != 0 {
		t.Errorf("reconcile runs: %v failures, %v successes; want 2 and 0", f, s)
	}
}

// A store that no longer answers reads as down in /metrics.
func TestStoreDownIsExported(t *testing.T) {
	srv := testGitLab(t, gitlabtest.Options{}, map[string]string{"g/app": "FROM debian\n"})
	d, err := New(context.Background(), Options{Config: testConfig(t, srv), GitLab: testClient(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.refreshState(ctx)
	if up := testutil.ToFloat64(d.metrics.storeUp); up != 1 {
		t.Fatalf("depsd_store_up = %v with the store open, want 1", up)
	}
	d.store.Close()
	d.refreshState(ctx)
	if up := testutil.ToFloat64(d.metrics.storeUp); up != 0 {
		t.Errorf("depsd_store_up = %v with the store closed, want 0", up)
	}
}

// TestMemberStatesAreExported: depsd_chain_members has a series for every
// member state (chain.MemberStates), zero included, with the active
// chains' members counted by state: a member waiting for its pin merge
// request shows up as waiting-merge.
func TestMemberStatesAreExported(t *testing.T) {
	m := newMetrics(false)
	m.observeState(time.Now(), chain.Stats{ActiveChains: 1, Members: map[chain.MemberState]int{chain.WaitingMerge: 2, chain.Success: 3}},
		true, 1, dashboard.HookStatus{}, false)
	for _, s := range chain.MemberStates() {
		want := map[chain.MemberState]float64{chain.WaitingMerge: 2, chain.Success: 3}[s]
		if got := testutil.ToFloat64(m.members.WithLabelValues(string(s))); got != want {
			t.Errorf("depsd_chain_members{state=%q} = %v, want %v", s, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.members); n != len(chain.MemberStates()) {
		t.Errorf("%d series of depsd_chain_members, want one per member state (%d)", n, len(chain.MemberStates()))
	}
}
