package config

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeMinimalConfigLoads keeps the README's minimal depsd.yaml true:
// it loads, validates, and is enough for depsd serve.
func TestReadmeMinimalConfigLoads(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## A minimal `depsd.yaml`")
	if !ok {
		t.Fatal("README.md has no section \"A minimal `depsd.yaml`\"")
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatal("the README's minimal depsd.yaml is not in a ```yaml block")
	}
	files := fakeFS{"depsd.yaml": block, "/etc/depsd/gitlab-token": "glpat-x", "/etc/depsd/webhook-secret": "s"}
	cfg, err := Load(Source{File: "depsd.yaml", ReadFile: files.read, Env: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ResolveSecrets(files.read); err != nil {
		t.Fatal(err)
	}
	for _, check := range []func() error{cfg.Validate, cfg.RequireGitLab, cfg.RequireScope} {
		if err := check(); err != nil {
			t.Error(err)
		}
	}
	if cfg.Hooks.URL == "" || cfg.Hooks.Secret != "s" || cfg.GitLab.Token != "glpat-x" {
		t.Errorf("the README's minimal config lacks what serve needs: %+v", cfg)
	}
}
