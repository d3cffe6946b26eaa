package demo

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/daemon"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/templates"
)

// The real demo (depsd demo --real): the sample chain built for real on
// the user's machine: a docker-registry and GitLab Runner with
// podman-executor started for the demo, each image built by buildah in a
// job and pushed, depsd ordering the chain, each image's digest and
// verification printed as its member succeeds. Everything it starts is
// stopped at the end. docs/real-chain.md describes the set-up it shares
// with make e2e-real.

// RealOptions tune the real demo.
type RealOptions struct {
	// StateDir holds the state file, the registry's storage and the
	// runner's configuration. Required (a temporary directory).
	StateDir string
	// PodmanURL is the podman API service the jobs run on
	// (unix:///run/podman/podman.sock); empty: CONTAINER_HOST.
	PodmanURL string
	// Runner and Executor are the gitlab-runner and podman-executor
	// binaries; empty: looked up on PATH (and, for podman-executor,
	// beside the running depsd).
	Runner, Executor string
	// JobImage has buildah and git (.ci/buildah-image.sh); SeedImage is
	// the external image the base is FROM (.ci/podman.sh's busybox).
	JobImage, SeedImage string
	// Timeout bounds the demo; default 10 minutes.
	Timeout time.Duration
	// Logger receives the daemon's logs. Default: discard.
	Logger *slog.Logger
}

// Default images of the real demo, as the repository's .ci scripts build
// them.
const (
	DefaultJobImage  = "localhost/buildah-job-test:bookworm"
	DefaultSeedImage = "localhost/busybox-test:latest"
)

// Missing is one thing the real demo needs and did not find.
type Missing struct {
	What, How string
}

// ErrMissing is returned by RunReal when something it needs is missing;
// it printed what and how to get it.
var ErrMissing = errors.New("the real demo's prerequisites are missing")

// realEnv is what the prerequisite check asks of the machine; the real
// machine's in RunReal, a table in tests.
type realEnv struct {
	lookPath    func(string) (string, error)
	getenv      func(string) string
	stat        func(string) error
	imageExists func(podmanURL, image string) bool
	executable  func() (string, error)
}

func machine() realEnv {
	return realEnv{
		lookPath: exec.LookPath,
		getenv:   os.Getenv,
		stat:     func(p string) error { _, err := os.Stat(p); return err },
		imageExists: func(url, image string) bool {
			return exec.Command("podman", "--url", url, "image", "exists", image).Run() == nil
		},
		executable: os.Executable,
	}
}

// check fills in o's defaults from env and lists what is missing, in the
// order a user would install it.
func check(o *RealOptions, env realEnv) []Missing {
	var missing []Missing
	if o.JobImage == "" {
		o.JobImage = DefaultJobImage
	}
	if o.SeedImage == "" {
		o.SeedImage = DefaultSeedImage
	}
	if o.PodmanURL == "" {
		o.PodmanURL = env.getenv("CONTAINER_HOST")
	}
	_, podmanErr := env.lookPath("podman")
	if podmanErr != nil {
		missing = append(missing, Missing{"podman", "apt-get install podman runc (or your distribution's podman)"})
	}
	if o.PodmanURL == "" {
		missing = append(missing, Missing{"a podman API service", "podman system service --time=0 unix:///run/podman/podman.sock & and set CONTAINER_HOST=unix:///run/podman/podman.sock (or pass --podman-url)"})
	}
	if _, err := env.lookPath(registryBinary); err != nil {
		missing = append(missing, Missing{"docker-registry", "apt-get install docker-registry"})
	}
	if o.Runner == "" {
		if p, err := env.lookPath("gitlab-runner"); err == nil {
			o.Runner = p
		} else {
			missing = append(missing, Missing{"gitlab-runner", "install GitLab Runner (17.9 or later) on PATH, or pass --runner PATH"})
		}
	}
	if o.Executor == "" {
		if p, err := env.lookPath("podman-executor"); err == nil {
			o.Executor = p
		} else if self, err := env.executable(); err == nil && env.stat(filepath.Join(filepath.Dir(self), "podman-executor")) == nil {
			o.Executor = filepath.Join(filepath.Dir(self), "podman-executor")
		} else {
			missing = append(missing, Missing{"podman-executor", "make build (bin/podman-executor beside bin/depsd), or pass --executor PATH"})
		}
	}
	if env.stat("/dev/fuse") != nil {
		missing = append(missing, Missing{"/dev/fuse", "modprobe fuse: buildah builds in unprivileged jobs need it"})
	}
	if podmanErr == nil && o.PodmanURL != "" {
		if !env.imageExists(o.PodmanURL, o.JobImage) {
			missing = append(missing, Missing{"the job image " + o.JobImage, "apt-get install debootstrap; .ci/buildah-image.sh (Debian minbase with buildah and git)"})
		}
		if !env.imageExists(o.PodmanURL, o.SeedImage) {
			missing = append(missing, Missing{"the base's external image " + o.SeedImage, "apt-get install busybox-static; .ci/podman.sh start (it imports the busybox image)"})
		}
	}
	return missing
}

