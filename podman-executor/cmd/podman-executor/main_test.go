package main

import (
	"bytes"
	"os"
	"path/filepath"
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
	env := []string{"PODMAN_EXECUTOR_CONFIG=" + cfg, "SYSTEM_FAILURE_EXIT_CODE=2", "CUSTOM_ENV_CI_JOB_IMAGE=busybox"}
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
