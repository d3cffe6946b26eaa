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
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
)

// BenchmarkServeMemory10000 is issue 10's goal 7: the real depsd binary,
// `depsd serve` at its default settings as a process of its own, with
// 10,000 projects in scope (memoryInstance: the generated instance of
// BenchmarkScan2000, five times larger, its images on a real registry and
// verified), rebuilds a base image (images/base-0: about a fifth of the
// instance downstream), 20 ms per GitLab request, 100 ms pipelines. It
// reports the process's peak resident set (VmHWM, from /proc), which
// covers its start-up scan, the leader's start-up jobs and the whole
// chain with the verification of every image built. Goal: under 100 MB.
func BenchmarkServeMemory10000(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc to read the peak resident set")
	}
	bin := buildDepsd(b)
	for b.Loop() {
		m := newMemoryInstance(b, 10000)
		state := benchState(b)
		// The first scan is set-up, not measured (see serve): the daemon's
		// own start-up scan is then incremental.
		setup := m.setupClient(b)
		ctx := context.Background()
		st, err := store.Open(ctx, state)
		if err != nil {
			b.Fatal(err)
		}
		cfg := config.Defaults()
		cfg.Scope.Groups = m.groups
		if _, err := scan.Run(ctx, setup, st, cfg.ScanOptions(nil, nil)); err != nil {
			b.Fatal(err)
		}
		st.Close()
		m.clk.offset.Store(0)

		serve := m.startServe(b, bin, state)
		serve.waitReady(b, 5*time.Minute)
		projects := m.installHooks(b, serve)
		view, took := m.rebuild(b, bin, serve, 15*time.Minute)
		peak := serve.peak(b)
		serve.stop()
		fresh := m.checkVerified(b, view)
		m.srv.Close()
		b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MB")
		b.ReportMetric(100, "goal-MB")
		b.ReportMetric(float64(len(view.Members)), "members")
		b.ReportMetric(float64(fresh), "verified-fresh")
		b.ReportMetric(took.Seconds(), "chain-s")
		b.Logf("depsd serve with %d projects in scope (%s store, %s), rebuild of images/base-0 (%d members, %d images verified fresh, %.0f s): peak RSS %.1f MB, goal < 100 MB",
			projects, storeKind(), m.verification(), len(view.Members), fresh, took.Seconds(), float64(peak)/(1<<20))
	}
}

// memoryInstance is what both memory benchmarks run depsd against, as an
// operator runs it: the generated instance of BenchmarkScan2000
// (seedInstanceOn) on the fake GitLab, whose projects' images live on a
// real registry (docker-registry on 127.0.0.1) and are pushed there by
// the simulated pipelines (each base on an image of its own there, each
// runtime on its base, annotated as buildah annotates), so that the
// verification depsd does by default reads real images; and a working
// directory without depsd.yaml: every setting is the default.
//
// DEPSD_BENCH_VERIFY=off gives the directory a depsd.yaml with
// images.verify off instead, to compare (its figures are not at the
// default settings; benchdoc records the variable).
type memoryInstance struct {
	srv     *gitlabtest.Server
	clk     *fakeClock
	latency time.Duration // per GitLab request, once the hooks are in place
	groups  []string
	dir     string   // depsd's working directory
	env     []string // GITLAB_URL, GITLAB_TOKEN, DEPSD_WEBHOOK_SECRET
	verify  bool
}

