package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/scan"
	"gitlab.com/depsd/depsd/store"
	"gitlab.com/depsd/depsd/store/pgtest"
	"gitlab.com/depsd/depsd/webhook"
)

// BenchmarkReplicaCapacity measures issue 40's capacity of replicas as
// CPU time, since this machine's two cores are shared by every process
// of the run. In one run, on a PostgreSQL each (fsync on), one `depsd
// serve` and then three behind a round-robin proxy (as e2e's replica
// tests run them) take the realistic mix of BenchmarkWebhookMix at
// 400 deliveries a second (DEPSD_BENCH_REPLICA_RATE) for 10 s; the pushes that touch the
// Containerfile are left out (each rescans the whole scope, a cost of
// the scan, not of webhooks: BenchmarkWebhookMix gives it). For every
// process it reads its CPU time (/proc/PID/stat, less what it spends
// idle, measured before the load), the deliveries it answered and the
// events it applied (its /metrics), and whether it leads; then the same
// for GitLab's resends of the same deliveries (the same keys: answered,
// never applied). From the eight figures it fits the model
//
//	CPU of a process = record × deliveries it answered + apply × events it applied
//
// (least squares: record-us, apply-us) and reports how far each
// process's CPU is from it (model-error-max). Every replica records and
// applies; what serialises them is the store's write lock, taken by each
// inbox transaction (ARCHITECTURE.md, "Several processes, one store"):
// the leader runs schedules and the reconciler, not the inbox. So the
// bound a single process sets is the rate at which the inbox's
// transactions apply the mix one after the other: measured apart
// (apply-bound/s: events recorded first, then applied by one engine
// until none is left, wall time, on the same PostgreSQL). From those:
// N replicas on N machines of this size (2 cores each, the database on
// its own) take min(N × 2 cores / (record + apply), apply bound)
// deliveries a second (capacity-N/s for N = 1, 3, 10). Goal: the apply
// bound ≥ 10,000 deliveries/s of the mix, or the figures say where it is.
//
// Then, unless DEPSD_BENCH_SATURATION_SECONDS is 0, the saturation of
// each set-up (sat-rate-1, sat-rate-3): the whole mix, its rescans
// included, ramped through the proxy as BenchmarkWebhookMix ramps one
// process (same rates, same test of p99 and backlog), and the durable
// floor ramped the same way behind the same proxy (sat-durable-rate,
// sat-ratio-3).
func BenchmarkReplicaCapacity(b *testing.B) {
	pgtest.Database(b) // fails or skips as the store tests do
	bin := buildDepsd(b)
	for b.Loop() {
		b.StopTimer()
		srv, clk := newFake(gitlabtest.Options{Token: "bench"})
		m := seedMix(b, srv)
		clk.offset.Store(0)
		plan := newMixPlan()
		mix := withoutRescans(m, plan)
		rate, seconds := replicaRate(b), float64(scaled(b, 10))
		b.StartTimer()

		var procs []procLoad
		satSeconds := saturationSeconds(b)
		sat := map[int]int{}
		for _, n := range []int{1, 3} {
			loads, satRate := replicaRun(b, bin, srv, n, mix, rate, seconds,
				func(i int) delivery { return m.delivery(plan, i) }, satSeconds)
			procs = append(procs, loads...)
			sat[n] = satRate
		}
		record, apply := fitModel(procs)
		worst := 0.0
		var lines []string
		for _, p := range procs {
			want := record*float64(p.answered) + apply*float64(p.applied)
			e := 0.0
			if p.cpu > 0 {
				e = (want - p.cpu.Seconds()) / p.cpu.Seconds()
			}
			worst = max(worst, abs(e))
			lines = append(lines, fmt.Sprintf("%s: CPU %.2f s for %d answered, %d applied (model %+.0f %%)",
				p.name, p.cpu.Seconds(), p.answered, p.applied, 100*e))
		}
		bound, boundCPU := applyBound(b, srv, m, plan, scaled(b, 4000))
		b.ReportMetric(record*1e6, "record-us")
		b.ReportMetric(apply*1e6, "apply-us")
		b.ReportMetric(worst, "model-error-max")
		b.ReportMetric(bound, "apply-bound/s")
		b.ReportMetric(boundCPU.Seconds()*1e6, "apply-bound-cpu-us")
		var caps []string
		for _, n := range []int{1, 3, 10} {
			c := min(float64(n)*2/(record+apply), bound)
			b.ReportMetric(c, fmt.Sprintf("capacity-%d/s", n))
			caps = append(caps, fmt.Sprintf("%d: %.0f/s", n, c))
		}
		if satSeconds > 0 {
			// The floor behind the same proxy: the same extra hop.
			durableURL, stopDurable := startDurableFloor(b)
			proxy := httptest.NewServer(&roundRobin{backends: []string{strings.TrimPrefix(durableURL, "http://")},
				client: &http.Client{Timeout: 15 * time.Second}})
			floor := saturate(b, proxy.URL+"/hooks/gitlab", func(i int) delivery { return m.delivery(plan, i) },
				saturationRates(b), satSeconds, goalP99, nil, "durable floor behind the proxy")
			proxy.Close()
			stopDurable()
			b.ReportMetric(float64(sat[1]), "sat-rate-1")
			b.ReportMetric(float64(sat[3]), "sat-rate-3")
			b.ReportMetric(float64(floor), "sat-durable-rate")
			b.ReportMetric(float64(sat[3])/float64(max(floor, 1)), "sat-ratio-3")
			b.Logf("saturation of the whole mix through the round-robin proxy (PostgreSQL, %.0f s a rate): one depsd serve up to %d deliveries/s, three replicas up to %d/s (%.2f× the durable floor's %d/s; goal ≥ 0.8×)",
				satSeconds, sat[1], sat[3], float64(sat[3])/float64(max(floor, 1)), floor)
		}
		b.Logf("replicas on PostgreSQL, the mix without rescans at %d/s for %g s: %s", rate, seconds, strings.Join(lines, "; "))
		b.Logf("model: %.0f µs of CPU to record a delivery, %.0f µs to apply an event (largest error %.0f %%); one engine applies the mix at %.0f events/s (%.0f µs of its CPU each) under the write lock; N replicas on N machines of 2 cores take %s (goal: the apply bound ≥ 10,000/s)",
			record*1e6, apply*1e6, 100*worst, bound, boundCPU.Seconds()*1e6, strings.Join(caps, ", "))
	}
}

