package config

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// fakeFS is a map of file name to content for Source.ReadFile.
type fakeFS map[string]string

func (f fakeFS) read(name string) ([]byte, error) {
	if s, ok := f[name]; ok {
		return []byte(s), nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const fullFile = `
gitlab:
  url: https://gitlab.example.com
  token_file: /etc/depsd/token
  concurrency: 4
  requests_per_minute: 300
  timeout: 10s
scope:
  groups: [infra, apps/shop]
  projects: [other/tool]
  exclude: ["apps/shop/legacy/**"]
containerfiles: [Containerfile.prod, Containerfile]
registry: registry.example.com
state: /var/lib/depsd/depsd.db
hooks:
  url: https://depsd.example.com/hooks/gitlab
  secret_file: /etc/depsd/hook-secret
`

func TestLoadPrecedence(t *testing.T) {
	files := fakeFS{"depsd.yaml": fullFile, "/etc/depsd/token": "glpat-file\n", "/etc/depsd/hook-secret": "s3cret"}
	cfg, err := Load(Source{Env: env(map[string]string{"GITLAB_URL": "https://env.example.com", "DEPSD_STATE": "env.db"}), ReadFile: files.read})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ResolveSecrets(files.read); err != nil {
		t.Fatal(err)
	}
	if cfg.GitLab.URL != "https://env.example.com" {
		t.Errorf("env must win over the file: url %q", cfg.GitLab.URL)
	}
	if cfg.State != "env.db" {
		t.Errorf("state %q", cfg.State)
	}
	if cfg.GitLab.Token != "glpat-file" || cfg.Hooks.Secret != "s3cret" {
		t.Errorf("secrets not read from files: %q %q", cfg.GitLab.Token, cfg.Hooks.Secret)
	}
	if cfg.GitLab.Concurrency != 4 || cfg.GitLab.Timeout != 10*time.Second || cfg.GitLab.MaxRetries != 5 {
		t.Errorf("file values and defaults mixed wrongly: %+v", cfg.GitLab)
	}
	if strings.Join(cfg.Scope.Groups, ",") != "infra,apps/shop" || cfg.Containerfiles[0] != "Containerfile.prod" {
		t.Errorf("scope/files: %+v %v", cfg.Scope, cfg.Containerfiles)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	if err := cfg.RequireGitLab(); err != nil {
		t.Error(err)
	}
	if err := cfg.RequireScope(); err != nil {
		t.Error(err)
	}
}

func TestLoadTokenFromEnvWinsOverFile(t *testing.T) {
	files := fakeFS{"depsd.yaml": fullFile, "/etc/depsd/token": "glpat-file", "/etc/depsd/hook-secret": "s"}
	cfg, err := Load(Source{Env: env(map[string]string{"GITLAB_TOKEN": "glpat-env"}), ReadFile: files.read})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ResolveSecrets(files.read); err != nil {
		t.Fatal(err)
	}
	if cfg.GitLab.Token != "glpat-env" {
		t.Errorf("token %q", cfg.GitLab.Token)
	}
}

func TestLoadWithoutFileUsesDefaults(t *testing.T) {
	cfg, err := Load(Source{ReadFile: fakeFS{}.read})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.State != "depsd.db" || cfg.GitLab.Concurrency != 8 {
		t.Errorf("defaults: %+v", cfg)
	}
	if err := cfg.RequireGitLab(); err == nil || !strings.Contains(err.Error(), "gitlab.url") {
		t.Errorf("RequireGitLab = %v, want a gitlab.url error", err)
	}
	if err := cfg.RequireScope(); err == nil || !strings.Contains(err.Error(), "scope is empty") {
		t.Errorf("RequireScope = %v, want a scope error", err)
	}
}

func TestLoadNamedFileMustExist(t *testing.T) {
	_, err := Load(Source{File: "missing.yaml", ReadFile: fakeFS{}.read})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
	_, err = Load(Source{Env: env(map[string]string{"DEPSD_CONFIG": "gone.yaml"}), ReadFile: fakeFS{}.read})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DEPSD_CONFIG: err = %v", err)
	}
}

func TestInvalidConfigNamesTheKey(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"unknown key", "gitlab:\n  urll: x\n", "depsd.yaml:2: gitlab.urll is not a known key: did you mean gitlab.url? (known: url, token_file, concurrency"},
		{"unknown top-level key", "gitlab:\n  url: https://g.example.com\nschedule: []\n", "depsd.yaml:3: schedule is not a known key: did you mean schedules?"},
		{"wrong type", "gitlab:\n  concurrency: many\n", "depsd.yaml:2: gitlab.concurrency: many is not a whole number; write e.g. 8"},
		{"duration without unit", "gitlab:\n  timeout: 5\n", "depsd.yaml:2: gitlab.timeout: 5 is not a duration; write e.g. 30s"},
		{"scheduler duration", "watch_interval: hourly\n", "depsd.yaml:1: watch_interval: hourly is not a duration"},
		{"list expected", "scope:\n  groups: infra\n", "depsd.yaml:2: scope.groups: want a list"},
		{"nested list entry", "schedules:\n  - project: a/b\n    crn: x\n", "depsd.yaml:3: schedules[0].crn is not a known key: did you mean schedules[0].cron?"},
		{"token in the file", "gitlab:\n  token: glpat-x\n", "gitlab.token is never read from the file"},
		{"not YAML", "gitlab:\n  url: [\n", "(not valid YAML)"},
		{"bad url", "gitlab:\n  url: gitlab.example.com\n", "gitlab.url"},
		{"concurrency", "gitlab:\n  concurrency: 0\n", "gitlab.concurrency"},
		{"bad duration", "gitlab:\n  timeout: soon\n", "depsd.yaml:2: gitlab.timeout: soon is not a duration"},
		{"bad glob", "scope:\n  exclude: ['[']\n", "scope.exclude[0]"},
		{"project path", "scope:\n  projects: [single]\n", "scope.projects[0]"},
		{"no files", "containerfiles: []\n", "containerfiles"},
		{"absolute file", "containerfiles: [/etc/passwd]\n", "containerfiles[0]"},
		{"hook url", "hooks:\n  url: not a url\n", "hooks.url"},
		{"mode", "mode: sometimes\n", `mode "sometimes": want full or first-level`},
		{"platform", "platform: amd64\n", "platform: platform \"amd64\": want os/arch"},
		{"token in url", "gitlab:\n  url: https://user:glpat-x@gitlab.example.com\n", "must not carry credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": tt.file}.read})
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "glpat-x") {
				t.Errorf("error leaks the credential: %v", err)
			}
		})
	}
}

