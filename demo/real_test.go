package demo

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// The real demo says what is missing, and how to get it, for each thing
// it needs and does not find; it finds podman-executor beside depsd and
// takes the podman service from CONTAINER_HOST.
func TestRealDemoPrerequisites(t *testing.T) {
	full := map[string]bool{"podman": true, "docker-registry": true, "gitlab-runner": true, "podman-executor": true,
		"/dev/fuse": true, "CONTAINER_HOST": true, DefaultJobImage: true, DefaultSeedImage: true}
	without := func(keys ...string) map[string]bool {
		m := map[string]bool{}
		for k, v := range full {
			m[k] = v && !slices.Contains(keys, k)
		}
		return m
	}
	for _, tc := range []struct {
		name         string
		have         map[string]bool
		beside       bool     // podman-executor beside the depsd binary
		wantMissing  []string // Missing.What prefixes
		wantHow      []string // in the Hows
		wantExecutor string
	}{
		{"everything there", full, false, nil, nil, "/usr/bin/podman-executor"},
		{"nothing but podman", map[string]bool{"podman": true}, false,
			[]string{"a podman API service", "docker-registry", "gitlab-runner", "podman-executor", "/dev/fuse"},
			[]string{"CONTAINER_HOST", "apt-get install docker-registry", "--runner PATH", "make build"}, ""},
		{"no podman", without("podman"), false, []string{"podman"}, []string{"apt-get install podman"}, "/usr/bin/podman-executor"},
		{"podman-executor beside depsd", without("podman-executor"), true, nil, nil, "/opt/depsd/bin/podman-executor"},
		{"no job image", without(DefaultJobImage), false, []string{"the job image"}, []string{".ci/buildah-image.sh"}, "/usr/bin/podman-executor"},
		{"no seed image", without(DefaultSeedImage), false, []string{"the base's external image"}, []string{"busybox-static"}, "/usr/bin/podman-executor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := realEnv{
				lookPath: func(name string) (string, error) {
					if tc.have[name] {
						return "/usr/bin/" + name, nil
					}
					return "", errors.New("not found")
				},
				getenv: func(k string) string {
					if k == "CONTAINER_HOST" && tc.have[k] {
						return "unix:///run/podman/podman.sock"
					}
					return ""
				},
				stat: func(p string) error {
					if tc.have[p] || (tc.beside && p == "/opt/depsd/bin/podman-executor") {
						return nil
					}
					return os.ErrNotExist
				},
				imageExists: func(_, image string) bool { return tc.have[image] },
				executable:  func() (string, error) { return "/opt/depsd/bin/depsd", nil },
			}
			var o RealOptions
			missing := check(&o, env)
			var whats, hows []string
			for _, m := range missing {
				whats = append(whats, m.What)
				hows = append(hows, m.How)
			}
			if len(whats) != len(tc.wantMissing) {
				t.Fatalf("missing %q, want %q", whats, tc.wantMissing)
			}
			for i, w := range tc.wantMissing {
				if !strings.HasPrefix(whats[i], w) {
					t.Errorf("missing[%d] = %q, want %q", i, whats[i], w)
				}
			}
			for _, h := range tc.wantHow {
				if !strings.Contains(strings.Join(hows, "\n"), h) {
					t.Errorf("no how-to mentions %q: %q", h, hows)
				}
			}
			if o.Executor != tc.wantExecutor {
				t.Errorf("podman-executor %q, want %q", o.Executor, tc.wantExecutor)
			}
		})
	}
}