// replicaRate is the rate of the replica runs: 400 deliveries a second,
// or DEPSD_BENCH_REPLICA_RATE. At 400 a second most deliveries come alone
// and are recorded and applied in one transaction (the Recorder's quiet
// path), the dearest way per delivery; faster, they share transactions.
func replicaRate(b *testing.B) int {
	v := os.Getenv("DEPSD_BENCH_REPLICA_RATE")
	if v == "" {
		return 400
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("DEPSD_BENCH_REPLICA_RATE=%q: want deliveries a second", v)
	}
	b.Logf("replica runs at %d deliveries/s (DEPSD_BENCH_REPLICA_RATE), not 400", n)
	return n
}

// withoutRescans is the mix with its Containerfile pushes replaced by
// pushes of a README (dropped when decoded).
func withoutRescans(m *mixInstance, plan mixPlan) deliveries {
	return func(i int) delivery {
		d := m.delivery(plan, i)
		if d.kind == kindPushDep {
			d.body = bytes.ReplaceAll(d.body, []byte(`"Containerfile"`), []byte(`"README.md"`))
		}
		return d
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// procLoad is what one process did during a load run.
type procLoad struct {
	name              string
	cpu               time.Duration // less its idle CPU over the same time
	answered, applied int
}

// fitModel fits cpu = record·answered + apply·applied by least squares
// (seconds per delivery, per event).
func fitModel(ps []procLoad) (record, apply float64) {
	var saa, sab, sbb, sac, sbc float64
	for _, p := range ps {
		a, bb, c := float64(p.answered), float64(p.applied), p.cpu.Seconds()
		saa += a * a
		sab += a * bb
		sbb += bb * bb
		sac += a * c
		sbc += bb * c
	}
	det := saa*sbb - sab*sab
	if det == 0 {
		return 0, 0
	}
	return (sac*sbb - sbc*sab) / det, (saa*sbc - sab*sac) / det
}

// replica is one `depsd serve` process of a replica run.
type replica struct {
	cmd   *exec.Cmd
	addr  string
	leads bool
}

// replicaRun starts n replicas on a fresh PostgreSQL database, drives the
// mix through a round-robin proxy and returns what each did; then, with
// satSeconds > 0, ramps satMix through the proxy as BenchmarkWebhookMix
// does (saturate) and returns the highest rate taken.
func replicaRun(b *testing.B, bin string, srv *gitlabtest.Server, n int, mix deliveries, rate int, seconds float64,
	satMix deliveries, satSeconds float64) (_ []procLoad, satRate int) {
	b.Helper()
	db := pgtest.Database(b)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "depsd.yaml"), []byte("gitlab:\n  requests_per_minute: 60000\nimages:\n  verify: \"off\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	var rs []*replica
	for i := range n {
		r := &replica{addr: freeAddr(b)}
		r.cmd = exec.Command(bin, "serve", "--group", "g", "--listen", r.addr, "--log-level", "warn")
		r.cmd.Dir = dir
		r.cmd.Env = append(os.Environ(), "GITLAB_URL="+srv.URL, "GITLAB_TOKEN="+srv.Token, "DEPSD_STATE="+db,
			"DEPSD_WEBHOOK_SECRET="+hookSecret, "DEPSD_CONFIG="+filepath.Join(dir, "depsd.yaml"))
		logs, err := os.Create(filepath.Join(dir, fmt.Sprintf("serve-%d.log", i)))
		if err != nil {
			b.Fatal(err)
		}
		r.cmd.Stdout, r.cmd.Stderr = logs, logs
		if err := r.cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = r.cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { r.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = r.cmd.Process.Kill()
				<-done
			}
			logs.Close()
		})
		rs = append(rs, r)
	}
	for _, r := range rs {
		waitHTTP(b, "http://"+r.addr+"/readyz", 2*time.Minute)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	backlog := storeBacklog(st)
	var backends []string
	for _, r := range rs {
		backends = append(backends, r.addr)
	}
	proxy := httptest.NewServer(&roundRobin{backends: backends, client: &http.Client{Timeout: 15 * time.Second}})
	defer proxy.Close()
	// A warm-up through the proxy, then each process's idle CPU.
	mixLoop(proxy.URL+"/hooks/gitlab", func(i int) delivery { return mix(i + 8_000_000) }, fmt.Sprintf("warm-%d", n), rate, 1)
	waitDrained(ctx, backlog, time.Minute)
	idle0 := make([]time.Duration, n)
	for i, r := range rs {
		idle0[i] = pidCPU(b, r.cmd.Process.Pid)
	}
	const idleFor = 2 * time.Second
	time.Sleep(idleFor)
	idleRate := make([]float64, n) // CPU seconds a second
	for i, r := range rs {
		idleRate[i] = (pidCPU(b, r.cmd.Process.Pid) - idle0[i]).Seconds() / idleFor.Seconds()
		st := status(b, r.addr)
		r.leads = st.Leading
	}
	var out []procLoad
	// The mix, then GitLab's resends of the same deliveries (the same
	// Idempotency-Keys: answered, recorded as duplicates, applied never),
	// which tell what answering a delivery costs from what applying it
	// adds.
	for _, phase := range []string{"mix", "resends"} {
		cpu0 := make([]time.Duration, n)
		before := make([]metricsRead, n)
		for i, r := range rs {
			cpu0[i], before[i] = pidCPU(b, r.cmd.Process.Pid), readMetrics(b, r.addr)
		}
		start := time.Now()
		lat, failures := mixLoop(proxy.URL+"/hooks/gitlab", func(i int) delivery { return mix(i + 9_000_000) }, fmt.Sprintf("cap-%d", n), rate, seconds)
		if !waitDrained(ctx, backlog, 2*time.Minute) {
			b.Fatalf("%d replicas: the inbox did not drain", n)
		}
		elapsed := time.Since(start)
		if failures > 0 {
			b.Errorf("%d replicas, %s: %d of %d deliveries failed", n, phase, failures, len(lat))
		}
		for i, r := range rs {
			used := pidCPU(b, r.cmd.Process.Pid) - cpu0[i]
			after := readMetrics(b, r.addr)
			role := "follower"
			if r.leads {
				role = "leader"
			}
			out = append(out, procLoad{
				name:     fmt.Sprintf("%d replicas, #%d (%s), %s", n, i+1, role, phase),
				cpu:      max(used-time.Duration(idleRate[i]*elapsed.Seconds()*float64(time.Second)), 0),
				answered: after.answered - before[i].answered,
				applied:  after.applied - before[i].applied,
			})
		}
	}
	if satSeconds > 0 {
		satRate = saturate(b, proxy.URL+"/hooks/gitlab", satMix, saturationRates(b), satSeconds, saturationP99(b), backlog,
			fmt.Sprintf("%d replicas", n))
	}
	return out, satRate
}

// waitHTTP waits until url answers 200.
func waitHTTP(b *testing.B, url string, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: no 200 after %s (%v)", url, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// status reads a replica's /api/v1/status: whether it leads.
func status(b *testing.B, addr string) (st struct {
	Leading bool `json:"leading"`
}) {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/status")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		b.Fatal(err)
	}
	return st
}

// metricsRead is what readMetrics takes of a replica's /metrics.
type metricsRead struct{ answered, applied int }

// readMetrics sums depsd_webhook_events_total (deliveries answered) and
// depsd_events_applied_total (events applied) of a replica.
func readMetrics(b *testing.B, addr string) metricsRead {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m metricsRead
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var dst *int
		switch {
		case strings.HasPrefix(line, "depsd_webhook_events_total{"):
			dst = &m.answered
		case strings.HasPrefix(line, "depsd_events_applied_total{"):
			dst = &m.applied
		default:
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("%s: %q: %v", addr, line, err)
		}
		*dst += int(v)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return m
}

// pidCPU is a process's CPU time (user and system) so far, from
// /proc/PID/stat (clock ticks of 10 ms).
func pidCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command's closing parenthesis: state is the
	// 3rd field of the line, utime the 14th, stime the 15th.
	rest := string(raw[bytes.LastIndexByte(raw, ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// applyBound records count events of the mix (no pushes) in a fresh
// PostgreSQL database scanned from srv, then applies them with one
// engine until none is left, and returns the events applied a second
// (wall time) and the engine's CPU time per event (this process's).
func applyBound(b *testing.B, srv *gitlabtest.Server, m *mixInstance, plan mixPlan, count int) (float64, time.Duration) {
	b.Helper()
	ctx := context.Background()
	db := pgtest.Database(b)
	st, err := store.Open(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	setup, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Concurrency: 16})
	if err != nil {
		b.Fatal(err)
	}
	opts := scan.Options{Scope: gitlab.Scope{Groups: []string{"g"}}}
	if _, err := scan.Run(ctx, setup, st, opts); err != nil {
		b.Fatal(err)
	}
	g, err := st.Graph(ctx)
	if err != nil {
		b.Fatal(err)
	}
	en, err := chain.New(chain.Config{Store: st, Mode: chain.Full, Graph: func(context.Context) (*deps.Graph, error) { return g, nil }})
	if err != nil {
		b.Fatal(err)
	}
	var evs []chain.NewEvent
	for i := 0; len(evs) < count; i++ {
		d := m.delivery(plan, i+10_000_000)
		if d.event != "Pipeline Hook" {
			continue
		}
		ev, err := webhook.Decode(d.event, d.body, nil, nil, nil, time.Now())
		if err != nil {
			continue
		}
		evs = append(evs, chain.NewEvent{Key: fmt.Sprintf("bound-%d", i), Event: chain.Event{Pipeline: ev.Pipeline}})
	}
	for i := 0; i < len(evs); i += 500 {
		if _, err := st.RecordEvents(ctx, evs[i:min(i+500, len(evs))]); err != nil {
			b.Fatal(err)
		}
	}
	c0 := processCPU(b)
	start := time.Now()
	applied := 0
	for applied < len(evs) {
		n, err := en.ProcessInbox(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
		applied += n
	}
	wall := time.Since(start)
	cpu := processCPU(b) - c0
	if applied < len(evs) {
		b.Fatalf("applied %d of %d events", applied, len(evs))
	}
	return float64(applied) / wall.Seconds(), cpu / time.Duration(applied)
}

// roundRobin is the load balancer of e2e's replica tests: each request
// goes to the next replica, one that cannot be reached is skipped.
type roundRobin struct {
	backends []string
	next     atomic.Uint64
	client   *http.Client
}

func (p *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	start := p.next.Add(1)
	var last error
	for i := range uint64(len(p.backends)) {
		b := p.backends[(start+i)%uint64(len(p.backends))]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+b+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := p.client.Do(req)
		if err != nil {
			last = err
			continue
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, fmt.Sprintf("no replica answered: %v", last), http.StatusBadGateway)
}