func TestEmptySecretFileIsAnError(t *testing.T) {
	cfg := Defaults()
	cfg.GitLab.TokenFile = "/t"
	err := cfg.ResolveSecrets(fakeFS{"/t": "\n"}.read)
	if err == nil || !strings.Contains(err.Error(), "gitlab.token_file") {
		t.Errorf("err = %v", err)
	}
}

// TestEveryProblemAtOnce: a user fixes the file in one go, not one error
// per run (issue 12: serve reported one missing setting per run).
func TestEveryProblemAtOnce(t *testing.T) {
	_, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": "gitlab:\n  urll: x\n  timeout: 5\nmod: full\n"}.read})
	var p Problems
	if !errors.As(err, &p) || len(p) != 3 {
		t.Fatalf("err = %v, want 3 problems", err)
	}
	for _, want := range []string{"3 problems", "depsd.yaml:2: gitlab.urll", "depsd.yaml:3: gitlab.timeout", "depsd.yaml:4: mod is not a known key: did you mean mode?"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}

	cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": "gitlab:\n  concurrency: 0\n  max_retries: 99\ncontainerfiles: []\n"}.read})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); !errors.As(err, &p) || len(p) != 3 {
		t.Errorf("Validate = %v, want 3 problems", err)
	}
	cfg = Defaults()
	err = cfg.RequireServe()
	if !errors.As(err, &p) || len(p) != 4 {
		t.Fatalf("RequireServe = %v, want 4 problems", err)
	}
	for _, want := range []string{"gitlab.url is not set", "no GitLab token", "scope is empty", "no webhook secret"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
}