// realRoot is the project whose rebuild the real demo shows.
const realRoot = "demo/base"

// realProjects are the real demo's projects on registry host reg: a
// chain of three and a diamond, each a real Containerfile.
func realProjects(reg string) map[string]string {
	img := func(p string) string { return reg + "/" + p + ":latest" }
	return map[string]string{
		realRoot:      fmt.Sprintf("FROM %s/ext/busybox:latest\nRUN date > /etc/base-version\n", reg),
		"demo/ruby":   fmt.Sprintf("FROM %s\nRUN echo ruby > /etc/ruby-version\n", img(realRoot)),
		"demo/app":    fmt.Sprintf("FROM %s\nRUN echo app > /app\n", img("demo/ruby")),
		"demo/left":   fmt.Sprintf("FROM %s\nRUN echo left > /left\n", img(realRoot)),
		"demo/right":  fmt.Sprintf("FROM %s\nRUN echo right > /right\n", img(realRoot)),
		"demo/bottom": fmt.Sprintf("FROM %s AS right\nFROM %s\nCOPY --from=right /right /right\n", img("demo/right"), img("demo/left")),
	}
}

// The build component (templates/image-build.yml) lives in a project of
// the simulated GitLab, outside depsd's scope, at a release tag; every
// project's .gitlab-ci.yml includes it in one line, as a project of a
// real instance does (docs/build-component.md).
const (
	ComponentProject = "ci/components"
	ComponentVersion = "1.0.0"
)

// AddBuildComponent adds the component project to srv: a README and
// templates/image-build.yml, tagged ComponentVersion, public (any
// pipeline's user may include it).
func AddBuildComponent(srv *gitlabtest.Server) error {
	if _, err := srv.AddProject(gitlabtest.Project{Path: ComponentProject, Files: map[string]string{
		"README.md":                 "# CI/CD components\n\n- image-build: build and push an image with buildah (depsd's docs/build-component.md)\n",
		"templates/image-build.yml": templates.ImageBuild,
	}}); err != nil {
		return fmt.Errorf("add the build component's project: %w", err)
	}
	if err := srv.CreateTag(ComponentProject, ComponentVersion, "main"); err != nil {
		return err
	}
	return srv.SetVisibility(ComponentProject, gitlabtest.VisibilityPublic)
}

// BuildComponentCI is a project's .gitlab-ci.yml: the component included
// at ComponentVersion with these inputs (YAML lines "name: value").
func BuildComponentCI(inputs ...string) string {
	s := "include:\n  - component: $CI_SERVER_FQDN/" + ComponentProject + "/" + templates.ImageBuildName + "@" + ComponentVersion + "\n"
	if len(inputs) > 0 {
		s += "    inputs:\n      " + strings.Join(inputs, "\n      ") + "\n"
	}
	return s
}

