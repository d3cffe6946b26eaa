package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/webhook"
)

// fakeInstance starts a fake GitLab with base → ruby → app and a
// .gitlab-deps user, and points the environment at it.
func fakeInstance(t *testing.T) (*gitlabtest.Server, string) {
	t.Helper()
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-cli-test"})
	t.Cleanup(srv.Close)
	for path, files := range map[string]map[string]string{
		"infra/base": {"Containerfile": "FROM debian:bookworm\n"},
		"infra/ruby": {"Containerfile": "FROM registry.example.com/infra/base:latest\n"},
		"apps/app":   {"Containerfile": "FROM registry.example.com/infra/ruby:3\n"},
		"apps/docs":  {".gitlab-deps": "apps/app\n"},
	} {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: files}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	t.Setenv("GITLAB_URL", srv.URL)
	t.Setenv("GITLAB_TOKEN", srv.Token)
	t.Setenv("DEPSD_STATE", filepath.Join(dir, "depsd.db"))
	t.Setenv("DEPSD_CONFIG", "")
	t.Chdir(dir)
	return srv, dir
}

func depsd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestScanGraphDepsRdeps(t *testing.T) {
	fakeInstance(t)
	code, out, errOut := depsd(t, "graph")
	if code != exitFail || !strings.Contains(errOut, "run depsd scan first") {
		t.Errorf("graph before scan: exit %d, %s", code, errOut)
	}
	code, out, errOut = depsd(t, "scan", "--group", "infra", "--group", "apps", "--log-level", "warn")
	if code != exitOK || !strings.Contains(out, "scanned 4 projects") || !strings.Contains(out, "3 dependencies between projects, 1 external images") {
		t.Fatalf("scan: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}

	code, out, _ = depsd(t, "graph", "--format", "json")
	if code != exitOK {
		t.Fatalf("graph exit %d", code)
	}
	var doc struct {
		Projects []struct {
			Path                 string
			Upstream, Downstream []string
			External             []string
		}
		Cycles [][]string
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("graph json: %v\n%s", err, out)
	}
	if len(doc.Projects) != 4 || doc.Cycles == nil {
		t.Fatalf("graph: %+v", doc)
	}
	base := doc.Projects[2]
	if base.Path != "infra/base" || strings.Join(base.Downstream, ",") != "infra/ruby" || strings.Join(base.External, ",") != "docker.io/library/debian:bookworm" {
		t.Errorf("base: %+v", base)
	}
	for _, format := range []string{"text", "dot", "mermaid"} {
		if code, out, _ := depsd(t, "graph", "--format", format); code != exitOK || !strings.Contains(out, "infra/ruby") {
			t.Errorf("graph --format %s: exit %d\n%s", format, code, out)
		}
	}
	code, out, _ = depsd(t, "graph", "--format", "svg", "--around", "infra/ruby", "--depth", "1")
	if code != exitOK || !strings.HasPrefix(out, "<svg") || !strings.Contains(out, `data-project="infra/base"`) ||
		!strings.Contains(out, `data-project="apps/app"`) || strings.Contains(out, `data-project="apps/docs"`) {
		t.Errorf("graph --format svg --around infra/ruby --depth 1: exit %d\n%s", code, out)
	}
	if code, _, errOut := depsd(t, "graph", "--around", "no/such"); code != exitFail || !strings.Contains(errOut, "no/such is not in the scanned graph") {
		t.Errorf("--around unknown: exit %d %s", code, errOut)
	}
	if code, _, _ := depsd(t, "graph", "--format", "yaml"); code != exitUsage {
		t.Errorf("unknown format: exit %d", code)
	}

	if code, out, _ := depsd(t, "deps", "apps/app"); code != exitOK || out != "infra/ruby\n" {
		t.Errorf("deps: exit %d %q", code, out)
	}
	if code, out, _ := depsd(t, "rdeps", "infra/base"); code != exitOK || out != "infra/ruby\n" {
		t.Errorf("rdeps: exit %d %q", code, out)
	}
	want := "wave 1: infra/ruby\nwave 2: apps/app\nwave 3: apps/docs\n"
	if code, out, _ := depsd(t, "rdeps", "--all", "infra/base"); code != exitOK || out != want {
		t.Errorf("rdeps --all: exit %d\n%s\nwant\n%s", code, out, want)
	}
	if code, _, errOut := depsd(t, "deps", "nope/nope"); code != exitFail || !strings.Contains(errOut, "not in the scanned graph") {
		t.Errorf("unknown project: exit %d %s", code, errOut)
	}
	if code, _, _ := depsd(t, "deps"); code != exitUsage {
		t.Errorf("deps without project: exit %d", code)
	}
}

func TestScanErrorsSayWhich(t *testing.T) {
	fakeInstance(t)
	t.Setenv("GITLAB_TOKEN", "glpat-wrong")
	code, _, errOut := depsd(t, "scan", "--group", "infra")
	if code != exitFail || !strings.Contains(errOut, "rejected the token") || strings.Contains(errOut, "glpat-wrong") {
		t.Errorf("bad token: exit %d, %s", code, errOut)
	}

	// Nothing listens on a port we just closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := filepath.Join(t.TempDir(), "depsd.yaml")
	if err := os.WriteFile(cfg, []byte("gitlab:\n  max_retries: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = depsd(t, "scan", "--config", cfg, "--gitlab-url", "http://"+addr, "--group", "infra")
	if code != exitFail || !strings.Contains(errOut, "could not be reached") {
		t.Errorf("unreachable: exit %d, %s", code, errOut)
	}

	code, _, errOut = depsd(t, "scan", "--group", "does-not-exist")
	if code != exitFail || !strings.Contains(errOut, "does-not-exist") {
		t.Errorf("missing group: exit %d, %s", code, errOut)
	}
	t.Setenv("GITLAB_URL", "")
	if code, _, errOut := depsd(t, "scan", "--group", "infra"); code != exitFail || !strings.Contains(errOut, "gitlab.url is not set") {
		t.Errorf("no url: exit %d, %s", code, errOut)
	}
}

func TestHooksSyncIsIdempotent(t *testing.T) {
	srv, _ := fakeInstance(t)
	t.Setenv("DEPSD_WEBHOOK_SECRET", "hook-secret")
	args := []string{"hooks", "sync", "--group", "infra", "--group", "apps", "--url", "https://depsd.example.com/hooks/gitlab"}
	code, out, errOut := depsd(t, append(args, "--dry-run")...)
	if code != exitOK || !strings.Contains(out, "would be created") || len(srv.Hooks("infra/base")) != 0 {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = depsd(t, args...)
	if code != exitOK || strings.Count(out, ": created") != 4 {
		t.Fatalf("first sync: exit %d\n%s%s", code, out, errOut)
	}
	hooks := srv.Hooks("apps/docs")
	docs, _ := srv.Project("apps/docs")
	if len(hooks) != 1 || hooks[0].URL != "https://depsd.example.com/hooks/gitlab" || strings.Join(hooks[0].Events, ",") != "pipeline_events,push_events" ||
		hooks[0].Token != webhook.ProjectSecret("hook-secret", docs.ID) || !hooks[0].EnableSSLVerification {
		t.Errorf("hook: %+v; want the secret of apps/docs", hooks)
	}
	// No signing token configured: one is generated, kept in the state,
	// installed on every hook, and never printed.
	signing := hooks[0].SigningToken
	if _, err := webhook.ParseSigningToken(signing); err != nil || srv.Hooks("infra/base")[0].SigningToken != signing {
		t.Errorf("signing token %v: %+v", err, srv.Hooks("infra/base"))
	}
	if strings.Contains(out+errOut, signing[len("whsec_"):]) {
		t.Errorf("the signing token is printed:\n%s%s", out, errOut)
	}
	code, out, _ = depsd(t, args...)
	if code != exitOK || !strings.Contains(out, "nothing to change") || srv.Hooks("apps/docs")[0].SigningToken != signing {
		t.Errorf("second sync: exit %d\n%s", code, out)
	}
	// A GitLab that ignores signing tokens: a note, not an error.
	srv.SetWebhookSigning(gitlabtest.SigningUnsupported)
	code, out, errOut = depsd(t, args...)
	if code != exitOK || !strings.Contains(out, "note: 4 hooks are not signed") {
		t.Errorf("old GitLab: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("DEPSD_WEBHOOK_SECRET", "")
	if code, _, errOut := depsd(t, args...); code != exitFail || !strings.Contains(errOut, "no webhook secret") {
		t.Errorf("no secret: exit %d %s", code, errOut)
	}
}

// hooks.mode: group from the command line: a hook on infra; apps, where
// the token's user is not Owner, is reported with what to do and keeps
// project hooks. Not an error.
func TestHooksSyncGroupMode(t *testing.T) {
	srv, _ := fakeInstance(t)
	srv.SetPremium(true)
	srv.SetGroupOwner("apps", false)
	t.Setenv("DEPSD_WEBHOOK_SECRET", "hook-secret")
	t.Setenv("DEPSD_HOOKS_MODE", "group")
	code, out, errOut := depsd(t, "hooks", "sync", "--group", "infra", "--group", "apps", "--url", "https://depsd.example.com/hooks/gitlab")
	if code != exitOK || !strings.Contains(out, "group infra: created") || !strings.Contains(out, "group apps: group-hook-refused (GitLab answered 403") ||
		!strings.Contains(out, "Owner role") || !strings.Contains(out, "apps/app: created") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if len(srv.GroupHooks("infra")) != 1 || len(srv.Hooks("infra/base")) != 0 || len(srv.Hooks("apps/docs")) != 1 {
		t.Errorf("group hooks %+v, infra/base %+v, apps/docs %+v", srv.GroupHooks("infra"), srv.Hooks("infra/base"), srv.Hooks("apps/docs"))
	}
}

func TestRebuildChainsSchedules(t *testing.T) {
	srv, dir := fakeInstance(t)
	if code, out, errOut := depsd(t, "scan", "--group", "infra", "--group", "apps"); code != exitOK {
		t.Fatalf("scan: %d %s %s", code, out, errOut)
	}
	// History for the estimate: base took 4 and 6 minutes, docs 10.
	now := time.Now()
	for _, h := range []struct {
		path string
		took time.Duration
	}{{"infra/base", 4 * time.Minute}, {"infra/base", 6 * time.Minute}, {"apps/docs", 10 * time.Minute}} {
		if _, err := srv.AddPastPipeline(h.path, "", "push", "success", now.Add(-time.Hour), now.Add(-time.Hour+h.took)); err != nil {
			t.Fatal(err)
		}
	}
	want := "wave 0: infra/base\nwave 1: infra/ruby\nwave 2: apps/app\nwave 3: apps/docs\n" +
		"estimate: 15m00s wall time (critical path infra/base → infra/ruby → apps/app → apps/docs), 15m00s of pipelines in total, for 4 projects\n"
	if code, out, _ := depsd(t, "rebuild", "--dry-run", "infra/base"); code != exitOK || !strings.HasPrefix(out, want) || !strings.Contains(out, "no history (counted as 0): apps/app infra/ruby") {
		t.Errorf("rebuild --dry-run: exit %d\n%s", code, out)
	}
	if n := len(srv.Pipelines("infra/base")); n != 2 {
		t.Fatalf("dry run created %d pipelines", n-2)
	}
	code, out, errOut := depsd(t, "rebuild", "infra/ruby")
	if code != exitOK || !strings.Contains(out, "chain 1 started at infra/ruby") || !strings.Contains(out, "infra/ruby: pipeline") {
		t.Fatalf("rebuild: exit %d\n%s%s", code, out, errOut)
	}
	ps := srv.Pipelines("infra/ruby")
	if len(ps) != 1 || ps[0].Variables["DEPSD_CHAIN_ID"] != "1" || ps[0].Variables["DEPSD_ACTION_ID"] == "" {
		t.Fatalf("ruby pipelines: %+v", ps)
	}
	if n := len(srv.Pipelines("apps/app")); n != 0 {
		t.Errorf("app triggered before ruby succeeded: %d", n)
	}
	if code, out, _ := depsd(t, "chains"); code != exitOK || !strings.Contains(out, "infra/ruby") || !strings.Contains(out, "1 triggered") {
		t.Errorf("chains: exit %d\n%s", code, out)
	}
	if code, out, _ := depsd(t, "chains", "1"); code != exitOK || !strings.Contains(out, "waiting for infra/ruby") {
		t.Errorf("chains 1: exit %d\n%s", code, out)
	}
	if code, _, errOut := depsd(t, "rebuild", "no/such"); code != exitFail || !strings.Contains(errOut, "not in the scanned graph") {
		t.Errorf("unknown project: exit %d %s", code, errOut)
	}

	cfg := filepath.Join(dir, "sched.yaml")
	os.WriteFile(cfg, []byte("schedules:\n  - project: infra/base\n    cron: \"@daily\"\n"), 0o600)
	if code, out, errOut := depsd(t, "schedules", "--config", cfg); code != exitOK || !strings.Contains(out, "infra/base") || !strings.Contains(out, "rescan") {
		t.Errorf("schedules: exit %d\n%s%s", code, out, errOut)
	}
	os.WriteFile(cfg, []byte("schedules:\n  - project: infra/base\n    cron: \"@fortnightly\"\n"), 0o600)
	if code, _, errOut := depsd(t, "schedules", "--config", cfg); code != exitFail || !strings.Contains(errOut, "schedules[0] (infra/base)") {
		t.Errorf("bad schedule: exit %d %s", code, errOut)
	}
}

// TestDemo checks what the simulated GitLab recorded, as the demo prints
// it per project, not the engine's own counters: one pipeline each.
func TestDemo(t *testing.T) {
	code, out, errOut := depsd(t, "demo", "--pipeline-time", "50ms")
	if code != exitOK || !strings.Contains(out, "each built exactly once (as GitLab recorded)") {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	rows := regexp.MustCompile(`(?m)^  (\S+) +success +pipeline \d+ +created on GitLab: (\d+) `).FindAllStringSubmatch(out, -1)
	if len(rows) != 7 {
		t.Fatalf("%d projects with GitLab's pipeline count, want the 7 of the sample instance:\n%s", len(rows), out)
	}
	for _, r := range rows {
		if r[2] != "1" {
			t.Errorf("GitLab recorded %s pipelines of %s, want 1", r[2], r[1])
		}
	}
}

func TestServeRefusesWithoutSecret(t *testing.T) {
	fakeInstance(t)
	t.Setenv("DEPSD_WEBHOOK_SECRET", "")
	code, _, errOut := depsd(t, "serve", "--group", "infra", "--listen", "127.0.0.1:0")
	if code != exitFail || !strings.Contains(errOut, "no webhook secret") {
		t.Errorf("serve without a secret: exit %d, %s", code, errOut)
	}
	t.Setenv("DEPSD_WEBHOOK_SECRET", "s")
	if code, _, errOut := depsd(t, "serve", "--group", "infra", "--mode", "sometimes"); code != exitUsage || !strings.Contains(errOut, `"sometimes" for "--mode" flag: want one of full, first-level`) {
		t.Errorf("bad mode: exit %d, %s", code, errOut)
	}
}

// TestRebuildFollowsConfiguredMode: serve and rebuild read the mode from
// the same configuration, so a rebuild never starts a full chain under a
// first-level daemon.
func TestRebuildFollowsConfiguredMode(t *testing.T) {
	_, dir := fakeInstance(t)
	cfg := filepath.Join(dir, "depsd.yaml")
	if err := os.WriteFile(cfg, []byte("mode: first-level\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEPSD_CONFIG", cfg)
	if code, _, errOut := depsd(t, "scan", "--group", "infra", "--group", "apps"); code != exitOK {
		t.Fatalf("scan: %s", errOut)
	}
	if code, _, errOut := depsd(t, "rebuild", "infra/base"); code != exitOK {
		t.Fatalf("rebuild: %s", errOut)
	}
	code, out, _ := depsd(t, "chains", "--json", "1")
	var view struct {
		Mode    string
		Members []struct{ Project string }
	}
	if code != exitOK || json.Unmarshal([]byte(out), &view) != nil {
		t.Fatalf("chains: exit %d\n%s", code, out)
	}
	if view.Mode != "first-level" || len(view.Members) != 1 {
		t.Errorf("rebuild under mode first-level: %+v", view)
	}
}
