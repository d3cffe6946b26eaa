package executor

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// runnerSection is the part of GitLab Runner's config.toml RunnerConfig
// writes, with the types the runner (17.9) decodes it into: a string where
// it wants an integer stops the runner at start.
type runnerSection struct {
	Runners []struct {
		Name      string `toml:"name"`
		URL       string `toml:"url"`
		Token     string `toml:"token"`
		Executor  string `toml:"executor"`
		BuildsDir string `toml:"builds_dir"`
		CacheDir  string `toml:"cache_dir"`
		Custom    struct {
			ConfigExec          string   `toml:"config_exec"`
			ConfigArgs          []string `toml:"config_args"`
			PrepareExec         string   `toml:"prepare_exec"`
			PrepareArgs         []string `toml:"prepare_args"`
			RunExec             string   `toml:"run_exec"`
			RunArgs             []string `toml:"run_args"`
			CleanupExec         string   `toml:"cleanup_exec"`
			CleanupArgs         []string `toml:"cleanup_args"`
			GracefulKillTimeout *int     `toml:"graceful_kill_timeout"`
			ForceKillTimeout    *int     `toml:"force_kill_timeout"`
		} `toml:"custom"`
	} `toml:"runners"`
}

func TestRunnerConfig(t *testing.T) {
	defaults := Defaults(Host{UID: 0})
	custom := defaults
	custom.BuildsDir, custom.CacheDir = "/srv/builds", "/srv/cache"
	custom.StopGrace = duration{14500 * time.Millisecond}
	tests := []struct {
		name       string
		binary     string
		configPath string
		config     Config
		wantArgs   []string // before the stage's name
		builds     string
		graceful   int
	}{
		{"defaults", "/usr/local/bin/podman-executor", "", defaults, nil, "/builds", 30},
		{"a driver config passed on", "/opt/pe/podman-executor", "/etc/pe/ci.toml", custom, []string{"--config", "/etc/pe/ci.toml"}, "/srv/builds", 35},
		{"a path TOML must escape", `/opt/a "b"\c/podman-executor`, "/etc/x y.toml", defaults, []string{"--config", "/etc/x y.toml"}, "/builds", 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := RunnerConfig(&b, tt.binary, tt.configPath, tt.config); err != nil {
				t.Fatal(err)
			}
			var got runnerSection
			md, err := toml.Decode(b.String(), &got)
			if err != nil {
				t.Fatalf("not TOML the runner reads: %v\n%s", err, b.String())
			}
			if und := md.Undecoded(); len(und) > 0 {
				t.Errorf("keys the runner does not know: %v", und)
			}
			if len(got.Runners) != 1 {
				t.Fatalf("%d [[runners]] sections:\n%s", len(got.Runners), b.String())
			}
			r := got.Runners[0]
			if r.Executor != "custom" || r.BuildsDir != tt.builds || r.CacheDir != tt.config.CacheDir {
				t.Errorf("executor %q builds_dir %q cache_dir %q", r.Executor, r.BuildsDir, r.CacheDir)
			}
			c := r.Custom
			for stage, exec := range map[string][2]any{
				"config": {c.ConfigExec, c.ConfigArgs}, "prepare": {c.PrepareExec, c.PrepareArgs},
				"run": {c.RunExec, c.RunArgs}, "cleanup": {c.CleanupExec, c.CleanupArgs},
			} {
				want := strings.Join(append(append([]string{}, tt.wantArgs...), stage), "\x00")
				if exec[0] != tt.binary || strings.Join(exec[1].([]string), "\x00") != want {
					t.Errorf("%s: exec %q args %q, want %q %q", stage, exec[0], exec[1], tt.binary, append(tt.wantArgs, stage))
				}
			}
			if c.GracefulKillTimeout == nil || *c.GracefulKillTimeout != tt.graceful {
				t.Errorf("graceful_kill_timeout %v, want %d", c.GracefulKillTimeout, tt.graceful)
			}
			if c.ForceKillTimeout == nil || *c.ForceKillTimeout <= 0 {
				t.Errorf("force_kill_timeout %v", c.ForceKillTimeout)
			}
		})
	}
}

// TestReadmeShowsRunnerConfig: the README's registration block is what
// `podman-executor runner-config` prints for a binary installed at
// /usr/local/bin/podman-executor with the default driver config, so the
// two cannot drift (the README once showed a graceful_kill_timeout the
// runner refuses).
func TestReadmeShowsRunnerConfig(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- runner-config: /usr/local/bin/podman-executor -->\n```toml\n"
	_, block, ok := strings.Cut(string(readme), marker)
	if !ok {
		t.Fatalf("README.md has no %q block", marker)
	}
	block, _, _ = strings.Cut(block, "```\n")
	var want strings.Builder
	if err := RunnerConfig(&want, "/usr/local/bin/podman-executor", "", Defaults(Host{UID: 0})); err != nil {
		t.Fatal(err)
	}
	if block != want.String() {
		t.Errorf("README.md's runner-config block:\n%s\nrunner-config prints:\n%s", block, want.String())
	}
}
