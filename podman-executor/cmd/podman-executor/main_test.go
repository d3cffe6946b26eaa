package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAnswersBeforePodman: help, usage errors and unknown stages are
// answered without reading the config or reaching podman. The config
// names a podman socket that does not exist, so any attempt to connect
// shows as "connect to podman" in the output.
func TestAnswersBeforePodman(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(`podman_url = "unix://`+dir+`/no.sock"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PODMAN_EXECUTOR_CONFIG=" + cfg, "BUILD_FAILURE_EXIT_CODE=1", "SYSTEM_FAILURE_EXIT_CODE=2"}
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStdout []string
		wantStderr []string
	}{
		{"--help lists the stages", []string{"--help"}, 0,
			[]string{"config ", "print the JSON", "prepare ", "pull the job's image", "run SCRIPT STAGE", "cleanup ", "gc [flags]", "version ", "-config"}, nil},
		{"help", []string{"help"}, 0, []string{"run SCRIPT STAGE"}, nil},
		{"gc --help", []string{"gc", "--help"}, 0, []string{"-max-age", "-cache-max-age", "-dry-run"}, nil},
		{"gc --help with a missing --config", []string{"--config", filepath.Join(dir, "missing.toml"), "gc", "-h"}, 0, []string{"-dry-run"}, nil},
		{"unknown stage", []string{"deploy"}, 2, nil, []string{`unknown stage "deploy"`, "run SCRIPT STAGE"}},
		{"run without arguments", []string{"run"}, 2, nil, []string{"usage: podman-executor [--config FILE] run SCRIPT STAGE"}},
		{"run with one argument", []string{"run", "/tmp/script"}, 2, nil, []string{"run SCRIPT STAGE"}},
		{"no stage", nil, 2, nil, []string{"usage: podman-executor"}},
		{"cleanup with an argument", []string{"cleanup", "x"}, 2, nil, []string{"cleanup takes no arguments"}},
		{"bad gc flag", []string{"gc", "--max-age", "soon"}, 2, nil, []string{"invalid value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, env, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, &stdout, &stderr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
			if all := stdout.String() + stderr.String(); strings.Contains(all, "connect to podman") {
				t.Errorf("tried to reach podman:\n%s", all)
			}
		})
	}
}

// TestStagesNeedingPodmanSayWhereTheyLooked: the check above would pass
// vacuously if nothing ever printed "connect to podman".
func TestStagesNeedingPodmanSayWhereTheyLooked(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(`podman_url = "unix://`+dir+`/no.sock"`+"\n"+`cache_host_dir = "`+dir+`/cache"`+"\nstate_dir = \""+dir+"/state\"\nhelper_binary = \"none\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PODMAN_EXECUTOR_CONFIG=" + cfg, "SYSTEM_FAILURE_EXIT_CODE=2", "CUSTOM_ENV_CI_JOB_IMAGE=busybox", jobResponse(t, dir)}
	for _, args := range [][]string{{"cleanup"}, {"gc", "--dry-run"}, {"prepare"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, env, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if !strings.Contains(stderr.String(), "connect to podman at unix://"+dir+"/no.sock") {
			t.Errorf("%v: stderr:\n%s", args, &stderr)
		}
	}
}

// TestRunnerConfigStage: runner-config names this very binary by its
// absolute path and passes --config on as an absolute path; a broken
// driver config is reported instead of a section that fails every job.
func TestRunnerConfigStage(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(good, []byte("builds_dir = \"/srv/b\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("pull_policy = \"sometimes\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tests := []struct {
		name       string
		args       []string
		env        []string
		code       int
		wantStdout []string
		wantStderr string
	}{
		{"default config", []string{"runner-config"}, nil, 0,
			[]string{`config_exec = "` + self + `"`, `run_args = ["run"]`, `builds_dir = "/builds"`, "graceful_kill_timeout = 30\n"}, ""},
		{"relative --config made absolute", []string{"--config", "good.toml", "runner-config"}, nil, 0,
			[]string{`prepare_args = ["--config", "` + good + `", "prepare"]`, `builds_dir = "/srv/b"`}, ""},
		{"PODMAN_EXECUTOR_CONFIG passed on", []string{"runner-config"}, []string{"PODMAN_EXECUTOR_CONFIG=" + good}, 0,
			[]string{`cleanup_args = ["--config", "` + good + `", "cleanup"]`}, ""},
		{"broken driver config", []string{"--config", bad, "runner-config"}, nil, 1, nil, `pull_policy "sometimes"`},
		{"extra argument", []string{"runner-config", "x"}, nil, 2, nil, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, tt.env, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, &stdout, &stderr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, &stderr)
			}
			if tt.code != 0 && stdout.Len() > 0 {
				t.Errorf("a failed runner-config printed a section:\n%s", &stdout)
			}
		})
	}
}

// TestTraceFile: with PODMAN_EXECUTOR_TRACE, each stage appends its steps
// to that file (a failed dial included, marked), and the config stage's
// stdout stays JSON only.
func TestTraceFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(`podman_url = "unix://`+dir+`/no.sock"`+"\n"+`cache_host_dir = "`+dir+`/cache"`+"\nstate_dir = \""+dir+"/state\"\nhelper_binary = \"none\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "trace")
	env := []string{"PODMAN_EXECUTOR_CONFIG=" + cfg, "SYSTEM_FAILURE_EXIT_CODE=2", "PODMAN_EXECUTOR_TRACE=" + trace,
		"CUSTOM_ENV_CI_JOB_ID=5", "CUSTOM_ENV_CI_PROJECT_ID=6", jobResponse(t, dir)}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"config"}, env, &stdout, &stderr); code != 0 {
		t.Fatalf("config: exit %d\n%s", code, &stderr)
	}
	if !json.Valid(stdout.Bytes()) {
		t.Errorf("config stdout is not JSON: %q", stdout.String())
	}
	if code := run([]string{"cleanup"}, env, &stdout, &stderr); code != 2 {
		t.Fatalf("cleanup without podman: exit %d", code)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			t.Fatalf("trace line %q: want STAGE CALL ARG MS", l)
		}
		got = append(got, strings.Join(append(f[:2], f[4:]...), " "))
	}
	want := []string{"config Stage", "cleanup Dial error", "cleanup Stage"}
	if !slices.Equal(got, want) {
		t.Errorf("trace %q, want %q", got, want)
	}
}

// jobResponse writes, in dir, the job response the runner passes (job 5
// of project 6) and returns the JOB_RESPONSE_FILE entry naming it.
func jobResponse(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "response.json")
	if err := os.WriteFile(path, []byte(`{"id":5,"job_info":{"project_id":6}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return "JOB_RESPONSE_FILE=" + path
}

// TestStagesRefuseAJobWithoutItsResponse: the job's identity (which names
// its containers, cache and volumes) comes from the runner's job response,
// never from variables: without a usable response, the stages that need
// it fail rather than fall back to CUSTOM_ENV_CI_PROJECT_ID and
// CUSTOM_ENV_CI_JOB_ID.
func TestStagesRefuseAJobWithoutItsResponse(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(`podman_url = "unix://`+dir+`/no.sock"`+"\n"+`cache_host_dir = "`+dir+`/cache"`+"\nstate_dir = \""+dir+"/state\"\nhelper_binary = \"none\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, response := range []string{"", "JOB_RESPONSE_FILE=" + bad} {
		env := []string{"PODMAN_EXECUTOR_CONFIG=" + cfg, "SYSTEM_FAILURE_EXIT_CODE=2", "CUSTOM_ENV_CI_JOB_ID=5", "CUSTOM_ENV_CI_PROJECT_ID=6", response}
		for _, args := range [][]string{{"config"}, {"prepare"}, {"run", "/dev/null", "build_script"}, {"cleanup"}} {
			var stdout, stderr bytes.Buffer
			if code := run(args, env, &stdout, &stderr); code != 2 || stdout.Len() > 0 && args[0] == "config" {
				t.Errorf("%v with %q: exit %d, stdout %q, want exit 2 and no config", args, response, code, &stdout)
			}
			if !strings.Contains(stderr.String()+stdout.String(), "job response") {
				t.Errorf("%v with %q does not say the job response is missing:\n%s%s", args, response, &stdout, &stderr)
			}
		}
	}
}
