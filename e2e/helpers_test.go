package e2e_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
)

// Every instance puts the projects depsd manages in this group; projects of
// other groups are outside its scope.
const scopeGroup = "acme"

// secret is the webhook secret of every daemon and of the hooks it installs.
const secret = "e2e-webhook-secret"

// Timeouts of the bounded waits. They are generous because the suite runs
// under -race on small CI machines; a passing run takes a fraction of them.
const (
	chainTimeout = 15 * time.Second // a whole chain of 100-500 ms pipelines
	stepTimeout  = 10 * time.Second // one delivery, one pipeline, one state
)

// ---------------------------------------------------------------------------
// The fake GitLab instance.

// proj is a project of a fake instance: its image is built FROM the images
// of the projects in from (the first in FROM, the others in COPY --from),
// and its pipelines run for duration (default 150 ms) and end with the
// outcomes of script, then success.
type proj struct {
	path     string
	from     []string
	duration time.Duration
	script   []string
}

// containerfile declares p's upstreams the way a real image does: through
// the instance's registry. A project without upstreams is FROM an external
// image.
func (p proj) containerfile() string {
	if len(p.from) == 0 {
		return "FROM debian:bookworm-slim\nRUN apt-get update\n"
	}
	ref := func(path string) string { return gitlabtest.DefaultRegistryHost + "/" + path + ":latest" }
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", ref(p.from[0]))
	for _, up := range p.from[1:] {
		fmt.Fprintf(&b, "COPY --from=%s /opt /opt\n", ref(up))
	}
	return b.String()
}

// newGitLab starts a fake GitLab holding projs, closed when the test ends.
func newGitLab(t *testing.T, projs ...proj) *gitlabtest.Server {
	t.Helper()
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-e2e"})
	t.Cleanup(srv.Close)
	for _, p := range projs {
		if _, err := srv.AddProject(gitlabtest.Project{Path: p.path, Files: map[string]string{"Containerfile": p.containerfile()}}); err != nil {
			t.Fatal(err)
		}
		d := p.duration
		if d == 0 {
			d = 150 * time.Millisecond
		}
		if err := srv.SetPipelineBehavior(p.path, gitlabtest.Behavior{Duration: d, Outcome: "success", Script: p.script}); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

// ---------------------------------------------------------------------------
// depsd: in process, or the real binary.

// world is a fake GitLab and the depsd watching it, seen from outside: the
// fake's pipelines and deliveries, and depsd's HTTP API.
type world struct {
	t   *testing.T
	srv *gitlabtest.Server
	// url is depsd's base URL, http://127.0.0.1:PORT.
	url string
	// engine is set for an in-process daemon; it tells when depsd has
	// nothing left to do (see quiet).
	engine *chain.Engine
	// logs are depsd's logs, shown when a test fails.
	logs *syncBuffer
	// client is the test's own HTTP client of depsd.
	client *http.Client
	// signingToken is installed on the hooks by syncHooks, if set.
	signingToken string
}

// newHTTPClient is a client of depsd's API whose connections the test can
// close. A transport may dial a connection it then does not use; depsd's
// graceful shutdown waits up to 5 s for such a connection to send a request
// (net/http's grace for new connections), so the test closes its idle
// connections before it stops depsd.
func newHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func (w *world) hookURL() string { return w.url + "/hooks/gitlab" }

// daemonConfig is what tests vary of an in-process daemon.
type daemonConfig struct {
	mode chain.Mode
	// reconcile defaults to a minute, so that webhooks, not the reconciler,
	// drive the chains of the tests that do not set it (the reconciler
	// also runs once at start, before any chain exists).
	reconcile time.Duration
	// apiURL, if set, is where the daemon sends its GitLab API requests
	// instead of the fake itself (a proxy in front of it).
	apiURL string
	// signing is hooks.signing (default auto); signingToken, if set, is
	// the configured signing token, installed on every hook.
	signing, signingToken string
	// edit, if set, changes the configuration last.
	edit func(*config.Config)
}

// startDaemon runs depsd serve in process (daemon.New/Run, as `depsd serve`
// and the demo do) against srv with scope group acme, installs its hooks on
// every project in scope with gitlab.SyncHooks, and stops it when the test
// ends.
func startDaemon(t *testing.T, srv *gitlabtest.Server, dc daemonConfig) *world {
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	gl := newClient(t, srv)
	daemonGL := gl
	if dc.apiURL != "" {
		var err error
		if daemonGL, err = gitlab.New(gitlab.Config{BaseURL: dc.apiURL, Token: srv.Token, RequestsPerMinute: -1}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Defaults()
	cfg.GitLab.URL, cfg.GitLab.Token = srv.URL, srv.Token
	cfg.Scope.Groups = []string{scopeGroup}
	cfg.State = filepath.Join(t.TempDir(), "depsd.db")
	cfg.Hooks.Secret = secret
	if dc.signing != "" {
		cfg.Hooks.Signing = dc.signing
	}
	cfg.Hooks.SigningToken = dc.signingToken
	// The fake GitLab's images are on registry.example.com, which is not
	// there to verify (daemon/verify_test.go verifies against a real one).
	cfg.Images.Verify = config.VerifyOff
	if dc.reconcile == 0 {
		dc.reconcile = time.Minute
	}
	if dc.edit != nil {
		dc.edit(&cfg)
	}

	client := newHTTPClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	d, err := daemon.New(ctx, daemon.Options{
		Config: cfg, Listen: "127.0.0.1:0", Mode: dc.mode, GitLab: daemonGL, Logger: logger,
		ReconcileInterval: dc.reconcile, DrainTimeout: 10 * time.Second,
		Listening: func(addr string) { listening <- addr },
	})
	if err != nil {
		cancel()
		t.Fatalf("daemon.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		client.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon.Run: %v\nlogs:\n%s", err, logs.tail(40))
			}
		case <-time.After(stepTimeout):
			t.Errorf("daemon did not stop within %s of its context ending\nlogs:\n%s", stepTimeout, logs.tail(40))
		}
	})
	// Run scans before it listens: once the address is known, the graph is
	// loaded.
	var addr string
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatalf("daemon.Run ended before listening: %v\nlogs:\n%s", err, logs.tail(40))
	case <-time.After(stepTimeout):
		t.Fatalf("daemon not listening after %s\nlogs:\n%s", stepTimeout, logs.tail(40))
	}
	w := &world{t: t, srv: srv, url: "http://" + addr, engine: d.Engine(), logs: logs, client: client, signingToken: dc.signingToken}
	w.syncHooks(gl)
	return w
}