// realCIConfig is every project's .gitlab-ci.yml: the build component in
// the job image, pushing to the demo's registry over plain HTTP.
func realCIConfig(jobImage string) string {
	return BuildComponentCI("job_image: "+jobImage, "tls_verify: false")
}

// RunReal runs the real demo and writes its story to out. Without what it
// needs it prints what is missing and how to get it, and returns
// ErrMissing.
func RunReal(ctx context.Context, out io.Writer, o RealOptions) error {
	if missing := check(&o, machine()); len(missing) > 0 {
		fmt.Fprintln(out, "depsd demo --real builds a chain of images for real and needs:")
		for _, m := range missing {
			fmt.Fprintf(out, "  missing %s: %s\n", m.What, m.How)
		}
		fmt.Fprintln(out, "`depsd demo` (without --real) needs none of it.")
		return ErrMissing
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	reg, stopRegistry, err := startRegistry(ctx, filepath.Join(o.StateDir, "registry"))
	if err != nil {
		return err
	}
	defer stopRegistry()
	fmt.Fprintf(out, "docker-registry on %s\n", reg)
	if b, err := exec.CommandContext(ctx, "podman", "--url", o.PodmanURL, "push", "--tls-verify=false", o.SeedImage,
		"docker://"+reg+"/ext/busybox:latest").CombinedOutput(); err != nil {
		return fmt.Errorf("push %s to the demo's registry: %w: %s", o.SeedImage, err, b)
	}

	token := "glrt-" + fmt.Sprintf("%09x", time.Now().UnixNano()&0xfffffffff) + "-demo"
	srv := gitlabtest.New(gitlabtest.Options{Token: "glpat-demo", RegistryHost: reg, RunnerToken: token})
	defer srv.Close()
	if err := AddBuildComponent(srv); err != nil {
		return err
	}
	for path, cf := range realProjects(reg) {
		if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{
			"Containerfile": cf, ".gitlab-ci.yml": realCIConfig(o.JobImage)}}); err != nil {
			return fmt.Errorf("seed %s: %w", path, err)
		}
		if err := srv.SetPipelineBehavior(path, gitlabtest.Behavior{Jobs: true}); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "GitLab (simulated, with real jobs) at %s\n", srv.URL)
	stopRunner, err := StartRunner(RunnerOptions{Dir: filepath.Join(o.StateDir, "runner"), Runner: o.Runner, Executor: o.Executor,
		PodmanURL: o.PodmanURL, JobImage: o.JobImage, URL: srv.URL, Token: token})
	if err != nil {
		return err
	}
	defer stopRunner()
	fmt.Fprintf(out, "gitlab-runner with podman-executor (2 jobs at a time) on %s\n", o.PodmanURL)

	gl, err := gitlab.New(gitlab.Config{BaseURL: srv.URL, Token: srv.Token, RequestsPerMinute: -1, Logger: o.Logger})
	if err != nil {
		return err
	}
	cfg := config.Defaults()
	cfg.GitLab.URL, cfg.GitLab.Token = srv.URL, srv.Token
	cfg.Scope.Groups = []string{"demo"}
	cfg.State = filepath.Join(o.StateDir, "depsd.db")
	cfg.Hooks.Secret = "demo-webhook-secret"
	// depsd verifies every member, the bottom of each line included (no
	// downstream names its image: it is published all the same).
	cfg.Images.Publish = []string{"{registry}/{path}:latest"}
	// The demo's registry listens on 127.0.0.1, over plain HTTP: depsd
	// reads such a registry only when it is listed.
	cfg.Images.InsecureRegistries = []string{reg}
	listening := make(chan string, 1)
	d, err := daemon.New(ctx, daemon.Options{
		Config: cfg, Listen: "127.0.0.1:0", GitLab: gl, Logger: o.Logger,
		ReconcileInterval: 5 * time.Second, PollInterval: 250 * time.Millisecond, DrainTimeout: 5 * time.Second,
		Listening: func(addr string) { listening <- addr },
	})
	if err != nil {
		return err
	}
	runCtx, stopDaemon := context.WithCancel(ctx)
	defer stopDaemon()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return d.Run(gctx) })
	g.Go(func() error {
		defer stopDaemon()
		defer srv.Close()
		return realStory(gctx, out, d, gl, srv, cfg, reg, listening)
	})
	return g.Wait()
}

