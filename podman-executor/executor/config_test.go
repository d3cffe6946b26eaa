package executor

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestPodmanURL(t *testing.T) {
	tests := []struct {
		name string
		host Host
		want string
	}{
		{"CONTAINER_HOST wins", Host{Env: map[string]string{"CONTAINER_HOST": "tcp://h:1"}, UID: 0}, "tcp://h:1"},
		{"root uses the rootful socket", Host{UID: 0}, "unix:///run/podman/podman.sock"},
		{"user with access to the rootful socket", Host{UID: 1000, Usable: func(string) bool { return true }}, "unix:///run/podman/podman.sock"},
		{"rootless from XDG_RUNTIME_DIR", Host{UID: 1000, Env: map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}}, "unix:///run/user/1000/podman/podman.sock"},
		{"rootless without XDG_RUNTIME_DIR", Host{UID: 1001}, "unix:///run/user/1001/podman/podman.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Defaults(tt.host).PodmanURL; got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaultsFindHelperAndRootlessCache(t *testing.T) {
	h := Host{UID: 1000, Env: map[string]string{"HOME": "/home/r"}, LookPath: func(f string) (string, error) {
		if f == "gitlab-runner" {
			return "/usr/bin/gitlab-runner", nil
		}
		return "", errors.New("not found")
	}}
	c := Defaults(h)
	if c.HelperBinary != "/usr/bin/gitlab-runner" {
		t.Errorf("helper = %q", c.HelperBinary)
	}
	if c.CacheHostDir != "/home/r/.cache/podman-executor" {
		t.Errorf("cache host dir = %q", c.CacheHostDir)
	}
	if c.StateDir != filepath.Join(os.TempDir(), "podman-executor-1000", "podman-executor") {
		t.Errorf("state dir without XDG_RUNTIME_DIR = %q", c.StateDir)
	}
	h.Env["XDG_RUNTIME_DIR"] = "/run/user/1000"
	if c := Defaults(h); c.StateDir != "/run/user/1000/podman-executor" {
		t.Errorf("rootless state dir = %q", c.StateDir)
	}
	if c := Defaults(Host{UID: 0}); c.StateDir != "/run/podman-executor" || c.WaitForServicesTimeout != 30 {
		t.Errorf("rootful state dir %q, wait_for_services_timeout %d", c.StateDir, c.WaitForServicesTimeout)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{name: "empty keeps defaults", check: func(t *testing.T, c Config) {
			if c.PullPolicy != "if-not-present" || c.BuildsDir != "/builds" || c.StopGrace.Duration != 10*time.Second {
				t.Errorf("defaults lost: %+v", c)
			}
		}},
		{name: "all keys", text: `
podman_url = "unix:///x.sock"
default_image = "busybox"
allowed_images = ["docker.io/library/*", "registry.example.com/**"]
allowed_services = ["redis:*"]
pull_policy = "never"
builds_dir = "/b"
cache_dir = "/c"
cache_host_dir = "/var/c"
helper_binary = "none"
volumes = ["/srv:/srv:ro", "/data:/data:Z,U", "/src:/src:O", "named-vol:/v:z"]
network = "ci"
memory = "512m"
cpus = 1.5
pids_limit = 100
privileged = true
auth_file = "/etc/auth.json"
insecure_registries = ["registry.internal:5000"]
stop_grace = "3s"
gc_max_age = "1h"
gc_cache_max_age = "48h"
`, check: func(t *testing.T, c Config) {
			if c.PodmanURL != "unix:///x.sock" || c.PullPolicy != "never" || c.CPUs != 1.5 || !c.Privileged || c.StopGrace.Duration != 3*time.Second || c.GCCacheMaxAge.Duration != 48*time.Hour {
				t.Errorf("not read: %+v", c)
			}
			if !c.insecure("registry.internal:5000") || c.insecure("registry.internal") {
				t.Errorf("insecure_registries %v", c.InsecureRegistries)
			}
			if n, _ := c.memoryBytes(); n != 512<<20 {
				t.Errorf("memory = %d", n)
			}
		}},
		{name: "typo is an error", text: `pul_policy = "always"`, wantErr: "unknown keys pul_policy"},
		{name: "bad pull policy", text: `pull_policy = "sometimes"`, wantErr: "pull_policy"},
		{name: "bad memory", text: `memory = "lots"`, wantErr: "memory"},
		{name: "bad network mode", text: `network_mode = "none"`, wantErr: `network_mode "none"`},
		{name: "host network mode with a network", text: "network_mode = \"host\"\nnetwork = \"ci\"", wantErr: "exclude each other"},
		{name: "bad wait_for_services_timeout", text: `wait_for_services_timeout = -2`, wantErr: "wait_for_services_timeout -2"},
		{name: "relative state_dir", text: `state_dir = "run"`, wantErr: "state_dir"},
		{name: "bad volume option", text: `volumes = ["/srv/data:/data:bogus"]`, wantErr: `volume "/srv/data:/data:bogus": invalid option type "bogus"`},
		{name: "conflicting volume options", text: `volumes = ["/srv/data:/data:ro,rw"]`, wantErr: `volume "/srv/data:/data:ro,rw"`},
		{name: "relative builds dir", text: `builds_dir = "builds"`, wantErr: "absolute"},
		{name: "bad insecure registry", text: `insecure_registries = [""]`, wantErr: "insecure_registries"},
		{name: "bad duration", text: `stop_grace = "soon"`, wantErr: "stop_grace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.text, "test.toml", Defaults(Host{}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.toml")
	if _, err := LoadConfig(missing, false, Defaults(Host{})); err != nil {
		t.Errorf("absent default file: %v", err)
	}
	if _, err := LoadConfig(missing, true, Defaults(Host{})); err == nil {
		t.Error("absent explicit file: no error")
	}
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte(`network = "ci"`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(p, true, Defaults(Host{}))
	if err != nil || c.Network != "ci" {
		t.Errorf("got %+v, %v", c.Network, err)
	}
}

// TestExampleConfigParses keeps config.example.toml in step with Config.
func TestExampleConfigParses(t *testing.T) {
	c, err := LoadConfig("../config.example.toml", true, Defaults(Host{}))
	if err != nil {
		t.Fatal(err)
	}
	if c.PullPolicy != "if-not-present" || c.GCCacheMaxAge.Duration != 14*24*time.Hour {
		t.Errorf("example config %+v", c)
	}
	if d := DefaultBuildProfile(); !reflect.DeepEqual(c.Build, d) || c.ServicesLimit != -1 {
		t.Errorf("the example's [build] %+v, services_limit %d: want the defaults %+v, -1", c.Build, c.ServicesLimit, d)
	}
	text, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, build, _ := strings.Cut(string(text), "\n[build]\n")
	for _, tt := range []struct {
		typ  reflect.Type
		text string
	}{{reflect.TypeOf(Config{}), string(text)}, {reflect.TypeOf(BuildProfile{}), build}} {
		for i := range tt.typ.NumField() {
			key := tt.typ.Field(i).Tag.Get("toml")
			if key == "" || key == "build" {
				continue
			}
			if !regexp.MustCompile(`(?m)^#? ?` + regexp.QuoteMeta(key) + ` = `).MatchString(tt.text) {
				t.Errorf("config.example.toml does not show %s (%s)", key, tt.typ.Name())
			}
		}
	}
}
