package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/webhook"
)

// On a real instance depsd runs as a process of its own and GitLab
// elsewhere. In one process, every part of a benchmark (load generator,
// simulated GitLab, receivers, depsd) shares one Go scheduler and one
// heap: the simulated GitLab's CPU while depsd rescans, or a collection
// of the load generator's garbage, lands on depsd's figures, and a
// handler made runnable waits for a P behind them instead of being
// scheduled by the kernel. With DEPSD_BENCH_PROCESSES=separate,
// BenchmarkWebhookMix runs `depsd serve` (the real binary), the durable
// floor and depsd's recording alone each as a process of its own, on
// equal terms; the load generator, the simulated GitLab and the null
// receiver stay in the benchmark's process. CPU per delivery is then each
// receiver's own process's (/proc), less what it spends idle.

// receiverRole is the environment variable that makes the benchmark's
// binary serve one receiver (TestMain): durable-floor or recording-only,
// over the state named by receiverState (the floor's: durableFloorState;
// the recording's: a state file's path or a PostgreSQL URL).
const (
	receiverRole  = "DEPSD_BENCH_RECEIVER_ROLE"
	receiverState = "DEPSD_BENCH_RECEIVER_STATE"
)

// separateProcesses reports whether DEPSD_BENCH_PROCESSES=separate.
func separateProcesses(b *testing.B) bool {
	switch v := os.Getenv("DEPSD_BENCH_PROCESSES"); v {
	case "", "one":
		return false
	case "separate":
		return true
	default:
		b.Fatalf("DEPSD_BENCH_PROCESSES=%q: want one or separate", v)
		return false
	}
}

// serveReceiverRole serves the receiver receiverRole names, printing its
// address on a line of its own, until its standard input closes.
func serveReceiverRole(role, state string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var h http.Handler
	switch role {
	case "durable-floor":
		c, err := newCommitter(ctx, state)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		floor := newDurableFloor(c)
		defer floor.Close()
		h = floor
	case "recording-only":
		rh, stop, err := recordingOnlyHandler(ctx, state)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
		h = rh
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want durable-floor or recording-only\n", receiverRole, role)
		return 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	fmt.Println(l.Addr().String())
	bufio.NewReader(os.Stdin).ReadString('\n') // until the benchmark ends
	srv.Close()
	return 0
}

// recordingOnlyHandler is depsd's webhook handler over a store of its own
// at state, with the engine's recorder and nothing else: no inbox applies
// what it records. stop ends the recorder and closes the store.
func recordingOnlyHandler(ctx context.Context, state string) (_ http.Handler, stop func() error, _ error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := store.Open(ctx, state)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	empty := deps.NewGraph()
	engine, err := chain.New(chain.Config{Store: st, Graph: func(context.Context) (*deps.Graph, error) { return empty, nil }})
	if err != nil {
		cancel()
		st.Close()
		return nil, nil, err
	}
	rec := engine.NewRecorder()
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	h, err := webhook.NewHandler(webhook.Options{Secret: hookSecret, Recorder: chainRecorder{rec}, DependencyFiles: []string{"Containerfile"}})
	stop = func() error {
		cancel()
		return errors.Join(<-done, st.Close())
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return h, stop, nil
}

// receiverProcess is a receiver served by the benchmark's binary run
// again (serveReceiverRole).
type receiverProcess struct {
	url string
	cmd *exec.Cmd
}

// startReceiverProcess starts role over a state of its own of the kind
// benchState picks, and stops it when b ends.
func startReceiverProcess(b *testing.B, role string) *receiverProcess {
	b.Helper()
	state := benchState(b)
	if role == "durable-floor" {
		state = durableFloorState(b)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), receiverRole+"="+role, receiverState+"="+state)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("%s process: %v", role, err)
		}
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("%s process: %v", role, err)
	}
	return &receiverProcess{url: "http://" + strings.TrimSpace(addr) + "/hooks/gitlab", cmd: cmd}
}

// serveProcess is serve's daemon as the real binary, in a process of its
// own, at the same settings (the defaults, images not verified) over the
// same state: a first scan the benchmark writes, so that the daemon's
// start-up scan is incremental. It is stopped when b ends.
func serveProcess(b *testing.B, srv *gitlabtest.Server, clk *fakeClock, groups []string) (s *depsdServe, state string) {
	b.Helper()
	bin := buildDepsd(b)
	cfg := config.Defaults()
	cfg.Scope.Groups, cfg.State = groups, benchState(b)
	firstScan(b, srv, clk, cfg)
	dir := b.TempDir()
	conf := filepath.Join(dir, "depsd.yaml")
	yaml := fmt.Sprintf("gitlab:\n  requests_per_minute: %d\nimages:\n  verify: \"off\"\n",
		benchRequestsPerMinute(b, cfg.GitLab.RequestsPerMinute))
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "GITLAB_URL="+srv.URL, "GITLAB_TOKEN="+srv.Token,
		"DEPSD_WEBHOOK_SECRET="+hookSecret, "DEPSD_CONFIG="+conf)
	s = startDepsdServe(b, bin, cfg.State, dir, groups, env)
	s.waitReady(b, 2*time.Minute)
	return s, cfg.State
}

// idleCPURate is a process's CPU time a second while nothing is sent to
// it, over d.
func idleCPURate(b *testing.B, pid int, d time.Duration) float64 {
	c0 := pidCPU(b, pid)
	time.Sleep(d)
	return (pidCPU(b, pid) - c0).Seconds() / d.Seconds()
}

// processCPUPerDelivery sends next at cpuRate for quarters of a second to
// url, served by the process pid, waits until backlog (if not nil)
// drained, and returns the process's CPU time per delivery, less what it
// spends idle (idle CPU seconds a second) over the same time.
func processCPUPerDelivery(b *testing.B, quarters int, url string, pid int, idle float64, next deliveries, kind string, backlog inboxBacklog) time.Duration {
	b.Helper()
	seconds := float64(quarters) / 4
	n := int(cpuRate * seconds)
	later := func(i int) delivery { return next(i + 1_000_000) }
	c0, start := pidCPU(b, pid), time.Now()
	mixLoop(url, later, "cpu-"+kind, cpuRate, seconds)
	if backlog != nil && !waitDrained(context.Background(), backlog, time.Minute) {
		b.Fatalf("%s: the inbox did not drain", kind)
	}
	used := pidCPU(b, pid) - c0 - time.Duration(idle*time.Since(start).Seconds()*float64(time.Second))
	return max(used, 0) / time.Duration(n)
}
