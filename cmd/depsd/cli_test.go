package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// cliCase is one command line and what a user sees.
type cliCase struct {
	name   string
	args   []string
	code   int
	stdout string // substring of stdout ("" matches anything)
	stderr string // substring of stderr
}

func runCases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := depsd(t, tt.args...)
			if code != tt.code {
				t.Errorf("depsd %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(tt.args, " "), code, tt.code, out, errOut)
			}
			if !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q does not contain %q", out, tt.stdout)
			}
			if !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.stderr)
			}
		})
	}
}

// TestFlagsAnywhere: flags may follow the arguments, as in every
// conventional CLI (issue 12: `rdeps X --all` printed usage, `check DIR
// --json` took --json for a directory, `graph --format dot X` ignored X).
func TestFlagsAnywhere(t *testing.T) {
	fakeInstance(t)
	dir := writeFiles(t, map[string]string{"Containerfile": "FROM registry.example.com/infra/base\n"})
	if code, out, errOut := depsd(t, "scan", "--group", "infra", "--group", "apps"); code != exitOK {
		t.Fatalf("scan: %d %s %s", code, out, errOut)
	}
	runCases(t, []cliCase{
		{name: "rdeps flag after project", args: []string{"rdeps", "infra/base", "--all"}, code: exitOK, stdout: "wave 2: apps/app\n"},
		{name: "check flag after dir", args: []string{"check", dir, "--json", "--registry", "registry.example.com"}, code: exitOK, stdout: `"project": "infra/base"`},
		{name: "graph flag value then stray arg", args: []string{"graph", "--format", "dot", "infra/base"}, code: exitUsage, stderr: "unexpected argument"},
		{name: "graph flag=value", args: []string{"graph", "--format=dot"}, code: exitOK, stdout: "digraph"},
		{name: "deps with log level after", args: []string{"deps", "apps/app", "--log-level", "warn"}, code: exitOK, stdout: "infra/ruby\n"},
		{name: "old single-dash long flag", args: []string{"rdeps", "-all", "infra/base"}, code: exitOK, stdout: "wave 1: infra/ruby\n"},
		{name: "chains too many args", args: []string{"chains", "1", "2"}, code: exitUsage, stderr: "depsd chains"},
		{name: "chains ID not a number", args: []string{"chains", "one"}, code: exitUsage, stderr: "ID must be a number"},
		// demo keeps its state in a temporary directory: a --state or
		// --config it would ignore is refused rather than silently dropped.
		{name: "demo refuses --state", args: []string{"demo", "--state", "x.db"}, code: exitUsage, stderr: "unknown flag: --state"},
		{name: "demo refuses --config", args: []string{"demo", "--config", "depsd.yaml"}, code: exitUsage, stderr: "unknown flag: --config"},
	})
}

// TestHelpAndCompletion: every command explains itself with a summary, a
// description and examples, and shells can complete depsd.
func TestHelpAndCompletion(t *testing.T) {
	for _, cmd := range [][]string{
		{"check"}, {"scan"}, {"graph"}, {"deps"}, {"rdeps"}, {"hooks"}, {"hooks", "sync"}, {"serve"},
		{"rebuild"}, {"chains"}, {"audit"}, {"schedules"}, {"freshness"}, {"status"}, {"migrate-state"}, {"demo"}, {"version"}, {"config"}, {"config", "check"}, {"status"}, {"migrate-state"},
	} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			code, out, errOut := depsd(t, append(cmd, "--help")...)
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			for _, want := range []string{"Usage:\n  depsd " + strings.Join(cmd, " "), "Examples:\n", "Flags:\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("help lacks %q:\n%s", want, out)
				}
			}
		})
	}
	runCases(t, []cliCase{
		{name: "root help", args: []string{"--help"}, code: exitOK, stdout: "rdeps"},
		{name: "help subcommand", args: []string{"help", "rdeps"}, code: exitOK, stdout: "--all"},
		{name: "no command", args: nil, code: exitUsage, stderr: "Usage:"},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"graph", "--bogus"}, code: exitUsage, stderr: "unknown flag: --bogus"},
		{name: "hooks without sync", args: []string{"hooks"}, code: exitUsage, stderr: "sync"},
		{name: "serve lease too short", args: []string{"serve", "--leader-lease", "1ns"}, code: exitUsage, stderr: "--leader-lease 1ns: want at least 1s"},
		{name: "serve zero catch-up", args: []string{"serve", "--catch-up-interval", "0"}, code: exitUsage, stderr: "--catch-up-interval 0s: want at least"},
		{name: "completion bash", args: []string{"completion", "bash"}, code: exitOK, stdout: "bash completion"},
		{name: "completion zsh", args: []string{"completion", "zsh"}, code: exitOK, stdout: "compdef"},
		{name: "completion fish", args: []string{"completion", "fish"}, code: exitOK, stdout: "complete -c depsd"},
		{name: "version flag", args: []string{"--version"}, code: exitOK, stdout: "depsd "},
	})
}

// TestManPages: the man pages come from the same texts as --help.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := depsd(t, "man", dir); code != exitOK {
		t.Fatalf("exit %d %s", code, errOut)
	}
	for _, page := range []string{"depsd.1", "depsd-rdeps.1", "depsd-hooks-sync.1", "depsd-config-check.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), ".SH SYNOPSIS") || !strings.Contains(string(b), ".SH EXAMPLE") {
			t.Errorf("%s lacks a synopsis or examples:\n%s", page, b)
		}
	}
}

// depsd sets a soft memory limit of its own unless GOMEMLIMIT is set
// (the runtime read that one, "off" included).
func TestLimitMemory(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int64
	}{
		{"GOMEMLIMIT unset: depsd's default", nil, defaultMemoryLimit},
		{"GOMEMLIMIT set: the runtime's", map[string]string{"GOMEMLIMIT": "off"}, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			limitMemory(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("memory limit %d, want %d", got, tc.want)
			}
		})
	}
}
