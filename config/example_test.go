package config

import (
	"os"
	"testing"
)

// TestExampleFileLoads keeps depsd.example.yaml true: it must load and
// validate as documented.
func TestExampleFileLoads(t *testing.T) {
	files := fakeFS{"/etc/depsd/gitlab-token": "glpat-x", "/etc/depsd/webhook-secret": "s"}
	read := func(name string) ([]byte, error) {
		if name == "../depsd.example.yaml" {
			return os.ReadFile(name)
		}
		return files.read(name)
	}
	cfg, err := Load(Source{File: "../depsd.example.yaml", ReadFile: read})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ResolveSecrets(read); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.RequireGitLab(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.RequireScope(); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Scope.Groups) != 2 || cfg.Hooks.URL == "" || cfg.GitLab.Token != "glpat-x" {
		t.Errorf("example config: %+v", cfg)
	}
}
