package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/store/pgtest"
)

// replicas are several `depsd serve` processes on one PostgreSQL database
// behind a round-robin proxy, as an operator runs them behind a load
// balancer.
type replicas struct {
	t      *testing.T
	pg     *pgtest.Server
	setups []*serveSetup
	procs  []*serveProc
	proxy  *httptest.Server
	w      *world   // depsd as GitLab and the test see it: through the proxy
	args   []string // extra flags of depsd serve
}

// newReplicas starts n replicas against srv on a fresh database of pg,
// with yaml as their depsd.yaml and args as extra flags, and installs the
// hooks (pointing at the proxy).
func newReplicas(t *testing.T, srv *gitlabtest.Server, pg *pgtest.Server, n int, yaml string, args ...string) *replicas {
	t.Helper()
	ctx := context.Background()
	dbURL, err := pg.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	r := &replicas{t: t, pg: pg, args: args}
	var backends []string
	for range n {
		s := newServeSetup(t, srv)
		s.state, s.logs = dbURL, logs
		if err := os.WriteFile(filepath.Join(s.dir, "depsd.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		r.setups = append(r.setups, s)
		backends = append(backends, s.listen)
	}
	r.proxy = httptest.NewServer(&roundRobin{backends: backends, client: &http.Client{Timeout: 15 * time.Second}})
	t.Cleanup(r.proxy.Close)
	for _, s := range r.setups {
		r.procs = append(r.procs, s.start(t, args...))
	}
	r.w = &world{t: t, srv: srv, url: r.proxy.URL, logs: logs, client: newHTTPClient(t)}
	r.w.syncHooks(newClient(t, srv))
	return r
}

// restart SIGKILLs replica i and starts it again on the same address (so
// with the same replica id).
func (r *replicas) kill(i int) {
	r.t.Helper()
	if err := r.procs[i].signal(r.t, syscall.SIGKILL, stepTimeout); exitCode(err) == 0 {
		r.t.Fatalf("replica %d exited cleanly on SIGKILL?", i)
	}
}

func (r *replicas) restart(i int) {
	r.t.Helper()
	r.kill(i)
	r.procs[i] = r.setups[i].start(r.t, r.args...)
}

// status reads GET /api/v1/status of replica i.
func (r *replicas) status(i int) (daemon.Status, error) {
	var st daemon.Status
	resp, err := r.w.client.Get("http://" + r.setups[i].listen + "/api/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return st, fmt.Errorf("status: %s: %s", resp.Status, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader returns the index of the replica that leads now.
func (r *replicas) leader() int {
	r.t.Helper()
	found := -1
	r.w.waitUntil("one replica leads", chainTimeout, func() bool {
		n := 0
		for i := range r.setups {
			if st, err := r.status(i); err == nil && st.Leading {
				found = i
				n++
			}
		}
		return n == 1
	})
	return found
}

// roundRobin is the load balancer in front of the replicas: each request
// goes to the next replica; one that cannot be reached (connection refused
// or reset: it was killed) is skipped and the request goes to the next, as
// a load balancer with passive health checks does. Retrying a webhook on
// another replica is safe: its Idempotency-Key dedupes it.
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
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, fmt.Sprintf("no replica answered: %v", last), http.StatusBadGateway)
}

// newestChain waits until depsd shows n chains and the newest is finished.
func (w *world) newestChain(n int) chain.ChainView {
	w.t.Helper()
	var got chain.ChainView
	w.waitUntil(fmt.Sprintf("chain %d finished", n), 3*chainTimeout, func() bool {
		cs, err := w.chains()
		if err != nil || len(cs) != n || cs[0].State != chain.Finished {
			return false
		}
		got = cs[0]
		return true
	})
	return got
}

// soakChains is how many chains TestReplicasSurviveSIGKILL runs: a few in
// CI, more with DEPSD_SOAK_CHAINS (make soak).
func soakChains(t *testing.T) int {
	if s := os.Getenv("DEPSD_SOAK_CHAINS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("DEPSD_SOAK_CHAINS=%q: want a positive number", s)
		}
		return n
	}
	return 5
}

// Three replicas on one PostgreSQL behind a round-robin proxy. Each chain
// starts from a developer's pipeline of the base image; at a random moment
// a random replica is SIGKILLed and restarted. Every member of every chain
// is built exactly once (counted on the fake GitLab), and the base, built
// by the developer, never by depsd.
func TestReplicasSurviveSIGKILL(t *testing.T) {
	pg := pgtest.Own(t)
	srv := newGitLab(t, waves()...)
	r := newReplicas(t, srv, pg, 3, "gitlab:\n  requests_per_minute: 60000\n")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	members := []string{ruby, tools, app, lint, web}
	n := soakChains(t)
	for k := 1; k <= n; k++ {
		r.w.runPipeline(base)
		delay := time.Duration(rng.IntN(2500)) * time.Millisecond
		victim := rng.IntN(len(r.procs))
		time.Sleep(delay) // a random point in the chain, not a wait for a condition
		t.Logf("chain %d: SIGKILL replica %d after %s", k, victim, delay)
		r.restart(victim)
		view := r.w.newestChain(k)
		for _, p := range members {
			if m, ok := member(view, p); !ok || m.Builds != 1 || m.State != chain.Success {
				t.Errorf("chain %d member %s = %+v, want success after 1 build", k, p, m)
			}
		}
		r.w.waitUntil(fmt.Sprintf("each member built %d times", k), chainTimeout, func() bool {
			for _, p := range members {
				if len(r.w.apiPipelines(p)) < k {
					return false
				}
			}
			return true
		})
		for _, p := range members {
			if got := len(r.w.apiPipelines(p)); got != k {
				t.Fatalf("after %d chains depsd created %d pipelines of %s\n%s", k, got, p, r.w.dump())
			}
		}
	}
	if got := len(r.w.apiPipelines(base)); got != 0 {
		t.Errorf("depsd created %d pipelines of the base, want none", got)
	}
	var st daemon.Status
	r.w.waitUntil("status shows the postgres store, a leader and 3 live replicas", stepTimeout, func() bool {
		var err error
		st, err = r.status(0)
		return err == nil && st.Store == "postgres" && st.Leader != nil && len(st.Replicas) == 3
	})
}

// The leader is SIGKILLed (and stays down) before the schedule's first
// fire: another replica takes over within two lease periods and the
// schedule fires, exactly once for its scheduled time.
func TestReplicasLeaderKilledScheduleFiresOnce(t *testing.T) {
	pg := pgtest.Own(t)
	srv := newGitLab(t, waves()...)
	yaml := "gitlab:\n  requests_per_minute: 60000\nschedules:\n  - project: " + lint + "\n    cron: \"@every 1m\"\n"
	r := newReplicas(t, srv, pg, 3, yaml, "--leader-lease", "3s")
	old := r.leader()
	st, err := r.status(old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL the leader, replica %d (%s)", old, st.Replica)
	r.kill(old)
	scheduled := func() map[time.Time]int {
		fires := map[time.Time]int{}
		cs, _ := r.w.chains()
		for _, c := range cs {
			for _, re := range c.Reasons {
				if re.Kind == chain.ReasonSchedule {
					fires[re.At]++
				}
			}
		}
		return fires
	}
	r.w.waitUntil("the schedule fired", 2*time.Minute, func() bool { return len(scheduled()) == 1 })
	if nl := r.leader(); nl == old {
		t.Fatalf("replica %d still leads after it was killed", nl)
	}
	r.w.waitUntil("lint built", chainTimeout, func() bool { return len(r.w.apiPipelines(lint)) >= 1 })
	for at, n := range scheduled() {
		if n != 1 {
			t.Errorf("the fire at %s started %d chains, want 1\n%s", at, n, r.w.dump())
		}
	}
	if got := len(r.w.apiPipelines(lint)); got != 1 {
		t.Errorf("one fire built lint %d times\n%s", got, r.w.dump())
	}
	live := (old + 1) % len(r.setups)
	now, err := r.status(live)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range now.Jobs {
		if j.Name == "schedules" && j.Replica == st.Replica {
			t.Errorf("the fire is recorded as run by the killed replica %s", st.Replica)
		}
	}
}

// PostgreSQL restarts (pg_ctl restart) in the middle of a chain, and later
// stays down for a while: webhooks that arrive meanwhile are answered 503,
// /readyz fails, and once it is back the chains finish without a restart
// of depsd, each member built once.
func TestReplicasSurvivePostgresRestart(t *testing.T) {
	pg := pgtest.Own(t)
	srv := newGitLab(t, waves()...)
	r := newReplicas(t, srv, pg, 2, "gitlab:\n  requests_per_minute: 60000\n")
	members := []string{ruby, tools, app, lint, web}
	ctx := context.Background()

	r.w.runPipeline(base)
	r.w.waitUntil("ruby was triggered", chainTimeout, func() bool { return len(r.w.apiPipelines(ruby)) == 1 })
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r.w.newestChain(1)

	// Now an outage long enough for webhooks to hit it.
	r.w.runPipeline(base)
	r.w.waitUntil("ruby was triggered again", chainTimeout, func() bool { return len(r.w.apiPipelines(ruby)) == 2 })
	if err := pg.StopServer(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	r.w.waitUntil("a webhook was answered 503 during the outage", chainTimeout, func() bool {
		for _, d := range srv.Deliveries() {
			if d.StatusCode == http.StatusServiceUnavailable {
				return true
			}
		}
		return false
	})
	for i, s := range r.setups {
		resp, err := r.w.client.Get("http://" + s.listen + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("replica %d: /readyz = %d during the outage, want 503", i, resp.StatusCode)
		}
	}
	restarting := time.Now()
	for _, d := range srv.Deliveries() {
		if d.SentAt.After(stopped) && d.SentAt.Before(restarting.Add(-500*time.Millisecond)) && d.State == gitlabtest.DeliveryDelivered {
			t.Errorf("delivery #%d during the outage was acknowledged (%d)", d.ID, d.StatusCode)
		}
	}
	if err := pg.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	view := r.w.newestChain(2)
	for _, p := range members {
		if m, ok := member(view, p); !ok || m.Builds != 1 || m.State != chain.Success {
			t.Errorf("member %s = %+v, want success after 1 build", p, m)
		}
		if got := len(r.w.apiPipelines(p)); got != 2 {
			t.Errorf("two chains built %s %d times, want 2\n%s", p, got, r.w.dump())
		}
	}
	for i := range r.procs {
		if r.procs[i].exited() {
			t.Errorf("replica %d exited during the outage", i)
		}
	}
}