func newMemoryInstance(b *testing.B, n int) *memoryInstance {
	b.Helper()
	const latency, pipeline = 20 * time.Millisecond, 100 * time.Millisecond
	reg := registrytest.Start(b)
	srv, clk := newFake(gitlabtest.Options{Token: "bench", RegistryHost: reg,
		Pipelines: gitlabtest.Behavior{Duration: pipeline, Outcome: "success"}})
	b.Cleanup(srv.Close)
	external := reg + "/external/debian:bookworm-%d"
	seedInstanceOn(b, srv, n, reg, external)
	for i := range seedBases {
		registrytest.Push(b, fmt.Sprintf(external, i))
		if err := srv.SetImages(fmt.Sprintf("images/base-%d", i), gitlabtest.Images{From: fmt.Sprintf(external, i), Annotate: true}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range seedRuntimes {
		// The apps name a runtime by tag 1 and by latest.
		runtime := fmt.Sprintf("%s/images/runtime-%d", reg, i)
		if err := srv.SetImages(fmt.Sprintf("images/runtime-%d", i), gitlabtest.Images{Refs: []string{runtime + ":1", runtime + ":latest"},
			From: fmt.Sprintf("%s/images/base-%d:latest", reg, i%seedBases), Annotate: true}); err != nil {
			b.Fatal(err)
		}
	}
	m := &memoryInstance{srv: srv, clk: clk, latency: latency, groups: []string{"images", "apps"}, dir: b.TempDir(),
		env:    append(os.Environ(), "GITLAB_URL="+srv.URL, "GITLAB_TOKEN="+srv.Token, "DEPSD_WEBHOOK_SECRET="+hookSecret),
		verify: true}
	switch v := os.Getenv("DEPSD_BENCH_VERIFY"); v {
	case "":
		// The instance's registry is on 127.0.0.1, over plain HTTP:
		// listed, as an operator would.
		if err := os.WriteFile(filepath.Join(m.dir, "depsd.yaml"), []byte("images:\n  insecure_registries: [\""+reg+"\"]\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	case "off":
		m.verify = false
		if err := os.WriteFile(filepath.Join(m.dir, "depsd.yaml"), []byte("images:\n  verify: \"off\"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		b.Logf("images.verify off (DEPSD_BENCH_VERIFY=off), not the default")
	default:
		b.Fatalf("DEPSD_BENCH_VERIFY=%q: want off, or unset for the default (enforce)", v)
	}
	return m
}

// verification says how depsd verified images, for the figures' lines.
func (m *memoryInstance) verification() string {
	if m.verify {
		return "images verified (images.verify enforce, the default)"
	}
	return "images.verify off"
}

// setupClient is a client of the fake without a rate limit, for set-up
// that is not measured.
func (m *memoryInstance) setupClient(b *testing.B) *gitlab.Client {
	b.Helper()
	gl, err := gitlab.New(gitlab.Config{BaseURL: m.srv.URL, Token: m.srv.Token, RequestsPerMinute: -1, Concurrency: 16})
	if err != nil {
		b.Fatal(err)
	}
	return gl
}

// depsdServe is `depsd serve` running as a process of its own.
type depsdServe struct {
	cmd  *exec.Cmd
	env  []string
	log  string
	base string // its API's URL
	// done is closed when the process has exited, with err its Wait's.
	done     chan struct{}
	err      error
	stopOnce sync.Once
}

// startServe starts `depsd serve` over state (the log level warn, its
// output in a file of the working directory); it is stopped when b ends
// if stop was not called.
func (m *memoryInstance) startServe(b *testing.B, bin, state string) *depsdServe {
	b.Helper()
	return startDepsdServe(b, bin, state, m.dir, m.groups, m.env)
}

// startDepsdServe starts `depsd serve` of groups over state in dir, with
// env (GITLAB_URL and the like), as startServe says.
func startDepsdServe(b *testing.B, bin, state, dir string, groups, env []string) *depsdServe {
	b.Helper()
	addr := freeAddr(b)
	s := &depsdServe{env: append(slices.Clone(env), "DEPSD_STATE="+state), log: filepath.Join(dir, "serve.log"),
		base: "http://" + addr, done: make(chan struct{})}
	args := []string{"serve", "--listen", addr, "--log-level", "warn"}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir, s.cmd.Env = dir, s.env
	logs, err := os.Create(s.log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { logs.Close() })
	s.cmd.Stdout, s.cmd.Stderr = logs, logs
	if err := s.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	b.Cleanup(s.stop)
	return s
}

// stop interrupts the process and waits for it (killed after 30 s).
func (s *depsdServe) stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}

// waitReady waits until /readyz answers 200: its start-up scan is done.
func (s *depsdServe) waitReady(b *testing.B, timeout time.Duration) {
	b.Helper()
	s.waitFor(b, timeout, "ready", func() bool {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// peak is the process's peak resident set so far, in bytes.
func (s *depsdServe) peak(b *testing.B) int64 {
	b.Helper()
	n, err := peakRSS(s.cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// installHooks installs serve's webhook on every project in scope through
// a client of the benchmark's own, without the fake's latency (set-up),
// and returns how many projects are in scope. The latency is on from then.
func (m *memoryInstance) installHooks(b *testing.B, serve *depsdServe) int {
	b.Helper()
	ctx := context.Background()
	setup := m.setupClient(b)
	m.srv.SetLatency(0)
	projects, err := setup.ListProjects(ctx, gitlab.Scope{Groups: m.groups})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := setup.SyncHooks(ctx, projects, gitlab.HookSpec{URL: serve.base + "/hooks/gitlab", SecretToken: hookSecret}, false); err != nil {
		b.Fatal(err)
	}
	m.srv.SetLatency(m.latency)
	return len(projects)
}

// rebuild runs an operator's `depsd rebuild images/base-0` next to the
// running daemon, which sends the pipelines, and waits for the chain to
// end; it fails b unless the chain finished.
func (m *memoryInstance) rebuild(b *testing.B, bin string, serve *depsdServe, timeout time.Duration) (chain.ChainView, time.Duration) {
	b.Helper()
	cmd := exec.Command(bin, "rebuild", "images/base-0", "--log-level", "warn")
	cmd.Dir, cmd.Env = m.dir, serve.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("depsd rebuild: %v\n%s", err, out)
	}
	var id int64
	if _, err := fmt.Sscanf(string(out), "chain %d started", &id); err != nil {
		b.Fatalf("depsd rebuild printed %q", out)
	}
	start := time.Now()
	var view chain.ChainView
	serve.waitFor(b, timeout, "the chain to finish", func() bool {
		resp, err := http.Get(fmt.Sprintf("%s/api/v1/chains/%d", serve.base, id))
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
	if view.State != chain.Finished {
		b.Fatalf("chain %d ended %s", id, view.State)
	}
	return view, took
}

// checkVerified returns how many of the chain's members were verified
// fresh, and fails b when verification is on and the images built (base-0
// and the runtimes on it) were not all read and found fresh: the figures
// would then not include what verification costs.
func (m *memoryInstance) checkVerified(b *testing.B, view chain.ChainView) int {
	b.Helper()
	fresh, want := 0, 0
	for _, mv := range view.Members {
		if mv.Verified == chain.ImageFresh {
			fresh++
		}
		if strings.HasPrefix(mv.Project, "images/") {
			want++
			if m.verify && mv.Verified != chain.ImageFresh {
				b.Errorf("%s verified %q (%s), want fresh", mv.Project, mv.Verified, mv.VerifyDetail)
			}
		}
	}
	if m.verify && want == 0 {
		b.Errorf("no image built in the chain: nothing verified")
	}
	return fresh
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
func (s *depsdServe) waitFor(b *testing.B, timeout time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-s.done:
			logs, _ := os.ReadFile(s.log)
			b.Fatalf("depsd serve exited while waiting for %s: %v\n%s", what, s.err, logs)
		default:
		}
		if time.Now().After(deadline) {
			logs, _ := os.ReadFile(s.log)
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
