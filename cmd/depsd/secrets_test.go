package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/store/pgtest"
)

// TestNoCommandPrintsASecret runs every command that reads the
// configuration or the state with secrets everywhere they can be given:
// the GitLab token, the webhook secret and signing token, and a password
// in the postgres:// state URL (in its user info and as a query
// parameter). None of them may appear in any output, whether the command
// succeeds or fails (config check's effective configuration, graph's "no
// scan yet", rebuild's "GitLab is not configured here" named the raw URL).
func TestNoCommandPrintsASecret(t *testing.T) {
	srv, dir := fakeInstance(t)
	const (
		pgPassword  = "pg-Passw0rd-in-the-URL"
		pgQueryPass = "pg-Passw0rd-in-the-query"
		hookSecret  = "hook-Secret-value-123"
		signing     = "whsec_c2lnbmluZy10b2tlbi1vZi10aGlydHktdHdvLWJ5dGU="
	)
	secrets := []string{pgPassword, pgQueryPass, hookSecret, signing[len("whsec_"):], srv.Token}
	// The test server trusts local connections: the password is sent and
	// ignored, so every command works on this state.
	state := strings.Replace(pgtest.Database(t), "://depsd@", "://depsd:"+pgPassword+"@", 1)
	if !strings.Contains(state, pgPassword) {
		t.Fatalf("no password put in %s", state)
	}
	other := strings.Replace(pgtest.Database(t), "://depsd@", "://depsd:"+pgPassword+"@", 1)
	sep := "?"
	if strings.Contains(other, "?") {
		sep = "&"
	}
	other += sep + "password=" + pgQueryPass
	t.Setenv("DEPSD_STATE", state)
	t.Setenv("DEPSD_WEBHOOK_SECRET", hookSecret)
	t.Setenv("DEPSD_WEBHOOK_SIGNING_TOKEN", signing)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := filepath.Join(dir, "depsd.yaml")
	if err := os.WriteFile(cfg, []byte("scope:\n  groups: [infra, apps]\nhooks:\n  url: https://depsd.example.com/hooks/gitlab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEPSD_CONFIG", cfg)
	check := func(args ...string) int {
		t.Helper()
		code, out, errOut := depsd(t, args...)
		for _, s := range secrets {
			if strings.Contains(out+errOut, s) {
				t.Errorf("depsd %s (exit %d) printed the secret %q:\n%s%s", strings.Join(args, " "), code, s, out, errOut)
			}
		}
		return code
	}
	// Before any scan: the commands that read one say there is none.
	for _, args := range [][]string{{"config", "check"}, {"graph"}, {"deps", "infra/ruby"}, {"rdeps", "infra/base"},
		{"chains"}, {"schedules"}, {"status"}, {"freshness"}, {"rebuild", "infra/base"}} {
		check(args...)
	}
	if code := check("scan", "--log-level", "debug"); code != exitOK {
		t.Fatalf("scan: exit %d", code)
	}
	for _, args := range [][]string{{"config", "check"}, {"graph"}, {"graph", "--format", "json"}, {"deps", "infra/ruby"}, {"rdeps", "--all", "infra/base"},
		{"rebuild", "--dry-run", "infra/base"}, {"chains"}, {"schedules", "--json"}, {"status"}, {"freshness", "--json"},
		{"hooks", "sync", "--dry-run", "--log-level", "debug"}, {"check", "--log-level", "debug"},
		{"migrate-state", "--from", state, "--to", other}, {"migrate-state", "--from", state, "--to", other},
		{"serve", "--listen", busy.Addr().String(), "--log-level", "debug"}} {
		check(args...)
	}
	// Without GitLab, rebuild records the chain for a running serve and
	// says where.
	t.Setenv("GITLAB_URL", "")
	if code := check("rebuild", "infra/base"); code != exitOK {
		t.Errorf("rebuild without GitLab: exit %d", code)
	}
	check("chains", "1")
}