// TestModeOldNameStillWorks: the mode is called full everywhere (config,
// logs, API); the old config spelling chain still works, with a warning.
func TestModeOldNameStillWorks(t *testing.T) {
	cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": "mode: chain\n"}.read})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != ModeFull || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "write mode: full") {
		t.Errorf("mode %q, warnings %q", cfg.Mode, cfg.Warnings)
	}
	if Defaults().Mode != "full" {
		t.Errorf("default mode %q", Defaults().Mode)
	}
}

// TestPlatformReachesTheAnalysis: platform: in depsd.yaml becomes the
// options scans read Containerfiles with; the default is linux/amd64.
func TestPlatformReachesTheAnalysis(t *testing.T) {
	cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": "platform: linux/arm64, linux/amd64\n"}.read})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range cfg.ScanOptions(nil, nil).Analysis.Platforms {
		got = append(got, p.String())
	}
	if strings.Join(got, " ") != "linux/arm64 linux/amd64" {
		t.Errorf("platforms %q", got)
	}
	if d := Defaults().Platform; d != "linux/amd64" {
		t.Errorf("default platform %q", d)
	}
}

func TestInstanceScopeAndGraphQLSwitch(t *testing.T) {
	tests := []struct {
		file         string
		wantInstance bool
		wantRESTOnly bool
	}{
		{"scope: {instance: true}\n", true, false},
		{"scope: {groups: [g]}\ngitlab: {graphql: false}\n", false, true},
		{"scope: {groups: [g]}\ngitlab: {graphql: true}\n", false, false},
	}
	for _, tt := range tests {
		cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": tt.file}.read})
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.RequireScope(); err != nil {
			t.Errorf("%q: %v", tt.file, err)
		}
		o := cfg.ScanOptions(nil, nil)
		if o.Scope.Instance != tt.wantInstance || o.RESTOnly != tt.wantRESTOnly {
			t.Errorf("%q: instance %v, REST only %v", tt.file, o.Scope.Instance, o.RESTOnly)
		}
	}
}

// gitlab.commit_status turns the chains' commit statuses on (the
// default) or off, and their link is the chain's page at hooks.url's
// origin.
func TestCommitStatusSetting(t *testing.T) {
	for _, tc := range []struct {
		file    string
		on      bool
		link    string
		problem string
	}{
		{"mode: full\n", true, "", ""},
		{"hooks: {url: https://depsd.example.com/hooks/gitlab}\n", true, "https://depsd.example.com/chains/42", ""},
		{"gitlab: {commit_status: off}\nhooks: {url: https://depsd.example.com/hooks/gitlab}\n", false, "", ""},
		{"gitlab: {commit_status: on, commit_status_interval: 30s}\n", true, "", ""},
		{"gitlab: {commit_status: sometimes}\n", false, "", `gitlab.commit_status "sometimes": want on or off`},
		{"gitlab: {commit_status_interval: 10ms}\n", false, "", "gitlab.commit_status_interval 10ms: want at least 1s"},
	} {
		cfg, err := Load(Source{ReadFile: fakeFS{"depsd.yaml": tc.file}.read})
		if err == nil {
			err = cfg.Validate()
		}
		if tc.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("%q: error %v, want %q", tc.file, err, tc.problem)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.file, err)
		}
		o := cfg.ChainStatuses(nil)
		if (o != nil) != tc.on {
			t.Errorf("%q: statuses %+v, want on %v", tc.file, o, tc.on)
			continue
		}
		if o == nil {
			continue
		}
		link := ""
		if o.ChainURL != nil {
			link = o.ChainURL(42)
		}
		if link != tc.link || o.Interval < time.Second {
			t.Errorf("%q: link %q, interval %s; want link %q", tc.file, link, o.Interval, tc.link)
		}
	}
}
