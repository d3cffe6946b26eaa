package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// TestProgressLogLines: off a terminal, progress is a log line at the
// start, every interval and at the end, with the request rate and the time
// left (issue 12: a scan of 200 projects was silent for a minute).
func TestProgressLogLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var requests int64
	p := newProgress("scan", &buf, log, func() int64 { return requests }, func() time.Time { return clock })
	p.update(0, 200)
	for done := 1; done <= 200; done++ {
		clock = clock.Add(300 * time.Millisecond)
		requests += 2
		p.update(done, 200)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	// 60 s in all: a line at the start, one every 10 s or so, one at the end.
	if len(lines) != 7 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	if lines[0] != `level=INFO msg="scan started" total=200` {
		t.Errorf("first: %s", lines[0])
	}
	if want := `level=INFO msg="scan progress" done=34 total=200 requests_per_second=6.7 elapsed=10s eta=50s`; lines[1] != want {
		t.Errorf("second:\n%s\nwant\n%s", lines[1], want)
	}
	if want := `level=INFO msg="scan progress" done=200 total=200 requests_per_second=6.7 elapsed=1m0s`; lines[6] != want {
		t.Errorf("last:\n%s\nwant\n%s", lines[7], want)
	}
}

func TestScanShowsProgressAndJSONLogs(t *testing.T) {
	fakeInstance(t)
	code, _, errOut := depsd(t, "scan", "--group", "infra", "--group", "apps", "--log-format", "json")
	if code != exitOK {
		t.Fatalf("scan: %d %s", code, errOut)
	}
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if last["msg"] == "scan progress" && last["done"] == 4.0 && last["total"] == 4.0 {
			return
		}
	}
	t.Errorf("no final progress line in:\n%s", errOut)
}

// TestHooksDryRunPrintsPlanOnce: the plan is on stdout once, readable; the
// log does not repeat it (issue 12: each line twice, with Go brackets).
func TestHooksDryRunPrintsPlanOnce(t *testing.T) {
	srv, _ := fakeInstance(t)
	t.Setenv("DEPSD_WEBHOOK_SECRET", "hook-secret")
	// A drifted hook: only push events, no token.
	if _, err := srv.AddHook("infra/base", gitlabtest.Hook{URL: "https://depsd.example.com/hooks/gitlab", Events: []string{"push_events"}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := depsd(t, "hooks", "sync", "--group", "infra", "--url", "https://depsd.example.com/hooks/gitlab", "--dry-run")
	if code != exitOK {
		t.Fatalf("exit %d %s", code, errOut)
	}
	if strings.ContainsAny(out, "[]") || strings.Contains(errOut, "hook synced") || !strings.HasPrefix(out, "dry run: nothing is changed") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if !strings.Contains(out, "infra/ruby: would be created (") || strings.Count(out, "infra/ruby") != 1 ||
		!strings.Contains(out, "infra/base: would be updated (") || !strings.Contains(out, "; ") {
		t.Errorf("plan:\n%s", out)
	}
}

// TestWatchChain follows a chain from start to end, printing each change
// once, members in build order.
func TestWatchChain(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	member := func(p string, s chain.MemberState, up ...string) chain.MemberView {
		m := chain.MemberView{Project: p, State: s, Upstreams: up}
		if s != chain.Waiting {
			m.PipelineID, m.PipelineURL = 7, "https://gitlab.example.com/"+p+"/-/pipelines/7"
		}
		return m
	}
	views := []chain.ChainView{
		{ID: 3, State: chain.Running, Mode: chain.Full, Roots: []string{"a/base"}, Started: at, Members: []chain.MemberView{
			member("a/app", chain.Waiting, "a/base"), member("a/base", chain.Triggered)}},
		{ID: 3, State: chain.Running, Mode: chain.Full, Members: []chain.MemberView{
			member("a/app", chain.Waiting, "a/base"), member("a/base", chain.Triggered)}},
		{ID: 3, State: chain.Running, Mode: chain.Full, Members: []chain.MemberView{
			member("a/app", chain.Triggered, "a/base"), member("a/base", chain.Success)}},
		{ID: 3, State: chain.Finished, Mode: chain.Full, Members: []chain.MemberView{
			member("a/app", chain.Success, "a/base"), member("a/base", chain.Success)}},
	}
	i := 0
	fetch := func(context.Context) (chain.ChainView, error) { v := views[i]; i++; return v, nil }
	tick := make(chan time.Time, len(views))
	for range views {
		tick <- at
	}
	var buf bytes.Buffer
	last, err := watchChain(context.Background(), &buf, fetch, tick, func() time.Time { return at })
	if err != nil || last.State != chain.Finished || chainOutcome(last) != nil {
		t.Fatalf("watch: %v %v", last.State, err)
	}
	out := buf.String()
	for _, want := range []string{
		"  0     a/base   triggered  https://gitlab.example.com/a/base/-/pipelines/7",
		"  1     a/app    waiting    -",
		"12:00:00  a/base: success https://gitlab.example.com/a/base/-/pipelines/7\n12:00:00  a/app: triggered https://gitlab.example.com/a/app/-/pipelines/7\n",
		"12:00:00  a/app: success",
		"12:00:00  chain 3: finished\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "a/base: success") != 1 {
		t.Errorf("a change printed twice:\n%s", out)
	}
	failed := views[3]
	failed.Members = []chain.MemberView{member("a/app", chain.Failed), member("a/base", chain.Success)}
	if err := chainOutcome(failed); err == nil || !strings.Contains(err.Error(), "a/app failed") {
		t.Errorf("outcome of a failed member: %v", err)
	}
}
