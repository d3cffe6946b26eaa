package config

import (
	"os"
	"regexp"
	"strings"
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

// TestExampleDocumentsEveryKey: depsd.example.yaml shows every key of the
// configuration (set, or commented out with its default), so a new setting
// cannot ship undocumented.
func TestExampleDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../depsd.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	keys := Keys()
	if len(keys) < 20 {
		t.Fatalf("Keys() = %v: too few, the walk is broken", keys)
	}
	for _, key := range keys {
		name := key[strings.LastIndex(key, ".")+1:]
		name = strings.TrimSuffix(name, "[]")
		re := regexp.MustCompile(`(?m)^[\t #-]*` + regexp.QuoteMeta(name) + `:`)
		if !re.Match(b) {
			t.Errorf("depsd.example.yaml does not document %s", key)
		}
	}
}
