package main

import (
	"path/filepath"
	"testing"
)

// migrate-state copies a scanned state into an empty store once; a second
// run refuses and says why. status reads either store.
func TestMigrateStateAndStatus(t *testing.T) {
	_, dir := fakeInstance(t)
	if code, out, errOut := depsd(t, "scan", "--group", "infra", "--group", "apps"); code != exitOK {
		t.Fatalf("scan: %d %s %s", code, out, errOut)
	}
	from, to := filepath.Join(dir, "depsd.db"), filepath.Join(dir, "copy.db")
	runCases(t, []cliCase{
		{name: "copy", args: []string{"migrate-state", "--from", from, "--to", to}, code: exitOK, stdout: "projects       4\n"},
		{name: "second copy refused", args: []string{"migrate-state", "--from", from, "--to", to}, code: exitFail, stderr: "target store is not empty: projects has 4 rows"},
		{name: "missing --to", args: []string{"migrate-state", "--from", from}, code: exitUsage, stderr: "both --from and --to"},
		{name: "missing source", args: []string{"migrate-state", "--from", filepath.Join(dir, "nope.db"), "--to", filepath.Join(dir, "x.db")}, code: exitFail, stderr: "nope.db: stat"},
		{name: "graph of the copy", args: []string{"graph", "--state", to, "--format", "json"}, code: exitOK, stdout: `"apps/docs"`},
		{name: "status", args: []string{"status", "--state", to}, code: exitOK, stdout: "store:    sqlite " + to},
	})
}
