package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containers/podman/v4/pkg/bindings"
	"github.com/containers/podman/v4/pkg/bindings/network"

	"gitlab.com/depsd/depsd/podman-executor/container"
	"gitlab.com/depsd/depsd/podman-executor/executor"
)

// gitlabRunnerBinary is the real GitLab Runner (17.9.3, from
// ../shared/tools/gitlab-runner/install.sh), named by DEPSD_GITLAB_RUNNER
// (.ci/run installs it and sets it). Without it the test skips, or fails
// where the runner is expected (CI=true, DEPSD_REQUIRE=gitlab-runner).
func gitlabRunnerBinary(t *testing.T) string {
	t.Helper()
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	path := os.Getenv("DEPSD_GITLAB_RUNNER")
	why := "DEPSD_GITLAB_RUNNER is not set"
	if path != "" {
		st, err := os.Stat(path)
		switch {
		case err != nil:
			why = err.Error()
		case st.Mode()&0o111 == 0:
			why = path + " is not executable"
		default:
			return path
		}
	}
	if exp := expected("gitlab-runner", os.Getenv); exp != "" {
		t.Fatalf("%s but the real GitLab Runner is not usable (%s): install it with ../shared/tools/gitlab-runner/install.sh DIR and set DEPSD_GITLAB_RUNNER=DIR/gitlab-runner", exp, why)
	}
	t.Skipf("real GitLab Runner not usable (%s): install it with ../shared/tools/gitlab-runner/install.sh DIR and set DEPSD_GITLAB_RUNNER=DIR/gitlab-runner", why)
	return ""
}

// realRunner is the real gitlab-runner registered against a fakeJobsAPI,
// with podman-executor as its custom executor.
type realRunner struct {
	t          *testing.T
	bin        string // gitlab-runner
	api        *fakeJobsAPI
	dir        string
	config     string // the runner's config.toml
	name       string // of the [[runners]] section in it
	driverConf string // podman-executor's config
	cacheDir   string // the driver's cache_host_dir
	env        []string
}

// newRealRunner writes a config.toml with one [[runners]] section for the
// custom executor (as `gitlab-runner register` writes it, with the driver's
// config passed by --config) and a driver config with extra appended.
func newRealRunner(t *testing.T, api *fakeJobsAPI, concurrent int, extra string) *realRunner {
	t.Helper()
	bin := gitlabRunnerBinary(t)
	dir := t.TempDir()
	r := &realRunner{t: t, bin: bin, api: api, dir: dir, name: "itest",
		config: filepath.Join(dir, "config.toml"), driverConf: filepath.Join(dir, "driver.toml"),
		cacheDir: filepath.Join(dir, "cache")}
	drv := fmt.Sprintf("podman_url = %q\ncache_host_dir = %q\nstate_dir = %q\nhelper_binary = %q\nstop_grace = \"2s\"\n",
		shared.host, r.cacheDir, filepath.Join(dir, "state"), bin) + extra
	if err := os.WriteFile(r.driverConf, []byte(drv), 0o644); err != nil {
		t.Fatal(err)
	}
	exec := func(stage string) string {
		return fmt.Sprintf("    %s_exec = %q\n    %s_args = [\"--config\", %q, %q]\n", stage, shared.bin, stage, r.driverConf, stage)
	}
	cfg := fmt.Sprintf("concurrent = %d\ncheck_interval = 1\n\n[[runners]]\n  name = \"itest\"\n  url = %q\n  token = %q\n"+
		"  executor = \"custom\"\n  limit = %d\n  builds_dir = \"/builds\"\n  cache_dir = \"/cache\"\n  [runners.custom]\n",
		concurrent, api.url, api.token, concurrent) +
		exec("config") + exec("prepare") + exec("run") + exec("cleanup") +
		"    graceful_kill_timeout = 10\n    force_kill_timeout = 10\n"
	if err := os.WriteFile(r.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if c := os.Getenv("CONTAINERS_CONF"); c != "" {
		r.env = append(r.env, "CONTAINERS_CONF="+c)
	}
	return r
}

// start starts gitlab-runner with args; its log goes to out.
func (r *realRunner) start(args ...string) (*exec.Cmd, *output) {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = r.dir
	cmd.Env = r.env
	var out output
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so that a stuck runner's drivers can be
	// killed with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd, &out
}

// runSingle runs `gitlab-runner run-single` until it has processed n jobs
// (which the caller enqueued) and returns its log.
func (r *realRunner) runSingle(n int) string {
	r.t.Helper()
	cmd, out := r.start("run-single", "--config", r.config, "--runner", r.name,
		"--max-builds", strconv.Itoa(n), "--wait-timeout", "120")
	r.wait(cmd, out, 4*time.Minute)
	return out.String()
}

// wait waits for a started runner to exit, killing it (and its drivers)
// and failing the test after limit: a stuck runner, not a slow one.
func (r *realRunner) wait(cmd *exec.Cmd, out *output, limit time.Duration) {
	r.t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		r.t.Fatalf("gitlab-runner %v did not exit within %v:\n%s", cmd.Args[1:], limit, out)
	}
}

// waitDone waits until the runner reported j's end (or gave up on it).
func waitDone(t *testing.T, j *fakeJob, limit time.Duration) {
	t.Helper()
	select {
	case <-j.done:
	case <-time.After(limit):
		t.Fatalf("job %d: no final state after %v; log so far:\n%s", j.payload.ID, limit, j.log())
	}
}

// assertJobGone fails when a container or network of job id is left.
func assertJobGone(t *testing.T, id int64) {
	t.Helper()
	ctx := context.Background()
	sel := map[string]string{executor.LabelJob: strconv.FormatInt(id, 10)}
	cs, err := shared.engine.List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := shared.engine.ListNetworks(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) > 0 || len(ns) > 0 {
		t.Errorf("job %d left behind: containers %v networks %v", id, cs, ns)
	}
}

// contains reports the wanted strings missing from s.
func missing(s string, want ...string) []string {
	var out []string
	for _, w := range want {
		if !strings.Contains(s, w) {
			out = append(out, w)
		}
	}
	return out
}

// podmanGateway is the host's address on podman's default network, which
// job containers on a bridge network reach the host by: a fake GitLab
// listening there is reachable from the runner and from the helper
// commands in the job container, as a real GitLab is. A container on that
// network is kept running while the test runs, so that the bridge (and the
// address) stays there whatever the network backend.
func podmanGateway(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := bindings.NewConnection(ctx, shared.host)
	if err != nil {
		t.Fatal(err)
	}
	n, err := network.Inspect(conn, "podman", nil)
	if err != nil {
		t.Fatalf("podman's default network: %v", err)
	}
	if len(n.Subnets) == 0 || n.Subnets[0].Gateway == nil {
		t.Fatalf("podman's default network has no gateway: %+v", n.Subnets)
	}
	name := fmt.Sprintf("podman-executor-itest-bridge-%d", time.Now().UnixNano())
	if _, err := shared.engine.Create(ctx, container.Spec{Name: name, Image: shared.image,
		Command: []string{"sleep", "3600"}, Labels: map[string]string{executor.LabelManaged: "true"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shared.engine.Remove(context.Background(), name) })
	if err := shared.engine.Start(ctx, name); err != nil {
		t.Fatal(err)
	}
	return n.Subnets[0].Gateway.String()
}