// newClient is a GitLab client of srv for the test's own calls (and the
// in-process daemon's): unthrottled, since the fake has no rate limit.
func newClient(t *testing.T, srv *gitlabtest.Server) *gitlab.Client {
	t.Helper()
	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1})
	if err != nil {
		t.Fatal(err)
	}
	return gl
}

// syncHooks gives every project in scope depsd's hook, as `depsd hooks
// sync` does.
func (w *world) syncHooks(gl *gitlab.Client) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	projects, err := gl.ListProjects(ctx, gitlab.Scope{Groups: []string{scopeGroup}})
	if err != nil {
		w.t.Fatal(err)
	}
	rep, err := gl.SyncHooks(ctx, projects, gitlab.HookSpec{URL: w.hookURL(), SecretToken: secret, SigningToken: w.signingToken}, false)
	if err != nil {
		w.t.Fatal(err)
	}
	if rep.Count(gitlab.HookCreated) != len(projects) {
		w.t.Fatalf("hooks sync created %d hooks for %d projects: %+v", rep.Count(gitlab.HookCreated), len(projects), rep)
	}
}

// ---------------------------------------------------------------------------
// The depsd binary.

var depsdBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// TestMain removes the depsd binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if depsdBin.dir != "" {
		os.RemoveAll(depsdBin.dir)
	}
	os.Exit(code)
}

// depsdBinary builds cmd/depsd once for the whole suite and returns its path.
func depsdBinary(t *testing.T) string {
	t.Helper()
	depsdBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "depsd-e2e-")
		if err != nil {
			depsdBin.err = err
			return
		}
		depsdBin.dir = dir
		depsdBin.path = filepath.Join(dir, "depsd")
		args := []string{"build", "-o", depsdBin.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "gitlab.com/depsd/depsd/cmd/depsd")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			depsdBin.err = fmt.Errorf("go build ./cmd/depsd: %v\n%s", err, out)
		}
	})
	if depsdBin.err != nil {
		t.Fatal(depsdBin.err)
	}
	return depsdBin.path
}

