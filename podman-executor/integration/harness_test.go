package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
	"gitlab.com/depsd/depsd/podman-executor/executor"
)

// buildTags are the tags the podman bindings need (see README.md).
const buildTags = "remote exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_openpgp"

// ciSocket is where .ci/podman.sh starts the podman service.
const ciSocket = "/tmp/depsd-ci/podman/podman.sock"

// stages are the run stages of a trivial job, in the runner's order.
var stages = []string{"prepare_script", "get_sources", "restore_cache", "build_script",
	"after_script", "archive_cache", "upload_artifacts_on_success", "cleanup_file_variables"}

// env is what every test shares: set once by TestMain, read-only after.
type env struct {
	bin    string // the compiled podman-executor
	host   string // CONTAINER_HOST
	image  string // the busybox test image
	root   string // scratch dir
	engine *container.Podman
	skip   string // why the tests skip, if they do
}

var shared env

func TestMain(m *testing.M) {
	os.Exit(setup(m))
}

func setup(m *testing.M) int {
	host := os.Getenv("CONTAINER_HOST")
	if host == "" {
		if _, err := os.Stat(ciSocket); err == nil {
			host = "unix://" + ciSocket
		}
	}
	image := os.Getenv("DEPSD_TEST_IMAGE")
	if image == "" {
		image = "localhost/busybox-test:latest"
	}
	shared = env{host: host, image: image}
	expected := expectPodman(os.Getenv)
	if host == "" {
		if expected != "" {
			fmt.Fprintf(os.Stderr, "%s but no podman socket is set or at %s: failing instead of skipping\n", expected, ciSocket)
			return 1
		}
		shared.skip = "no podman socket: set CONTAINER_HOST or run `eval \"$(.ci/podman.sh start)\"`"
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	engine, err := container.Dial(ctx, host)
	if err != nil {
		if expected != "" {
			fmt.Fprintf(os.Stderr, "%s but podman at %s does not answer (%v): failing instead of skipping\n", expected, host, err)
			return 1
		}
		shared.skip = fmt.Sprintf("podman socket %s not reachable (%v): run `eval \"$(.ci/podman.sh start)\"`", host, err)
		return m.Run()
	}
	if ok, err := engine.ImageExists(ctx, image); err != nil || !ok {
		fmt.Fprintf(os.Stderr, "test image %s missing (%v): run .ci/podman.sh start\n", image, err)
		return 1
	}
	root, err := os.MkdirTemp("", "podman-executor-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(root)
	bin := filepath.Join(root, "podman-executor")
	build := exec.Command("go", "build", "-tags", buildTags, "-o", bin, "../cmd/podman-executor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build podman-executor: %v\n%s", err, out)
		return 1
	}
	shared.bin, shared.root, shared.engine = bin, root, engine
	return m.Run()
}

// expected says why a real component must be there -- CI=true,
// DEPSD_REQUIRE naming it (or "all"), or, for podman, CONTAINER_HOST set --
// or "" when its tests may skip without it. It is the rule of depsd's
// internal/realtest, restated because this module imports nothing from
// depsd.
func expected(component string, getenv func(string) string) string {
	if strings.EqualFold(strings.TrimSpace(getenv("CI")), "true") {
		return "CI=true"
	}
	for _, name := range strings.Split(getenv("DEPSD_REQUIRE"), ",") {
		if name = strings.TrimSpace(name); strings.EqualFold(name, "all") || strings.EqualFold(name, component) {
			return "DEPSD_REQUIRE=" + getenv("DEPSD_REQUIRE")
		}
	}
	if h := getenv("CONTAINER_HOST"); component == "podman" && h != "" {
		return "CONTAINER_HOST=" + h
	}
	return ""
}

// expectPodman is expected("podman", getenv).
func expectPodman(getenv func(string) string) string { return expected("podman", getenv) }

// runner behaves like gitlab-runner towards the driver, for one test.
type runner struct {
	t          testing.TB
	env        env
	configFile string   // driver config file
	cache      string   // cache_host_dir
	state      string   // state_dir
	extraEnv   []string // more driver environment (benchmarks)
	runStages  []string // run stages of runJob; nil: stages
	// cred runs the driver as another user (rootless); newDir then makes
	// the directories it needs, owned by that user.
	cred   *syscall.Credential
	newDir func() string
}

func newRunner(t testing.TB, extraConfig string) *runner {
	t.Helper()
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	dir := t.TempDir()
	r := &runner{t: t, env: shared, configFile: filepath.Join(dir, "config.toml"), cache: filepath.Join(dir, "cache")}
	r.state = filepath.Join(dir, "state")
	cfg := fmt.Sprintf("podman_url = %q\nrunner_name = \"itest\"\ncache_host_dir = %q\nhelper_binary = %q\nstop_grace = \"2s\"\n",
		shared.host, r.cache, helperBinary())
	if !strings.Contains(extraConfig, "state_dir") {
		cfg += fmt.Sprintf("state_dir = %q\n", r.state)
	}
	cfg += extraConfig
	if err := os.WriteFile(r.configFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// helperBinary stands in for gitlab-runner: any static binary will do to
// check it is mounted on the job's PATH.
func helperBinary() string {
	if _, err := os.Stat("/bin/busybox"); err == nil {
		return "/bin/busybox"
	}
	return "none"
}

// job is one CI job as the runner describes it to the driver.
type job struct {
	ID, Project, Concurrent string
	Image                   string
	Services                string            // CI_JOB_SERVICES JSON
	Vars                    map[string]string // more job variables (CUSTOM_ENV_ + key)
	Scripts                 map[string]string
	tmp                     string
	jobEnv                  map[string]string
	// response is the job payload (JOB_RESPONSE_FILE) but for its ids,
	// which each call writes from ID and Project (see setResponse).
	response string
}

func (r *runner) newJob(id int) *job {
	tmp := ""
	if r.newDir != nil {
		tmp = r.newDir()
	} else {
		tmp = r.t.TempDir()
	}
	return &job{ID: strconv.Itoa(id), Project: "42", Concurrent: "0", Image: r.env.image,
		Scripts: map[string]string{}, tmp: tmp}
}

// setResponse sets the job payload the runner would pass; its id and
// job_info.project_id are the job's ID and Project.
func (j *job) setResponse(t *testing.T, body string) {
	t.Helper()
	if !json.Valid([]byte(body)) {
		t.Fatalf("job response %q is not JSON", body)
	}
	j.response = body
}

// writeResponse writes the job response the driver reads
// (JOB_RESPONSE_FILE): the runner's payload, from which the driver takes
// the job's and the project's ids.
func (r *runner) writeResponse(j *job) string {
	r.t.Helper()
	payload := map[string]json.RawMessage{}
	if j.response != "" {
		if err := json.Unmarshal([]byte(j.response), &payload); err != nil {
			r.t.Fatal(err)
		}
	}
	info := map[string]json.RawMessage{}
	if raw, ok := payload["job_info"]; ok {
		if err := json.Unmarshal(raw, &info); err != nil {
			r.t.Fatal(err)
		}
	}
	info["project_id"] = json.RawMessage(j.Project)
	payload["id"] = json.RawMessage(j.ID)
	b, err := json.Marshal(info)
	if err != nil {
		r.t.Fatal(err)
	}
	payload["job_info"] = b
	if b, err = json.Marshal(payload); err != nil {
		r.t.Fatalf("job response of job %s, project %s: %v", j.ID, j.Project, err)
	}
	path := filepath.Join(j.tmp, "response.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.own(path)
	return path
}

// name is the job container's name, as the driver computes it.
func (j *job) name() string {
	return executor.Identity{Runner: "itest", Project: j.Project, Concurrent: j.Concurrent, Job: j.ID}.JobName()
}

// result is what one driver call did.
type result struct {
	code int
	out  string
}

// environ is the driver's environment for one call, as the runner sets it.
func (r *runner) environ(j *job) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"PODMAN_EXECUTOR_CONFIG=" + r.configFile,
		"BUILD_FAILURE_EXIT_CODE=1", "SYSTEM_FAILURE_EXIT_CODE=2",
		"BUILD_EXIT_CODE_FILE=" + filepath.Join(j.tmp, "exit-code"),
		"JOB_RESPONSE_FILE=" + r.writeResponse(j),
		"TMPDIR=" + j.tmp,
		"CUSTOM_ENV_CI_RUNNER_SHORT_TOKEN=itest",
		"CUSTOM_ENV_CI_PROJECT_ID=" + j.Project,
		"CUSTOM_ENV_CI_CONCURRENT_PROJECT_ID=" + j.Concurrent,
		"CUSTOM_ENV_CI_JOB_ID=" + j.ID,
		"CUSTOM_ENV_CI_JOB_IMAGE=" + j.Image,
		"CUSTOM_ENV_CI_JOB_SERVICES=" + j.Services,
	}
	for k, v := range j.Vars {
		env = append(env, "CUSTOM_ENV_"+k+"="+v)
	}
	env = append(env, r.extraEnv...)
	if h := os.Getenv("CONTAINERS_CONF"); h != "" {
		env = append(env, "CONTAINERS_CONF="+h)
	}
	for k, v := range j.jobEnv {
		env = append(env, k+"="+v)
	}
	return env
}

// output is a driver call's output, safe to read while the call runs.
type output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitOutput waits until a running call's output contains want.
func (r *runner) waitOutput(out *output, want string) {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			r.t.Fatalf("output never showed %q:\n%s", want, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit waits for a started call to end, failing the test after a
// minute (a stuck driver, not a slow one).
func (r *runner) waitExit(cmd *exec.Cmd, out *output) {
	r.t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		r.t.Fatalf("%v did not end within a minute:\n%s", cmd.Args, out)
	}
}

// start starts one driver call without waiting for it.
func (r *runner) start(j *job, args ...string) (*exec.Cmd, *output) {
	r.t.Helper()
	cmd := exec.Command(r.env.bin, args...)
	cmd.Env = r.environ(j)
	r.asUser(cmd)
	var out output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd, &out
}

// call runs one driver call and returns its exit code and output.
func (r *runner) call(j *job, args ...string) result {
	r.t.Helper()
	cmd, out := r.start(j, args...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		r.t.Fatalf("%v timed out:\n%s", args, out)
	}
	return result{code: cmd.ProcessState.ExitCode(), out: out.String()}
}

// own gives path to r.cred's user, if set.
func (r *runner) own(path string) {
	if r.cred != nil {
		if err := os.Chown(path, int(r.cred.Uid), int(r.cred.Gid)); err != nil {
			r.t.Fatal(err)
		}
	}
}

// asUser makes cmd run as r.cred's user, if set.
func (r *runner) asUser(cmd *exec.Cmd) {
	if r.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	}
}

// config runs the config stage and keeps its job_env for later calls.
func (r *runner) config(j *job) {
	r.t.Helper()
	cmd := exec.Command(r.env.bin, "config")
	cmd.Env = r.environ(j)
	r.asUser(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("config: %v\n%s", err, stderr.String())
	}
	var out executor.ConfigOutput
	if err := json.Unmarshal(stdout, &out); err != nil {
		r.t.Fatalf("config stdout is not JSON: %v: %q", err, stdout)
	}
	j.jobEnv = out.JobEnv
}

// jobRun is a whole job: stage results and the job log.
type jobRun struct {
	prepare result
	stages  map[string]result
	cleanup result
	log     string
}

// runJob runs config → prepare → the run stages → cleanup like the
// runner: after a failed stage only after_script and
// cleanup_file_variables still run; cleanup always runs.
func (r *runner) runJob(j *job) jobRun {
	r.t.Helper()
	var jr jobRun
	var log strings.Builder
	r.config(j)
	jr.prepare = r.call(j, "prepare")
	log.WriteString(jr.prepare.out)
	jr.stages = map[string]result{}
	if jr.prepare.code == 0 {
		failed := false
		run := stages
		if r.runStages != nil {
			run = r.runStages
		}
		for _, stage := range run {
			if failed && stage != "after_script" && stage != "cleanup_file_variables" {
				continue
			}
			script := filepath.Join(j.tmp, "script-"+stage)
			body := j.Scripts[stage]
			if body == "" {
				body = "echo stage=" + stage + "\n"
			}
			if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
				r.t.Fatal(err)
			}
			r.own(script)
			res := r.call(j, "run", script, stage)
			jr.stages[stage] = res
			log.WriteString(res.out)
			failed = failed || res.code != 0
		}
	}
	jr.cleanup = r.call(j, "cleanup")
	log.WriteString(jr.cleanup.out)
	jr.log = log.String()
	return jr
}

// assertGone fails when anything of the job's group is left in podman.
func (r *runner) assertGone(j *job) {
	r.t.Helper()
	ctx := context.Background()
	sel := map[string]string{executor.LabelGroup: j.name()}
	cs, err := r.env.engine.List(ctx, sel)
	if err != nil {
		r.t.Fatal(err)
	}
	ns, err := r.env.engine.ListNetworks(ctx, sel)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(cs) > 0 || len(ns) > 0 {
		r.t.Errorf("left behind: containers %v networks %v", cs, ns)
	}
	if _, err := os.Stat(filepath.Join(r.state, j.name())); !os.IsNotExist(err) {
		r.t.Errorf("left behind: state directory of %s (%v)", j.name(), err)
	}
}

// kill sends sig to a driver call started with start.
func kill(cmd *exec.Cmd, sig syscall.Signal) error { return cmd.Process.Signal(sig) }
