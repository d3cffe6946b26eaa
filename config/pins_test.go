package config

import (
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// The pins section (digest pins moved by merge requests), read and checked
// in the user's terms, and derived into the engine's rules.
func TestPins(t *testing.T) {
	cfg, err := Load(Source{ReadFile: fakeFS{}.read})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pins.Mode != string(chain.PinMergeRequest) || cfg.Pins.Timeout != 7*24*time.Hour {
		t.Errorf("defaults: %+v, want merge-request and 168h", cfg.Pins)
	}
	for _, tc := range []struct {
		name, file string
		problems   []string
	}{
		{"valid", `pins:
  mode: auto-merge
  timeout: 48h
  projects:
    - match: legacy/*
      mode: ignore
    - match: apps/shop
      mode: merge-request
`, nil},
		{"every mistake at once", `pins:
  mode: rebuild
  timeout: 0s
  projects:
    - match: "tools/["
      mode: ignore
    - match: apps/*
      mode: never
`, []string{
			`pins.mode "rebuild": want merge-request, auto-merge or ignore`,
			`pins.timeout 0s`,
			`pins.projects[0].match "tools/["`,
			`pins.projects[1].mode "never": want merge-request, auto-merge or ignore`,
		}},
		{"unknown key", "pins:\n  timout: 1h\n", []string{"pins.timout"}},
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
				r := cfg.PinRules()
				for project, want := range map[string]chain.PinMode{"legacy/x": chain.PinIgnore, "apps/shop": chain.PinMergeRequest, "apps/cli@stable": chain.PinAutoMerge} {
					if got := r.For(project); got != want {
						t.Errorf("%s: %s, want %s", project, got, want)
					}
				}
				if cfg.Pins.Timeout != 48*time.Hour {
					t.Errorf("timeout %s", cfg.Pins.Timeout)
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