// serveProc is a running `depsd serve` process.
type serveProc struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, set before done is closed
}

// serveSetup is what restarts of `depsd serve` share: the fake it talks to,
// its state file and its address.
type serveSetup struct {
	srv    *gitlabtest.Server
	dir    string // working directory: state and config files
	listen string // 127.0.0.1:PORT
	logs   *syncBuffer
	client *http.Client
	// state, if set, is DEPSD_STATE (a postgres:// URL); default: a file
	// in dir.
	state string
	// gitlabURL, if set, is GITLAB_URL (a proxy in front of srv);
	// default: srv's.
	gitlabURL string
}

// newServeSetup picks a state directory and a free port for depsd serve
// processes against srv. The port is fixed so that a restarted process
// receives the webhooks of hooks installed for the first one.
func newServeSetup(t *testing.T, srv *gitlabtest.Server) *serveSetup {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	// The default request budget (600/min) is meant for a shared GitLab; at
	// a 300 ms reconcile interval it would make depsd, not the pipelines,
	// set the pace of the test.
	// Verification off: the fake GitLab's images are on
	// registry.example.com, which is not there to read.
	cfg := "gitlab:\n  requests_per_minute: 60000\nimages:\n  verify: \"off\"\n"
	if err := os.WriteFile(filepath.Join(dir, "depsd.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &serveSetup{srv: srv, dir: dir, listen: listen, logs: &syncBuffer{}, client: newHTTPClient(t)}
}

// configure replaces the depsd.yaml the next start reads.
func (s *serveSetup) configure(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, "depsd.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *serveSetup) world(t *testing.T) *world {
	return &world{t: t, srv: s.srv, url: "http://" + s.listen, logs: s.logs, client: s.client}
}

// start runs `depsd serve` configured as an operator would: GitLab and
// secrets in the environment, scope and address as flags. It returns once
// /readyz answers 200 (the first scan is done). The process is killed when
// the test ends if it still runs.
func (s *serveSetup) start(t *testing.T, extraArgs ...string) *serveProc {
	t.Helper()
	// A short leader lease: a process restarted after SIGKILL leads (and
	// reconciles) once its earlier run's lease has run out.
	args := append([]string{"serve", "--group", scopeGroup, "--listen", s.listen, "--reconcile-interval", "300ms",
		"--leader-lease", "3s", "--log-level", "info"}, extraArgs...)
	cmd := exec.Command(depsdBinary(t), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(),
		"GITLAB_URL="+cmp.Or(s.gitlabURL, s.srv.URL),
		"GITLAB_TOKEN="+s.srv.Token,
		"DEPSD_STATE="+cmp.Or(s.state, filepath.Join(s.dir, "depsd.db")),
		"DEPSD_WEBHOOK_SECRET="+secret,
		"DEPSD_CONFIG="+filepath.Join(s.dir, "depsd.yaml"),
		// A -race binary otherwise waits a second at exit for late reports.
		"GORACE=atexit_sleep_ms=0",
	)
	fmt.Fprintf(s.logs, "---- depsd %s\n", strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, logs: s.logs, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	ready := eventually(chainTimeout, func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		resp, err := s.client.Get("http://" + s.listen + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if p.exited() {
		t.Fatalf("depsd serve exited before it was ready: %v\n%s", p.err, s.logs.tail(40))
	}
	if !ready {
		t.Fatalf("depsd serve not ready after %s\n%s", chainTimeout, s.logs.tail(40))
	}
	return p
}

func (p *serveProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig and, unless it is SIGKILL, waits up to timeout for the
// process to exit; it returns the exit error (nil for status 0).
func (p *serveProc) signal(t *testing.T, sig syscall.Signal, timeout time.Duration) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		// SIGQUIT makes the Go runtime print every goroutine: where the
		// process hangs.
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("depsd serve still running %s after %v; its logs and goroutines at SIGQUIT:\n%s", timeout, sig, p.logs.tail(300))
		return nil
	}
}

// ---------------------------------------------------------------------------
// Looking at the world.

// eventually polls cond every 20 ms until it holds or timeout passes, and
// reports whether it held.
func eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitUntil fails the test, showing the whole world, when cond does not
// hold within timeout.
func (w *world) waitUntil(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	if !eventually(timeout, cond) {
		w.t.Fatalf("timed out after %s waiting until %s\n%s", timeout, what, w.dump())
	}
}

// runPipeline runs a pipeline of path from outside depsd (a developer's
// push) on the default branch, and returns its id.
func (w *world) runPipeline(path string) int64 {
	w.t.Helper()
	id, err := w.srv.RunPipeline(path, "", "push")
	if err != nil {
		w.t.Fatal(err)
	}
	return id
}

// apiPipelines are the pipelines of path created through the API: by depsd.
func (w *world) apiPipelines(path string) []gitlabtest.Pipeline {
	return slices.DeleteFunc(w.srv.Pipelines(path), func(p gitlabtest.Pipeline) bool { return p.Source != "api" })
}

// pipelineOf returns the only pipeline depsd created for path, failing the
// test when there is not exactly one.
func (w *world) pipelineOf(path string) gitlabtest.Pipeline {
	w.t.Helper()
	ps := w.apiPipelines(path)
	if len(ps) != 1 {
		w.t.Fatalf("%s: depsd created %d pipelines, want exactly 1\n%s", path, len(ps), w.dump())
	}
	return ps[0]
}

// chains reads GET /api/v1/chains, newest first.
func (w *world) chains() ([]chain.ChainView, error) {
	resp, err := w.client.Get(w.url + "/api/v1/chains")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /api/v1/chains: %s: %s", resp.Status, b)
	}
	var body struct {
		Chains []chain.ChainView `json:"chains"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /api/v1/chains: %w", err)
	}
	return body.Chains, nil
}

// onlyChain waits until depsd shows exactly one chain and ok(chain) holds,
// and returns it.
func (w *world) onlyChain(what string, ok func(chain.ChainView) bool) chain.ChainView {
	w.t.Helper()
	var got chain.ChainView
	w.waitUntil("the only chain is "+what, chainTimeout, func() bool {
		cs, err := w.chains()
		if err != nil || len(cs) != 1 || !ok(cs[0]) {
			return false
		}
		got = cs[0]
		return true
	})
	return got
}

func inState(s chain.State) func(chain.ChainView) bool {
	return func(c chain.ChainView) bool { return c.State == s }
}

func member(c chain.ChainView, project string) (chain.MemberView, bool) {
	for _, m := range c.Members {
		if m.Project == project {
			return m, true
		}
	}
	return chain.MemberView{}, false
}

// quiet waits until nothing can change any more: the fake runs no pipeline
// and has no delivery in flight, and the in-process daemon has no event to
// apply, no action to send, and has recorded every pipeline it created.
// Only then is "nothing was created" a fact rather than a matter of waiting
// long enough.
func (w *world) quiet() {
	w.t.Helper()
	if w.engine == nil {
		w.t.Fatal("quiet needs an in-process daemon")
	}
	fakeIdle := func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // WaitIdle checks before it waits: an ended context asks "idle now?"
		return w.srv.WaitIdle(ctx) == nil
	}
	// A webhook can mark an action sent while the worker that created the
	// pipeline has yet to record the create call's answer: the outbox then
	// looks empty, but the worker still writes. It has written once it
	// counted the pipeline in the triggers metric.
	recorded := func() bool {
		created := 0
		for _, p := range w.srv.Projects() {
			created += len(w.apiPipelines(p))
		}
		counted := w.metric(`depsd_pipeline_triggers_total{outcome="created"}`) +
			w.metric(`depsd_pipeline_triggers_total{outcome="adopted"}`)
		return counted == float64(created)
	}
	w.waitUntil("GitLab and depsd are idle", chainTimeout, func() bool {
		if !fakeIdle() || !recorded() {
			return false
		}
		s, err := w.engine.Stats(context.Background())
		// Idle again afterwards: a pipeline created between the two
		// looks would have made the fake busy.
		return err == nil && s.PendingActions == 0 && s.UnprocessedEvts == 0 && fakeIdle()
	})
}

// slowCreates starts a proxy in front of srv that holds back GitLab's
// answer to every create-pipeline request for delay, after the pipeline was
// created and started: as a loaded GitLab answers late, or as a depsd
// worker that stalls before it records the answer. It returns the proxy's
// URL.
func slowCreates(t *testing.T, srv *gitlabtest.Server, delay time.Duration) string {
	t.Helper()
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v4/projects/") && strings.HasSuffix(r.URL.Path, "/pipeline") {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
			}
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	return proxy.URL
}

// postHook posts a Pipeline Hook body to depsd as GitLab would, with token
// (none when empty) and a fresh Idempotency-Key, and returns the status and
// the answer's body.
func (w *world) postHook(payload []byte, token string) (int, string) {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.hookURL(), bytes.NewReader(payload))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitlab-Event", gitlabtest.PipelineHook)
	req.Header.Set("Idempotency-Key", fmt.Sprintf("e2e-%d", time.Now().UnixNano()))
	if token != "" {
		req.Header.Set("X-Gitlab-Token", token)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric returns the value of one sample of GET /metrics, e.g.
// `depsd_webhook_events_total{kind="pipeline",outcome="duplicate"}`, and 0
// when absent.
func (w *world) metric(sample string) float64 {
	w.t.Helper()
	resp, err := w.client.Get(w.url + "/metrics")
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return 0
}

// deliveryOf returns the newest delivery of the pipeline's status change.
func (w *world) deliveryOf(pipelineID int64, status string) (gitlabtest.Delivery, bool) {
	ds := w.srv.Deliveries()
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if d.Event == gitlabtest.PipelineHook && d.PipelineID == pipelineID && d.PipelineStatus == status {
			return d, true
		}
	}
	return gitlabtest.Delivery{}, false
}

// firstDelivery is the first Pipeline Hook delivery of pipelineID with
// status.
func (w *world) firstDelivery(pipelineID int64, status string) (gitlabtest.Delivery, bool) {
	for _, d := range w.srv.Deliveries() {
		if d.Event == gitlabtest.PipelineHook && d.PipelineID == pipelineID && d.PipelineStatus == status {
			return d, true
		}
	}
	return gitlabtest.Delivery{}, false
}

// dump shows depsd's chains, every pipeline of the fake, the deliveries and
// the end of depsd's logs: what a failing test needs to say what went wrong.
func (w *world) dump() string {
	var b strings.Builder
	b.WriteString("== depsd chains (GET /api/v1/chains)\n")
	if cs, err := w.chains(); err != nil {
		fmt.Fprintf(&b, "  unavailable: %v\n", err)
	} else {
		for _, c := range cs {
			fmt.Fprintf(&b, "  chain %d %s mode=%s roots=%v\n", c.ID, c.State, c.Mode, c.Roots)
			for _, m := range c.Members {
				fmt.Fprintf(&b, "    %-16s %-9s pipeline=%-5d builds=%d upstreams=%v why=%q\n",
					m.Project, m.State, m.PipelineID, m.Builds, m.Upstreams, m.Why)
			}
		}
	}
	b.WriteString("== GitLab pipelines\n")
	for _, path := range w.srv.Projects() {
		for _, p := range w.srv.Pipelines(path) {
			fmt.Fprintf(&b, "  %-16s #%d %-4s %-8s created=%s finished=%s upstream=%q chain=%q\n",
				path, p.ID, p.Source, p.Status, p.CreatedAt.Format("15:04:05.000"),
				p.FinishedAt.Format("15:04:05.000"), p.Variables["DEPSD_UPSTREAM"], p.Variables["DEPSD_CHAIN_ID"])
		}
	}
	b.WriteString("== webhook deliveries\n")
	for _, d := range w.srv.Deliveries() {
		fmt.Fprintf(&b, "  #%d project=%d %s pipeline=%d %s sent=%s → %s %d %s\n", d.ID, d.ProjectID, d.Event,
			d.PipelineID, d.PipelineStatus, d.SentAt.Format("15:04:05.000"), d.State, d.StatusCode, d.Err)
	}
	if w.logs != nil {
		b.WriteString("== depsd logs (last lines)\n")
		b.WriteString(w.logs.tail(40))
	}
	return b.String()
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger
// or a subprocess.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// tail returns the last n lines.
func (s *syncBuffer) tail(n int) string {
	lines := strings.SplitAfter(s.String(), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// exitCode is the status of an exited process, or -1 when it was killed by
// a signal or did not run.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
