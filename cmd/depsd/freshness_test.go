package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/verify/verifytest"
)

// depsd freshness: stalest first, exit 1 past --max-age, JSON, a filter
// by project.
func TestFreshnessCommand(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "depsd.db")
	t.Setenv("DEPSD_STATE", state)
	t.Setenv("DEPSD_CONFIG", "")
	t.Chdir(dir)
	if code, _, errOut := depsd(t, "freshness"); code != exitFail || !strings.Contains(errOut, "run depsd scan first") {
		t.Fatalf("without state: exit %d, %s", code, errOut)
	}
	st, err := store.Open(t.Context(), state)
	if err != nil {
		t.Fatal(err)
	}
	const ruby = "registry.example.com/base/ruby:3"
	moved := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Second)
	if err := st.RecordUpstreamDigest(t.Context(), ruby, "sha256:old", moved.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordUpstreamDigest(t.Context(), ruby, "sha256:new", moved); err != nil {
		t.Fatal(err)
	}
	amd64 := deps.Platform{OS: "linux", Architecture: "amd64"}
	for _, r := range []verify.Record{
		{Project: "apps/admin", VerifiedAt: time.Now(), Result: verify.Result{Image: "registry.example.com/apps/admin:latest", Platform: amd64,
			State: verify.StateFresh, Digest: "sha256:" + strings.Repeat("a", 64), Detail: "built on the current image of every upstream",
			Upstreams: []verify.Verdict{{Upstream: ruby, State: verify.StateFresh, BuiltOn: "sha256:new", Current: "sha256:new"}}}},
		{Project: "apps/shop", VerifiedAt: time.Now(), Result: verify.Result{Image: "registry.example.com/apps/shop:latest", Platform: amd64,
			State: verify.StateStale, Digest: "sha256:" + strings.Repeat("b", 64), Detail: "built on " + ruby + " sha256:old, not sha256:new",
			Upstreams: []verify.Verdict{{Upstream: ruby, State: verify.StateStale, BuiltOn: "sha256:old", Current: "sha256:new"}}}},
	} {
		if err := st.SaveVerification(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	// A running chain will rebuild apps/shop: the table says so.
	if err := st.ApplyScan(t.Context(), []scan.Project{{ID: 1, Path: "apps/admin", DefaultBranch: "main"}, {ID: 2, Path: "apps/shop", DefaultBranch: "main"}},
		scan.Meta{StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
	if err != nil {
		t.Fatal(err)
	}
	chainID, err := engine.Rebuild(t.Context(), "apps/shop", chain.Reason{Kind: chain.ReasonRebuild, Detail: "test"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, out, errOut := depsd(t, "freshness")
	if code != exitFail || !strings.Contains(errOut, "1 image(s) stale for longer than 24h0m0s: apps/shop") {
		t.Errorf("stale for 48h: exit %d, stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "apps/shop") || !strings.Contains(lines[1], "stale") || !strings.Contains(lines[1], "sha256:bbbbbbbbbbbb") || !strings.Contains(lines[1], fmt.Sprintf("chain %d", chainID)) || !strings.HasPrefix(lines[2], "apps/admin") {
		t.Errorf("table, want the stale image first:\n%s", out)
	}
	if code, _, errOut := depsd(t, "freshness", "--max-age", "72h"); code != exitOK {
		t.Errorf("--max-age 72h: exit %d, %s", code, errOut)
	}
	if code, out, _ := depsd(t, "freshness", "apps/admin", "--max-age", "0"); code != exitOK || strings.Contains(out, "apps/shop") {
		t.Errorf("apps/admin only: exit %d\n%s", code, out)
	}
	code, out, _ = depsd(t, "freshness", "--json")
	var got struct {
		Images []verify.Row `json:"images"`
		Beyond int          `json:"stale_beyond_max_age"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitFail || got.Beyond != 1 || len(got.Images) != 2 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if r := got.Images[0]; r.Project != "apps/shop" || !r.StaleSince.Equal(moved) || r.Platform != "linux/amd64" || r.Fix == nil || r.Fix.Kind != verify.FixChain || r.Fix.ChainID != chainID {
		t.Errorf("first row %+v, want apps/shop stale since %s (when ruby moved), fixed by chain %d", r, moved, chainID)
	}
	if got.Images[1].Fix != nil {
		t.Errorf("a fresh image has a fix: %+v", got.Images[1].Fix)
	}
	if code, out, _ := depsd(t, "freshness", "--only", "fresh"); code != exitOK || strings.Contains(out, "apps/shop") || !strings.Contains(out, "apps/admin") {
		t.Errorf("--only fresh: exit %d (only fresh images listed, nothing stale past --max-age)\n%s", code, out)
	}
	if code, _, errOut := depsd(t, "freshness", "--only", "rotten"); code != exitUsage || !strings.Contains(errOut, "want one of stale, pinned, unknown, fresh") {
		t.Errorf("--only rotten: exit %d, %s", code, errOut)
	}
	if code, _, errOut := depsd(t, "freshness", "--max-age", "-1h"); code != exitUsage {
		t.Errorf("negative --max-age: exit %d, %s", code, errOut)
	}
}

// depsd freshness prints every row, however many (the API and the
// dashboard page theirs; a cron job reads them all): more than a page of
// the API's largest.
func TestFreshnessCommandPrintsEveryRow(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "depsd.db")
	t.Setenv("DEPSD_STATE", state)
	t.Setenv("DEPSD_CONFIG", "")
	t.Chdir(dir)
	st, err := store.Open(t.Context(), state)
	if err != nil {
		t.Fatal(err)
	}
	n := verify.MaxPageLimit + 20
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("apps/team-%d/app-%d", i%20, i)
	}
	stale, err := verifytest.Seed(t.Context(), st, "registry.example.com", paths, time.Now())
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := depsd(t, "freshness", "--max-age", "1000h")
	if lines := strings.Count(out, "\n"); code != exitOK || lines != n+1 || !strings.HasPrefix(strings.SplitN(out, "\n", 3)[1], stale[0]+" ") {
		t.Errorf("exit %d, %d lines (want %d rows and a header, %s first)\n%s", code, lines, n, stale[0], errOut)
	}
	code, out, errOut = depsd(t, "freshness", "--json", "--max-age", "1000h")
	var rep struct {
		Images []verify.Row `json:"images"`
		Total  int          `json:"total"`
		Next   *string      `json:"next"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s", code, err, errOut)
	}
	if len(rep.Images) != n || rep.Total != n || rep.Next != nil {
		t.Errorf("--json: %d images, total %d, next %v; want %d in one page", len(rep.Images), rep.Total, rep.Next, n)
	}
}
