package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadValuesAreUsageErrors: unknown or malformed values name the flag
// and what it takes, and exit 2 (issue 12: they passed silently).
func TestBadValuesAreUsageErrors(t *testing.T) {
	fakeInstance(t)
	runCases(t, []cliCase{
		{name: "chains --only", args: []string{"chains", "--only", "bogus"}, code: exitUsage,
			stderr: `invalid argument "bogus" for "--only" flag: want one of running, blocked, finished, expired, canceled, merged`},
		{name: "log level", args: []string{"graph", "--log-level=verbose"}, code: exitUsage,
			stderr: `invalid argument "verbose" for "--log-level" flag: want one of debug, info, warn, error`},
		{name: "graph format", args: []string{"graph", "--format", "yaml"}, code: exitUsage, stderr: "want one of text, json, dot, mermaid"},
		{name: "rebuild mode", args: []string{"rebuild", "--mode", "all", "x/y"}, code: exitUsage, stderr: "want one of full, first-level"},
		{name: "watch without ID", args: []string{"chains", "--watch"}, code: exitUsage, stderr: "--watch follows one chain: give its ID"},
		{name: "watch interval", args: []string{"chains", "1", "--watch", "--interval", "0s"}, code: exitUsage, stderr: "--interval 0s: want a positive duration"},
		{name: "log format", args: []string{"graph", "--log-format", "xml"}, code: exitUsage, stderr: `"xml" for "--log-format" flag: want one of text, json`},
	})
}

// TestReadOnlyCommandsCreateNoState (issue 12: depsd graph in an empty
// directory wrote a new depsd.db).
func TestReadOnlyCommandsCreateNoState(t *testing.T) {
	_, dir := fakeInstance(t)
	state := filepath.Join(dir, "depsd.db")
	for _, args := range [][]string{{"graph"}, {"deps", "a/b"}, {"rdeps", "a/b"}, {"chains"}, {"chains", "1"}, {"schedules"}, {"status"}, {"rebuild", "--dry-run", "a/b"}} {
		code, _, errOut := depsd(t, args...)
		if code != exitFail || !strings.Contains(errOut, "no state at "+state+": run depsd scan first") {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
		if _, err := os.Stat(state); err == nil {
			t.Fatalf("%v created %s", args, state)
		}
	}
}

// TestConfigErrorsInUserTerms: a config error names the key, its line and
// what to write; serve lists every missing setting at once.
func TestConfigErrorsInUserTerms(t *testing.T) {
	_, dir := fakeInstance(t)
	cfg := filepath.Join(dir, "depsd.yaml")
	os.WriteFile(cfg, []byte("gitlab:\n  url: https://gitlab.example.com\n  urll: x\n  timeout: 5\n"), 0o600)
	code, _, errOut := depsd(t, "scan", "--config", cfg)
	for _, want := range []string{
		cfg + ":3: gitlab.urll is not a known key: did you mean gitlab.url? (known: url, token_file,",
		cfg + ":4: gitlab.timeout: 5 is not a duration; write e.g. 30s",
	} {
		if code != exitFail || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errOut, want)
		}
	}

	os.Remove(cfg)
	t.Setenv("GITLAB_URL", "")
	t.Setenv("GITLAB_TOKEN", "")
	t.Setenv("DEPSD_WEBHOOK_SECRET", "")
	code, _, errOut = depsd(t, "serve", "--listen", "127.0.0.1:0")
	for _, want := range []string{"4 problems", "gitlab.url is not set", "no GitLab token", "scope is empty", "no webhook secret"} {
		if code != exitFail || !strings.Contains(errOut, want) {
			t.Errorf("serve: exit %d, stderr:\n%s\nwant %q", code, errOut, want)
		}
	}
}

// TestConfigCheck validates config and environment and shows the effective
// configuration without secrets.
func TestConfigCheck(t *testing.T) {
	_, dir := fakeInstance(t)
	t.Setenv("GITLAB_TOKEN", "glpat-very-secret")
	const signing = "whsec_c2lnbmluZy10b2tlbi1vZi10aGlydHktdHdvLWJ5dGU="
	t.Setenv("DEPSD_WEBHOOK_SIGNING_TOKEN", signing)
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("hook-secret-value\n"), 0o600)
	cfg := filepath.Join(dir, "depsd.yaml")
	os.WriteFile(cfg, []byte("scope:\n  groups: [infra]\nhooks:\n  secret_file: "+secret+"\nmode: chain\n"), 0o600)
	code, out, errOut := depsd(t, "config", "check", "--config", cfg)
	if code != exitOK || !strings.Contains(out, "token: '******** (set)'") || !strings.Contains(out, "secret: '******** (set)'") ||
		!strings.Contains(out, "signing_token: '******** (set)'") || !strings.Contains(out, "signing: auto") ||
		!strings.Contains(out, "mode: full") || !strings.Contains(out, "catch_up: once") || !strings.Contains(out, "rescan: '@every 6h'") || !strings.Contains(out, "  groups:\n    - infra") || !strings.Contains(out, "configuration OK") {
		t.Errorf("config check: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "glpat-very-secret") || strings.Contains(out+errOut, "hook-secret-value") || strings.Contains(out+errOut, signing[6:]) {
		t.Errorf("secret printed:\n%s%s", out, errOut)
	}
	if !strings.Contains(errOut, `warning: mode: "chain" is the old name of "full"`) {
		t.Errorf("no deprecation warning: %s", errOut)
	}

	os.WriteFile(cfg, []byte("schedules:\n  - project: infra/base\n    cron: \"@fortnightly\"\n"), 0o600)
	code, _, errOut = depsd(t, "config", "check", "--config", cfg)
	if code != exitFail || !strings.Contains(errOut, "schedules[0] (infra/base)") || !strings.Contains(errOut, "scope is empty") {
		t.Errorf("bad config: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := depsd(t, "config", "check", "--config", cfg, "--serve=false", "--group", "infra"); code != exitFail || strings.Contains(errOut, "scope is empty") {
		t.Errorf("--serve=false: exit %d\n%s", code, errOut)
	}
}
