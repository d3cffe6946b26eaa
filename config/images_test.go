package config

import (
	"strings"
	"testing"
	"time"
)

// The images section, read and checked in the user's terms.
func TestImages(t *testing.T) {
	cfg, err := Load(Source{ReadFile: fakeFS{}.read})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Images.Verify != VerifyEnforce || cfg.Images.Timeout != 30*time.Second {
		t.Errorf("defaults: %+v, want verify enforce, timeout 30s", cfg.Images)
	}
	for _, tc := range []struct {
		name, file string
		problems   []string // each must be named; none: valid
	}{
		{"valid", `images:
  verify: report
  timeout: 5s
  publish: ["{registry}/{path}:latest"]
  projects:
    - match: tools/*
      publish: []
  external_registries: [ghcr.io, "quay.io:443"]
  insecure_registries: ["registry.test:5000"]
`, nil},
		{"every mistake at once", `images:
  verify: strict
  timeout: 0s
  publish: ["{registry}/{path}:{branch}"]
  projects:
    - match: "tools/["
      publish: ["{registry}/{path}@sha256:` + strings.Repeat("a", 64) + `"]
  external_registries: ["https://ghcr.io"]
  insecure_registries: ["http://registry.test:5000"]
`, []string{
			`images.verify "strict": want off, report or enforce`,
			`images.timeout 0s`,
			`images.publish[0] "{registry}/{path}:{branch}": unknown placeholder {branch}`,
			`images.projects[0].match "tools/["`,
			`images.projects[0].publish[0]`,
			`images.external_registries[0] "https://ghcr.io": want a registry host`,
			`images.insecure_registries[0] "http://registry.test:5000": want a registry host`,
		}},
		{"unknown key", "images:\n  publsh: []\n", []string{"images.publsh"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": tc.file}.read})
			if err == nil {
				err = cfg.Validate()
			}
			if len(tc.problems) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				r := cfg.PublishRules()
				if got := r.For("tools/cli"); len(got) != 0 {
					t.Errorf("tools/cli publishes %q, want the override's nothing", got)
				}
				if got := r.For("apps/shop"); len(got) != 1 || got[0] != "{registry}/{path}:latest" {
					t.Errorf("apps/shop publishes %q", got)
				}
				return
			}
			for _, p := range tc.problems {
				if err == nil || !strings.Contains(err.Error(), p) {
					t.Errorf("error %v, want it to say %q", err, p)
				}
			}
		})
	}
}
