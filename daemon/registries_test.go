package daemon

import (
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/scheduler"
)

// Which registries depsd reads: the instance's (the projects' registry
// prefixes as the last graph had them, and registry), and what the
// operator listed; GitLab's host and the instance's registry may be on
// internal addresses, listed external registries may not unless they are
// insecure ones.
func TestRegistryPolicy(t *testing.T) {
	cfg := config.Defaults()
	cfg.GitLab.URL = "https://gitlab.example.com"
	cfg.Registry = "mirror.example.com:5000"
	cfg.Images.ExternalRegistries = []string{"docker.io", "GHCR.io"}
	cfg.Images.InsecureRegistries = []string{"127.0.0.1:5000"}
	cfg.Scheduler.Watch = []scheduler.WatchSpec{{Image: "quay.io/vendor/runtime:2"}}
	p := newRegistryPolicy(cfg)
	p.registriesChanged([]string{"registry.example.com", "Registry.Example.org:443"})
	for host, want := range map[string]struct{ allowed, internal bool }{
		"registry.example.com":     {true, true},
		"registry.example.org:443": {true, true},
		"mirror.example.com:5000":  {true, true},
		"index.docker.io":          {true, false},
		"ghcr.io":                  {true, false},
		"quay.io":                  {true, false},
		"127.0.0.1:5000":           {true, false}, // internal as an insecure registry (registry.Options.Insecure)
		"gitlab.example.com":       {false, true},
		"127.0.0.1:5001":           {false, false},
		"169.254.169.254":          {false, false},
		"evil.example.net":         {false, false},
	} {
		err := p.allowed(host)
		if (err == nil) != want.allowed || p.internal(host) != want.internal {
			t.Errorf("%s: allowed %v (%v), internal %v; want %v, %v", host, err == nil, err, p.internal(host), want.allowed, want.internal)
		}
		if err != nil && !strings.Contains(err.Error(), "images.external_registries") {
			t.Errorf("%s refused with %q: want what to list it in", host, err)
		}
	}
	// A later scan without a project on registry.example.org: no longer
	// the instance's.
	p.registriesChanged([]string{"registry.example.com"})
	if p.allowed("registry.example.org:443") == nil {
		t.Error("a registry no stored project uses is still read")
	}
}
