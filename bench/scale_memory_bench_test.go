package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// BenchmarkMemory50000 is issue 30's goal 4: the real depsd binary at its
// default settings, each command a process of its own, with 50,000
// projects in scope (the generated instance of BenchmarkScan2000, 25 times
// larger), 20 ms per GitLab request, 100 ms pipelines:
//
//   - `depsd scan`, a first scan into an empty state file: its peak
//     resident set (scan-peak-rss-MB, the kernel's maxrss of the exited
//     process). Goal ≤ 200 MB.
//   - `depsd serve` on another empty state file: its own first scan at
//     start-up, then a rebuild of images/base-0 (about a fifth of the
//     instance downstream) to its end: its peak resident set through both
//     (serve-peak-rss-MB, VmHWM from /proc). Goal ≤ 200 MB.
//
// DEPSD_BENCH_SCALE=0.2 runs it at 10,000 projects. Memory is little
// disturbed by other work on the machine; the times (scan-s, chain-s)
// are.
func BenchmarkMemory50000(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc to read the peak resident set")
	}
	bin := buildDepsd(b)
	n := scaled(b, 50000)
	for b.Loop() {
		const latency, pipeline = 20 * time.Millisecond, 100 * time.Millisecond
		srv, clk := newFake(gitlabtest.Options{Token: "bench",
			Pipelines: gitlabtest.Behavior{Duration: pipeline, Outcome: "success"}})
		seedInstance(b, srv, n)
		clk.offset.Store(0)
		srv.SetLatency(latency)
		groups := []string{"images", "apps"}
		dir := verifyOffDir(b)
		env := append(os.Environ(), "GITLAB_URL="+srv.URL, "GITLAB_TOKEN="+srv.Token, "DEPSD_WEBHOOK_SECRET="+hookSecret)

		// depsd scan, a first scan.
		scanCmd := exec.Command(bin, "scan", "--group", groups[0], "--group", groups[1], "--log-level", "warn")
		scanCmd.Dir, scanCmd.Env = dir, append(env, "DEPSD_STATE="+benchState(b))
		start := time.Now()
		out, err := scanCmd.CombinedOutput()
		if err != nil {
			b.Fatalf("depsd scan: %v\n%s", err, out)
		}
		scanTook := time.Since(start)
		scanPeak := scanCmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
		b.Logf("depsd scan: %s", out)

		// depsd serve on an empty state: its start-up scan, then a rebuild.
		addr := freeAddr(b)
		serveCmd := exec.Command(bin, "serve", "--group", groups[0], "--group", groups[1], "--listen", addr, "--log-level", "warn")
		serveCmd.Dir, serveCmd.Env = dir, append(env, "DEPSD_STATE="+benchState(b))
		logs, err := os.Create(filepath.Join(dir, "serve.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer logs.Close()
		serveCmd.Stdout, serveCmd.Stderr = logs, logs
		if err := serveCmd.Start(); err != nil {
			b.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- serveCmd.Wait() }()
		stop := func() {
			_ = serveCmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = serveCmd.Process.Kill()
				<-exited
			}
		}
		base := "http://" + addr
		start = time.Now()
		waitFor(b, exited, logs.Name(), 15*time.Minute, "ready", func() bool {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		serveScanTook := time.Since(start)
		afterScan, err := peakRSS(serveCmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		// The hooks, through a client of the benchmark's own (set-up).
		ctx := context.Background()
		setup, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Concurrency: 16})
		if err != nil {
			b.Fatal(err)
		}
		srv.SetLatency(0)
		projects, err := setup.ListProjects(ctx, gitlab.Scope{Groups: groups})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := setup.SyncHooks(ctx, projects, gitlab.HookSpec{URL: base + "/hooks/gitlab", SecretToken: hookSecret}, false); err != nil {
			b.Fatal(err)
		}
		srv.SetLatency(latency)

		rebuildCmd := exec.Command(bin, "rebuild", "images/base-0", "--log-level", "warn")
		rebuildCmd.Dir = dir
		rebuildCmd.Env = serveCmd.Env
		out, err = rebuildCmd.CombinedOutput()
		if err != nil {
			b.Fatalf("depsd rebuild: %v\n%s", err, out)
		}
		var id int64
		if _, err := fmt.Sscanf(string(out), "chain %d started", &id); err != nil {
			b.Fatalf("depsd rebuild printed %q", out)
		}
		start = time.Now()
		var view chain.ChainView
		waitFor(b, exited, logs.Name(), 30*time.Minute, "the chain to finish", func() bool {
			resp, err := http.Get(fmt.Sprintf("%s/api/v1/chains/%d", base, id))
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
				return false
			}
			return view.State != chain.Running
		})
		took := time.Since(start)
		peak, err := peakRSS(serveCmd.Process.Pid)
		stop()
		if err != nil {
			b.Fatal(err)
		}
		if view.State != chain.Finished {
			b.Fatalf("chain %d ended %s", id, view.State)
		}
		srv.Close()
		mb := func(n int64) float64 { return float64(n) / (1 << 20) }
		b.ReportMetric(mb(scanPeak), "scan-peak-rss-MB")
		b.ReportMetric(mb(afterScan), "serve-scan-peak-rss-MB")
		b.ReportMetric(mb(peak), "serve-peak-rss-MB")
		b.ReportMetric(200, "goal-MB")
		b.ReportMetric(float64(len(projects)), "projects")
		b.ReportMetric(float64(len(view.Members)), "members")
		b.ReportMetric(scanTook.Seconds(), "scan-s")
		b.ReportMetric(serveScanTook.Seconds(), "serve-scan-s")
		b.ReportMetric(took.Seconds(), "chain-s")
		b.Logf("%d projects in scope (%s store): depsd scan peak RSS %.1f MB (%.0f s), goal ≤ 200 MB; depsd serve peak RSS %.1f MB after its start-up scan (%.0f s), %.1f MB through a rebuild of images/base-0 (%d members, %.0f s), goal ≤ 200 MB",
			len(projects), storeKind(), mb(scanPeak), scanTook.Seconds(), mb(afterScan), serveScanTook.Seconds(), mb(peak), len(view.Members), took.Seconds())
	}
}