// realStory rebuilds the base and follows the chain, printing each
// member's image digest and verification once it succeeded.
func realStory(ctx context.Context, out io.Writer, d *daemon.Daemon, gl *gitlab.Client, srv *gitlabtest.Server, cfg config.Config, reg string, listening <-chan string) error {
	var addr string
	select {
	case addr = <-listening:
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintf(out, "depsd serve listening on http://%s (dashboard)\n", addr)
	if _, err := d.SyncHooks(ctx, "http://"+addr+"/hooks/gitlab"); err != nil {
		return err
	}
	graph, err := d.Graph(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nrebuilding %s for real; in waves:\n", realRoot)
	for i, wave := range chain.RebuildPlan(graph, realRoot) {
		fmt.Fprintf(out, "  wave %d: %s\n", i, strings.Join(wave, ", "))
	}
	fmt.Fprintln(out)
	engine := d.Engine()
	start := time.Now()
	id, err := engine.Rebuild(ctx, realRoot, chain.Reason{Kind: chain.ReasonRebuild, Detail: "depsd demo --real"})
	if err != nil {
		return err
	}
	// Each member's verdict is depsd's own (the live view prints it); the
	// digest beside a success is read from the registry.
	rd := registry.New(registry.Options{Insecure: []string{reg}})
	onSuccess := func(p string) string {
		digest, err := rd.Digest(ctx, reg+"/"+p+":latest")
		if err != nil {
			return "  (image not read: " + err.Error() + ")"
		}
		return "  " + short(digest)
	}
	view, err := followWith(ctx, out, engine, id, start, onSuccess)
	if err != nil {
		return err
	}
	if view.State != chain.Finished {
		for _, m := range view.Members {
			if m.State == chain.Failed {
				for _, j := range srv.Jobs(m.PipelineID) {
					fmt.Fprintf(out, "\n%s's job log (the end):\n%s\n", m.Project, tail(j.Trace, 15))
				}
			}
		}
		return fmt.Errorf("chain %d ended %s", id, view.State)
	}
	fmt.Fprintf(out, "\nchain %d finished in %s: %d images built by real jobs, pushed to %s, each verified\n",
		id, time.Since(start).Round(100*time.Millisecond), len(view.Members), reg)
	var wrong []string
	for _, m := range view.Members {
		if m.Verified != chain.ImageFresh {
			wrong = append(wrong, fmt.Sprintf("%s (%s)", m.Project, cmp.Or(string(m.Verified), "not verified")))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("images not verified fresh on their upstream's current image: %s", strings.Join(wrong, ", "))
	}
	return nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19]
	}
	return digest
}

// registryBinary is Debian's docker-registry (distribution 2.x).
const registryBinary = "docker-registry"

// startRegistry runs docker-registry on a free 127.0.0.1 port with its
// storage in dir, until stop.
func startRegistry(ctx context.Context, dir string) (addr string, stop func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = l.Addr().String()
	l.Close()
	cfg := filepath.Join(dir, "config.yml")
	body := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "storage"), addr)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(registryBinary, "serve", cfg)
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", registryBinary, err)
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(15 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return addr, stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("%s on %s did not answer: %w", registryBinary, addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RunnerOptions configure StartRunner.
type RunnerOptions struct {
	// Dir holds the runner's and the driver's configuration and state.
	Dir string
	// Runner and Executor are the gitlab-runner and podman-executor
	// binaries; PodmanURL the podman API service the jobs run on.
	Runner, Executor, PodmanURL string
	// JobImage is allowed to build images (allowed_build_images).
	JobImage string
	// URL and Token are GitLab's and the runner's authentication token.
	URL, Token string
	// Concurrent is how many jobs run at once; default 2.
	Concurrent int
	// Log receives the runner's output; nil: discarded.
	Log io.Writer
}

// StartRunner runs `gitlab-runner run` with podman-executor as its custom
// executor, for image-building jobs, until stop, which lets running jobs
// finish (SIGQUIT; killed after 30 s) and removes the build storage
// volumes of this runner's jobs. make e2e-real runs its chain on it too.
func StartRunner(o RunnerOptions) (stop func(), err error) {
	if o.Concurrent <= 0 {
		o.Concurrent = 2
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	// network_mode = "host": GitLab (the sources over git's HTTP, the
	// runner's helper commands) and the registry listen on the host's
	// 127.0.0.1, which a job on a bridge network cannot reach.
	// helper_binary, not helper_image: the job container clones its
	// sources itself (its image has git), so the demo needs no helper
	// image built first. (helper_image works for build jobs too: their
	// helper runs in their user namespace; see podman-executor's README.)
	drv := filepath.Join(o.Dir, "driver.toml")
	name := driverRunnerName(o.Token)
	body := fmt.Sprintf("podman_url = %q\nrunner_name = %q\ncache_host_dir = %q\nstate_dir = %q\nhelper_binary = %q\nstop_grace = \"2s\"\n"+
		"network_mode = \"host\"\nallowed_build_images = [%q]\n",
		o.PodmanURL, name, filepath.Join(o.Dir, "cache"), filepath.Join(o.Dir, "state"), o.Runner, o.JobImage)
	if err := os.WriteFile(drv, []byte(body), 0o644); err != nil {
		return nil, err
	}
	stage := func(s string) string {
		return fmt.Sprintf("    %s_exec = %q\n    %s_args = [\"--config\", %q, %q]\n", s, o.Executor, s, drv, s)
	}
	cfg := fmt.Sprintf("concurrent = %d\ncheck_interval = 1\n\n[[runners]]\n  name = \"depsd-real-chain\"\n  url = %q\n  token = %q\n"+
		"  executor = \"custom\"\n  limit = %d\n  builds_dir = \"/builds\"\n  cache_dir = \"/cache\"\n  [runners.custom]\n",
		o.Concurrent, o.URL, o.Token, o.Concurrent) + stage("config") + stage("prepare") + stage("run") + stage("cleanup") +
		"    graceful_kill_timeout = 10\n    force_kill_timeout = 10\n"
	cfgPath := filepath.Join(o.Dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Runner, "run", "--config", cfgPath, "--working-directory", o.Dir)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "HOME="+o.Dir)
	cmd.Stdout, cmd.Stderr = o.Log, o.Log
	// Its own process group, so that a stuck runner's drivers can be
	// killed with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gitlab-runner: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		removeVolumes(o.PodmanURL, name)
	}, nil
}

// driverRunnerName is the driver config's runner_name for the runner
// whose token is token: podman-executor labels what it keeps (build
// storage volumes) with it.
func driverRunnerName(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "depsd-demo-" + hex.EncodeToString(sum[:6])
}

// removeVolumes removes podman-executor's build storage volumes of the
// runner named runner (the driver config's runner_name).
func removeVolumes(podmanURL, runner string) {
	b, err := exec.Command("podman", "--url", podmanURL, "volume", "ls", "--format",
		`{{.Name}} {{index .Labels "io.depsd.podman-executor.runner"}}`).Output()
	if err != nil {
		return
	}
	for line := range strings.Lines(string(b)) {
		name, label, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && label == runner {
			_ = exec.Command("podman", "--url", podmanURL, "volume", "rm", "-f", name).Run()
		}
	}
}
