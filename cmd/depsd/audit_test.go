package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/store"
)

// TestAuditPrintsTheLog: what people did from the dashboard or the API,
// newest first, as a table and as JSON, for one chain or all.
func TestAuditPrintsTheLog(t *testing.T) {
	_, dir := fakeInstance(t)
	if code, _, errOut := depsd(t, "scan", "--group", "infra", "--group", "apps"); code != exitOK {
		t.Fatalf("scan: %s", errOut)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "depsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	engine, err := chain.New(chain.Config{Store: st, Graph: st.Graph})
	if err != nil {
		t.Fatal(err)
	}
	id, err := engine.RebuildBy(ctx, "infra/base", chain.Actor{Name: "ann", ID: 101, Address: "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.AuditRefused(ctx, chain.AuditEntry{Action: chain.AuditSkip, ChainID: id, Target: "apps/app", Reason: "flaky"},
		chain.Actor{Name: "bob", ID: 102, Address: "192.0.2.8"}, "refused: Reporter on apps/app"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, out, errOut := depsd(t, "audit")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 3 || !strings.HasPrefix(lines[0], "WHEN") ||
		!strings.Contains(lines[1], "bob") || !strings.Contains(lines[1], "refused: Reporter on apps/app") || !strings.Contains(lines[1], "flaky") ||
		!strings.Contains(lines[2], "ann") || !strings.Contains(lines[2], "rebuild") || !strings.Contains(lines[2], "192.0.2.7") {
		t.Fatalf("audit: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = depsd(t, "audit", "--json", "--chain", "1", "--limit", "1")
	var got struct{ Audit []chain.AuditEntry }
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Audit) != 1 || got.Audit[0].Actor != "bob" {
		t.Errorf("audit --json: exit %d\n%s", code, out)
	}
	if code, out, _ := depsd(t, "audit", "--chain", "9"); code != exitOK || strings.Count(out, "\n") != 1 {
		t.Errorf("audit of a chain without entries: exit %d\n%s", code, out)
	}
	if code, _, errOut := depsd(t, "audit", "--limit", "0"); code != exitUsage || !strings.Contains(errOut, "--limit 0") {
		t.Errorf("audit --limit 0: exit %d %s", code, errOut)
	}
}
