package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// BenchmarkServeMemory10000 is issue 10's goal 7: the real depsd binary,
// `depsd serve` at its default settings as a process of its own, with
// 10,000 projects in scope (the generated instance of BenchmarkScan2000,
// five times larger), rebuilds a base image (images/base-0: about a fifth
// of the instance downstream), 20 ms per GitLab request, 100 ms pipelines.
// It reports the process's peak resident set (VmHWM, from /proc), which
// covers its start-up scan, the leader's start-up jobs and the whole
// chain. Goal: under 100 MB.
func BenchmarkServeMemory10000(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc to read the peak resident set")
	}
	bin := buildDepsd(b)
	for b.Loop() {
		const latency, pipeline = 20 * time.Millisecond, 100 * time.Millisecond
		srv, clk := newFake(gitlabtest.Options{Token: "bench",
			Pipelines: gitlabtest.Behavior{Duration: pipeline, Outcome: "success"}})
		seedInstance(b, srv, 10000)
		state := benchState(b)
		groups := []string{"images", "apps"}
		setup, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Concurrency: 16})
		if err != nil {
			b.Fatal(err)
		}
		// The first scan is set-up, not measured (see serve): the daemon's
		// own start-up scan is then incremental.
		ctx := context.Background()
		st, err := store.Open(ctx, state)
		if err != nil {
			b.Fatal(err)
		}
		cfg := config.Defaults()
		cfg.Scope.Groups = groups
		if _, err := scan.Run(ctx, setup, st, cfg.ScanOptions(nil, nil)); err != nil {
			b.Fatal(err)
		}
		st.Close()
		clk.offset.Store(0)

		addr := freeAddr(b)
		dir := verifyOffDir(b)
		// Configured as an operator would, in an empty directory: no
		// depsd.yaml, so every setting is the default.
		env := append(os.Environ(), "GITLAB_URL="+srv.URL, "GITLAB_TOKEN="+srv.Token, "DEPSD_STATE="+state,
			"DEPSD_WEBHOOK_SECRET="+hookSecret)
		serveCmd := exec.Command(bin, "serve", "--group", groups[0], "--group", groups[1], "--listen", addr, "--log-level", "warn")
		serveCmd.Dir, serveCmd.Env = dir, env
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
		waitFor(b, exited, logs.Name(), 5*time.Minute, "ready", func() bool {
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		projects, err := setup.ListProjects(ctx, gitlab.Scope{Groups: groups})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := setup.SyncHooks(ctx, projects, gitlab.HookSpec{URL: base + "/hooks/gitlab", SecretToken: hookSecret}, false); err != nil {
			b.Fatal(err)
		}
		srv.SetLatency(latency)

		// An operator's `depsd rebuild` next to the running daemon, which
		// sends the pipelines.
		rebuildCmd := exec.Command(bin, "rebuild", "images/base-0", "--log-level", "warn")
		rebuildCmd.Dir = dir
		rebuildCmd.Env = append(os.Environ(), "DEPSD_STATE="+state)
		out, err := rebuildCmd.CombinedOutput()
		if err != nil {
			b.Fatalf("depsd rebuild: %v\n%s", err, out)
		}
		var id int64
		if _, err := fmt.Sscanf(string(out), "chain %d started", &id); err != nil {
			b.Fatalf("depsd rebuild printed %q", out)
		}
		start := time.Now()
		var view chain.ChainView
		waitFor(b, exited, logs.Name(), 15*time.Minute, "the chain to finish", func() bool {
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
		b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MB")
		b.ReportMetric(100, "goal-MB")
		b.ReportMetric(float64(len(view.Members)), "members")
		b.ReportMetric(took.Seconds(), "chain-s")
		b.Logf("depsd serve with %d projects in scope (%s store), rebuild of images/base-0 (%d members, %.0f s): peak RSS %.1f MB, goal < 100 MB",
			len(projects), storeKind(), len(view.Members), took.Seconds(), float64(peak)/(1<<20))
	}
}

// buildDepsd builds cmd/depsd as a user gets it (no race detector).
func buildDepsd(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "depsd")
	cmd := exec.Command("go", "build", "-o", bin, "gitlab.com/depsd/depsd/cmd/depsd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/depsd: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond every half second until it holds, the process exits
// or the timeout passes.
func waitFor(b *testing.B, exited <-chan error, logFile string, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case err := <-exited:
			logs, _ := os.ReadFile(logFile)
			b.Fatalf("depsd serve exited while waiting for %s: %v\n%s", what, err, logs)
		default:
		}
		if time.Now().After(deadline) {
			logs, _ := os.ReadFile(logFile)
			b.Fatalf("no %s after %s\n%s", what, timeout, logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// verifyOffDir is a working directory whose depsd.yaml turns image
// verification off: the generated instance's images name
// registry.example.com, which is not there (and must not be asked for).
// So the memory figures are without verification, which reads every
// project after each scan to know what it publishes.
func verifyOffDir(b *testing.B) string {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "depsd.yaml"), []byte("images:\n  verify: \"off\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	return dir
}
