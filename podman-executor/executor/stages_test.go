package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

const testImage = "localhost/busybox-test:latest"

// fixture is one job on a fake engine.
type fixture struct {
	e      *Executor
	fake   *container.Fake
	out    *bytes.Buffer
	codes  ExitCodes
	helper string
}

func newFixture(t *testing.T, vars map[string]string, mutate func(*Config)) *fixture {
	t.Helper()
	dir := t.TempDir()
	helper := filepath.Join(dir, "gitlab-runner")
	if err := os.WriteFile(helper, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Defaults(Host{UID: 0})
	cfg.CacheHostDir = filepath.Join(dir, "cache")
	cfg.StateDir = filepath.Join(dir, "state")
	cfg.HelperBinary = helper
	cfg.DefaultImage = testImage
	if mutate != nil {
		mutate(&cfg)
	}
	env := []string{
		"CUSTOM_ENV_CI_RUNNER_SHORT_TOKEN=tok", "CUSTOM_ENV_CI_PROJECT_ID=7",
		"CUSTOM_ENV_CI_CONCURRENT_PROJECT_ID=0", "CUSTOM_ENV_CI_JOB_ID=100",
		"BUILD_FAILURE_EXIT_CODE=1", "SYSTEM_FAILURE_EXIT_CODE=2",
		"BUILD_EXIT_CODE_FILE=" + filepath.Join(dir, "exit-code"),
	}
	for k, v := range vars {
		env = append(env, "CUSTOM_ENV_"+k+"="+v)
	}
	job, err := ParseJob(env)
	if err != nil {
		t.Fatal(err)
	}
	// What the runner's job response says (JOB_RESPONSE_FILE).
	job.Response.ID, job.Response.JobInfo.ProjectID = 100, 7
	cfg.RunnerName = "tok"
	fake := container.NewFake(testImage)
	out := &bytes.Buffer{}
	e := &Executor{Engine: fake, Config: cfg, Job: job, Stdout: out, Stderr: out,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &fixture{e: e, fake: fake, out: out, codes: job.Codes, helper: helper}
}

const jobName = "podman-executor-rtok-p7-c0-j100"

func TestConfigStagePrintsOnlyJSON(t *testing.T) {
	f := newFixture(t, nil, nil)
	var stdout bytes.Buffer
	if err := f.e.ConfigStage(&stdout); err != nil {
		t.Fatal(err)
	}
	var got ConfigOutput
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, stdout.String())
	}
	if got.BuildsDir != "/builds" || got.CacheDir != "/cache" || got.BuildsDirIsShared || got.Driver.Name != Name || got.Hostname != jobName {
		t.Errorf("config output %+v", got)
	}
	if len(f.fake.Calls) != 0 {
		t.Errorf("config stage called podman: %v", f.fake.Calls)
	}
}

func TestPrepare(t *testing.T) {
	tests := []struct {
		name     string
		vars     map[string]string
		cfg      func(*Config)
		setup    func(*container.Fake)
		wantCode int // exit code through ExitCode
		wantOut  string
		check    func(t *testing.T, f *fixture)
	}{
		{name: "job container with cache and helper", wantCode: 0, check: func(t *testing.T, f *fixture) {
			s, ok := f.fake.Spec(jobName)
			if !ok {
				t.Fatal("no job container")
			}
			if s.Image != testImage || s.Labels[LabelManaged] != "true" || s.Labels[LabelJob] != "100" || s.Labels[LabelRole] != "job" {
				t.Errorf("spec %+v", s)
			}
			var cache, helper bool
			for _, m := range s.Mounts {
				cache = cache || (m.Destination == "/cache" && strings.HasSuffix(m.Source, "runner-tok/project-7/data"))
				helper = helper || (m.Destination == HelperPath && m.Source == f.helper && m.ReadOnly)
			}
			if !cache || !helper {
				t.Errorf("mounts %+v", s.Mounts)
			}
		}},
		{name: "job image from CI_JOB_IMAGE is pulled", vars: map[string]string{"CI_JOB_IMAGE": "docker.io/library/debian:12"},
			wantOut: "Pulling image docker.io/library/debian:12", check: func(t *testing.T, f *fixture) {
				if !slices.Contains(f.fake.Calls, "pull docker.io/library/debian:12") {
					t.Errorf("calls %v", f.fake.Calls)
				}
			}},
		{name: "image not allowed fails the job", vars: map[string]string{"CI_JOB_IMAGE": "evil/miner"},
			cfg: func(c *Config) { c.AllowedImages = []string{"localhost/*"} }, wantCode: 1, wantOut: `image "evil/miner" is not allowed`},
		{name: "missing image is a system failure", vars: map[string]string{"CI_JOB_IMAGE": "example.com/missing:1"}, wantCode: 2, wantOut: "pull example.com/missing:1"},
		{name: "pull policy never without the image", vars: map[string]string{"CI_JOB_IMAGE": "alpine:3"},
			cfg: func(c *Config) { c.PullPolicy = "never" }, wantCode: 2, wantOut: "pull_policy is never"},
		{name: "pull policy always pulls a present image", cfg: func(c *Config) { c.PullPolicy = "always" }, check: func(t *testing.T, f *fixture) {
			if !slices.Contains(f.fake.Calls, "pull "+testImage) {
				t.Errorf("calls %v", f.fake.Calls)
			}
		}},
		{name: "insecure registry is pulled without TLS verification, others with",
			vars: map[string]string{"CI_JOB_IMAGE": "Registry.Internal:5000/g/app:1",
				"CI_JOB_SERVICES": `[{"name":"docker.io/library/redis:7"}]`},
			cfg:     func(c *Config) { c.InsecureRegistries = []string{"registry.internal:5000", "other.internal"} },
			wantOut: "Pulling image Registry.Internal:5000/g/app:1 (insecure registry: no TLS verification)",
			check: func(t *testing.T, f *fixture) {
				if o := f.fake.Pulls["Registry.Internal:5000/g/app:1"]; !o.SkipTLSVerify || o.Policy != "missing" {
					t.Errorf("job image pulled with %+v", o)
				}
				if o := f.fake.Pulls["docker.io/library/redis:7"]; o.SkipTLSVerify {
					t.Errorf("service from docker.io pulled with %+v", o)
				}
			}},
		{name: "plain-HTTP registry error points at insecure_registries", vars: map[string]string{"CI_JOB_IMAGE": "registry.internal:5000/g/app:1"},
			setup: func(fk *container.Fake) {
				fk.Fail = map[string]error{"Pull": errors.New(`pinging container registry registry.internal:5000: Get "https://registry.internal:5000/v2/": http: server gave HTTP response to HTTPS client`)}
			},
			wantCode: 2, wantOut: "must be listed in the driver config's insecure_registries"},
		{name: "stale container of an earlier attempt is removed", setup: func(fk *container.Fake) {
			_, _ = fk.Create(context.Background(), container.Spec{Name: jobName, Image: testImage, Labels: map[string]string{LabelManaged: "true", LabelGroup: jobName}})
		}, wantOut: "left by an earlier attempt"},
		{name: "same-named foreign container is not touched", setup: func(fk *container.Fake) { fk.AddForeign(jobName, "x") },
			wantCode: 2, wantOut: "not created by podman-executor", check: func(t *testing.T, f *fixture) {
				if slices.Contains(f.fake.Calls, "remove "+jobName) {
					t.Error("removed a foreign container")
				}
			}},
		{name: "container that exits at once", setup: func(fk *container.Fake) { fk.StartExits = map[string]bool{jobName: true} },
			wantCode: 2, wantOut: "stopped right after start"},
		{name: "container that exits at once, with the stage channel", setup: func(fk *container.Fake) {
			fk.StartExits = map[string]bool{jobName: true}
			fk.IsLocal = true
		}, wantCode: 2, wantOut: "stopped right after start"},
		{name: "podman failure is a system failure", setup: func(fk *container.Fake) { fk.Fail = map[string]error{"Create": errors.New("boom")} },
			wantCode: 2, wantOut: "boom"},
		{name: "services on a job network under their aliases",
			vars: map[string]string{"CI_JOB_SERVICES": `[{"name":"` + testImage + `","alias":"web","entrypoint":["httpd"],"command":["-f"]}]`},
			check: func(t *testing.T, f *fixture) {
				net := jobName + "-net"
				svc, ok := f.fake.Spec(jobName + "-svc0")
				if !ok {
					t.Fatal("no service container")
				}
				want := []string{"web", "localhost__busybox-test", "localhost-busybox-test"}
				if !slices.Equal(svc.Networks[net], want) || !slices.Equal(svc.Entrypoint, []string{"httpd"}) || svc.Labels[LabelRole] != "service" {
					t.Errorf("service spec %+v", svc)
				}
				job, _ := f.fake.Spec(jobName)
				if _, ok := job.Networks[net]; !ok || !slices.Contains(job.HostAdd, "web:10.0.0.1") {
					t.Errorf("job networks %v hosts %v", job.Networks, job.HostAdd)
				}
			}},
		{name: "malformed services fail the job", vars: map[string]string{"CI_JOB_SERVICES": `{nope`}, wantCode: 1, wantOut: "CI_JOB_SERVICES"},
		{name: "service not allowed", vars: map[string]string{"CI_JOB_SERVICES": `[{"name":"evil"}]`},
			cfg: func(c *Config) { c.AllowedServices = []string{"redis:*"} }, wantCode: 1, wantOut: `service "evil" is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.vars, tt.cfg)
			if tt.setup != nil {
				tt.setup(f.fake)
			}
			err := f.e.PrepareStage(context.Background())
			if code := ExitCode(err, f.codes, f.out); code != tt.wantCode {
				t.Fatalf("exit %d, want %d (err %v)\n%s", code, tt.wantCode, err, f.out)
			}
			if !strings.Contains(f.out.String(), tt.wantOut) {
				t.Errorf("job log lacks %q:\n%s", tt.wantOut, f.out)
			}
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		exec     func(ctx context.Context, name string, e container.Exec) (int, error)
		wantCode int
		wantFile string
	}{
		{name: "script succeeds", exec: func(_ context.Context, _ string, e container.Exec) (int, error) {
			b, _ := io.ReadAll(e.Stdin)
			_, _ = e.Stdout.Write(b)
			return 0, nil
		}},
		{name: "script exits 3", exec: func(context.Context, string, container.Exec) (int, error) { return 3, nil }, wantCode: 1, wantFile: "3"},
		{name: "podman fails", exec: func(context.Context, string, container.Exec) (int, error) { return 0, errors.New("conmon died") }, wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, nil)
			if err := f.e.PrepareStage(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.fake.ExecFunc = tt.exec
			script := filepath.Join(t.TempDir(), "script")
			if err := os.WriteFile(script, []byte("echo hi\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := f.e.RunStage(context.Background(), script, "build_script")
			if code := ExitCode(err, f.codes, f.out); code != tt.wantCode {
				t.Fatalf("exit %d, want %d (%v)", code, tt.wantCode, err)
			}
			b, _ := os.ReadFile(f.codes.File)
			if string(b) != tt.wantFile {
				t.Errorf("exit code file %q, want %q", b, tt.wantFile)
			}
		})
	}
}

func TestRunShellPicksBashElseSh(t *testing.T) {
	cmd := shellCommand("/tmp/p")
	if cmd[0] != "sh" || !strings.Contains(cmd[2], "exec bash") || !strings.HasSuffix(cmd[2], "exec sh") {
		t.Errorf("shell command %q", cmd)
	}
}

// TestRunCanceledStopsTheScript: on the runner's SIGTERM (ctx canceled)
// the stage's processes get SIGTERM inside the container, and the stage
// ends with ErrCanceled (a system failure, not the script's exit code).
func TestRunCanceledStopsTheScript(t *testing.T) {
	f := newFixture(t, nil, func(c *Config) { c.StopGrace.Duration = time.Minute })
	if err := f.e.PrepareStage(context.Background()); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	stopped := make(chan struct{})
	var signals []string
	f.fake.ExecFunc = func(ctx context.Context, _ string, e container.Exec) (int, error) {
		if e.Stdin == nil { // the stop command
			signals = append(signals, e.Cmd[2])
			close(stopped)
			return 0, nil
		}
		close(started)
		select {
		case <-stopped:
			return 143, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	script := filepath.Join(t.TempDir(), "script")
	_ = os.WriteFile(script, []byte("sleep 100\n"), 0o644)
	go func() { <-started; cancel() }()
	err := f.e.RunStage(ctx, script, "build_script")
	if !errors.Is(err, ErrCanceled) {
		t.Fatalf("err = %v, want ErrCanceled", err)
	}
	var be *BuildError
	if errors.As(err, &be) {
		t.Errorf("a canceled stage reads as the script's failure: %v", err)
	}
	if len(signals) != 1 || !strings.Contains(signals[0], "kill -TERM") {
		t.Errorf("signals %q", signals)
	}
}

func TestCleanup(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(f *fixture)
	}{
		{name: "after a full prepare with services", prepare: func(f *fixture) {
			f.e.Job.Vars["CI_JOB_SERVICES"] = `[{"name":"` + testImage + `"}]`
			if err := f.e.PrepareStage(context.Background()); err != nil {
				panic(err)
			}
		}},
		{name: "after a prepare that failed half way", prepare: func(f *fixture) {
			f.e.Job.Vars["CI_JOB_SERVICES"] = `[{"name":"` + testImage + `"}]`
			f.fake.StartExits = map[string]bool{jobName: true}
			_ = f.e.PrepareStage(context.Background())
		}},
		{name: "with nothing prepared", prepare: func(*fixture) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, nil)
			f.fake.AddForeign("someone-elses", testImage)
			tt.prepare(f)
			for i := 0; i < 2; i++ { // idempotent
				if err := f.e.CleanupStage(context.Background()); err != nil {
					t.Fatalf("cleanup %d: %v", i, err)
				}
			}
			if got := f.fake.Names(); !slices.Equal(got, []string{"someone-elses"}) {
				t.Errorf("containers left: %v", got)
			}
			if got := f.fake.NetworkNames(); len(got) != 0 {
				t.Errorf("networks left: %v", got)
			}
		})
	}
}

func TestGC(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	type job struct {
		id      string
		age     time.Duration
		busy    bool
		stopped bool
	}
	tests := []struct {
		name    string
		jobs    []job
		dryRun  bool
		wantOut []string
		left    []string
	}{
		{name: "old idle job removed, young and busy kept",
			jobs:    []job{{id: "1", age: 5 * time.Hour}, {id: "2", age: time.Hour}, {id: "3", age: 5 * time.Hour, busy: true}},
			wantOut: []string{"removed job podman-executor-rtok-p7-c0-j1 "},
			left:    []string{"foreign", "podman-executor-rtok-p7-c0-j2", "podman-executor-rtok-p7-c0-j3"}},
		{name: "stopped old job removed", jobs: []job{{id: "4", age: 4 * time.Hour, stopped: true}},
			wantOut: []string{"removed job podman-executor-rtok-p7-c0-j4"}, left: []string{"foreign"}},
		{name: "dry run removes nothing", jobs: []job{{id: "5", age: 5 * time.Hour}}, dryRun: true,
			wantOut: []string{"would remove job podman-executor-rtok-p7-c0-j5"}, left: []string{"foreign", "podman-executor-rtok-p7-c0-j5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, nil)
			f.fake.AddForeign("foreign", testImage)
			for _, j := range tt.jobs {
				f.e.Now = func() time.Time { return now.Add(-j.age) }
				f.e.Job.Response.ID, _ = strconv.ParseInt(j.id, 10, 64)
				if err := f.e.PrepareStage(context.Background()); err != nil {
					t.Fatal(err)
				}
				name := f.e.Job.Identity("tok").JobName()
				f.fake.SetExecRunning(name, j.busy)
				if j.stopped {
					_ = f.fake.Kill(context.Background(), name, "KILL")
				}
			}
			f.e.Now = func() time.Time { return now }
			var out bytes.Buffer
			if err := f.e.GCStage(context.Background(), GCOptions{MaxAge: 3 * time.Hour, DryRun: tt.dryRun}, &out); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("gc output lacks %q:\n%s", w, out.String())
				}
			}
			if got := f.fake.Names(); !slices.Equal(got, tt.left) {
				t.Errorf("left %v, want %v", got, tt.left)
			}
		})
	}
}

func TestGCCaches(t *testing.T) {
	f := newFixture(t, nil, nil)
	now := time.Now()
	for i, age := range []time.Duration{time.Hour, 30 * 24 * time.Hour} {
		f.e.Now = func() time.Time { return now.Add(-age) }
		f.e.Job.Response.JobInfo.ProjectID = int64(i + 1)
		if err := f.e.PrepareStage(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	f.e.Now = func() time.Time { return now }
	var out bytes.Buffer
	if err := f.e.GCStage(context.Background(), GCOptions{MaxAge: 100 * time.Hour, CacheMaxAge: 14 * 24 * time.Hour, DryRun: true}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "would remove cache") || !strings.Contains(out.String(), "project-2") || strings.Contains(out.String(), "project-1") {
		t.Errorf("dry run output:\n%s", out.String())
	}
	out.Reset()
	if err := f.e.GCStage(context.Background(), GCOptions{MaxAge: 100 * time.Hour, CacheMaxAge: 14 * 24 * time.Hour}, &out); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(f.e.Config.CacheHostDir, "runner-tok")
	if _, err := os.Stat(filepath.Join(root, "project-2")); !os.IsNotExist(err) {
		t.Errorf("old cache kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "project-1", "data")); err != nil {
		t.Errorf("recent cache removed: %v", err)
	}
}

// TestCleanupRetriesABusyRemoval: podman sometimes answers a removal with
// "unlinkat .../userdata/shm: device or resource busy" when the container
// ran beside others; a moment later the same removal works. Cleanup
// retries it instead of failing the job's cleanup.
func TestCleanupRetriesABusyRemoval(t *testing.T) {
	for _, busy := range []int{1, 2} {
		t.Run(strconv.Itoa(busy), func(t *testing.T) {
			f := newFixture(t, nil, nil)
			if err := f.e.PrepareStage(context.Background()); err != nil {
				t.Fatal(err)
			}
			shm := fmt.Errorf("remove container %s: unlinkat /var/lib/containers/storage/overlay-containers/0123/userdata/shm: device or resource busy: %w", jobName, container.ErrBusy)
			f.fake.FailNext = map[string][]error{"Remove": slices.Repeat([]error{shm}, busy)}
			var waits []time.Duration
			f.e.Sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
			f.fake.Calls = nil
			if err := f.e.CleanupStage(context.Background()); err != nil {
				t.Fatalf("cleanup: %v", err)
			}
			if got := f.fake.Names(); len(got) != 0 {
				t.Errorf("containers left: %v", got)
			}
			if n := strings.Count(strings.Join(f.fake.Calls, "\n"), "remove "); n != busy+1 {
				t.Errorf("%d removals, want %d: %v", n, busy+1, f.fake.Calls)
			}
			if len(waits) != busy {
				t.Errorf("waited %v between tries, want %d waits", waits, busy)
			}
		})
	}
	t.Run("other errors are not retried", func(t *testing.T) {
		f := newFixture(t, nil, nil)
		if err := f.e.PrepareStage(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.fake.FailNext = map[string][]error{"Remove": {errors.New("remove container: permission denied")}}
		f.e.Sleep = func(context.Context, time.Duration) error { t.Error("waited for a permanent error"); return nil }
		if err := f.e.CleanupStage(context.Background()); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("cleanup: %v, want the removal's error", err)
		}
	})
}

// TestStagesRefuseAJobRedefiningItsIdentity: a job whose variables
// redefine CI_PROJECT_ID (to reach another project's cache and volumes)
// is refused by config and prepare before anything is created or
// removed, as a build failure naming the variable; cleanup then has
// nothing to do and says so.
func TestStagesRefuseAJobRedefiningItsIdentity(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.e.Job.Response.Variables = []ResponseVar{{Key: "CI_PROJECT_ID", Value: "7"}, {Key: "CI_PROJECT_ID", Value: "101"}}
	f.fake.AddForeign("podman-executor-rtok-p101-c0-j100", testImage)
	var stdout bytes.Buffer
	err := f.e.ConfigStage(&stdout)
	if code := ExitCode(err, f.codes, f.out); code != f.codes.BuildFailure || stdout.Len() > 0 {
		t.Errorf("config: exit %d, stdout %q, want the build failure code and no config", code, stdout.String())
	}
	err = f.e.PrepareStage(context.Background())
	if code := ExitCode(err, f.codes, f.out); code != f.codes.BuildFailure || !strings.Contains(f.out.String(), "redefine CI_PROJECT_ID") {
		t.Errorf("prepare: exit %d:\n%s", code, f.out)
	}
	if err := f.e.CleanupStage(context.Background()); err != nil || !strings.Contains(f.out.String(), "Nothing to clean up") {
		t.Errorf("cleanup: %v\n%s", err, f.out)
	}
	if len(f.fake.Calls) != 0 {
		t.Errorf("podman was called: %v", f.fake.Calls)
	}
	if entries, _ := os.ReadDir(f.e.Config.CacheHostDir); len(entries) > 0 {
		t.Errorf("cache directories made: %v", entries)
	}
}
