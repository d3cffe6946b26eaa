// Package config turns depsd.yaml, the environment and command-line flags
// into one validated Config. Precedence: flags > environment > file >
// defaults. It reads files and the environment it is given; it never
// touches process globals itself, so commands and tests can call it freely.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"gitlab.com/depsd/depsd/scheduler"
)

// Config is everything depsd can be configured with.
type Config struct {
	GitLab GitLab `yaml:"gitlab"`
	Scope  Scope  `yaml:"scope"`
	// Containerfiles are the file names looked for, in order, in each
	// project; the first present is read. .gitlab-deps is always read.
	Containerfiles []string `yaml:"containerfiles"`
	// Registry, when set, is the registry host whose images name projects by
	// path, instead of each project's container_registry_image_prefix.
	Registry string `yaml:"registry"`
	// State is the SQLite file depsd keeps its state in.
	State string `yaml:"state"`
	Hooks Hooks  `yaml:"hooks"`
	// Mode is how successes propagate: "chain" (everything downstream, in
	// order, once) or "first-level" (direct dependents on every success,
	// as the original gitlab-deps). serve and rebuild must agree, so it is
	// configuration rather than a flag of one command.
	Mode string `yaml:"mode"`
	// Schedules, the maintenance rescan and image watching (schedules,
	// catch_up, rescan, watch, watch_external, watch_interval,
	// registry_auth_file at the top level).
	Scheduler scheduler.Config `yaml:",inline"`
}

// GitLab says how to reach the GitLab API.
type GitLab struct {
	URL               string        `yaml:"url"`
	Token             string        `yaml:"-"` // never read from the file: use token_file or the environment
	TokenFile         string        `yaml:"token_file"`
	Concurrency       int           `yaml:"concurrency"`
	RequestsPerMinute int           `yaml:"requests_per_minute"`
	MaxRetries        int           `yaml:"max_retries"`
	Timeout           time.Duration `yaml:"timeout"`
}

// Scope is the part of the instance depsd watches.
type Scope struct {
	Groups   []string `yaml:"groups"`
	Projects []string `yaml:"projects"`
	Exclude  []string `yaml:"exclude"`
}

// Hooks configures the project webhooks depsd installs.
type Hooks struct {
	// URL is the public address of depsd's webhook endpoint, as GitLab
	// reaches it (https://depsd.example.com/hooks/gitlab).
	URL string `yaml:"url"`
	// SecretFile holds the X-Gitlab-Token secret.
	SecretFile string `yaml:"secret_file"`
	Secret     string `yaml:"-"`
}

// The values of Mode.
const (
	ModeChain      = "chain"
	ModeFirstLevel = "first-level"
)

// Defaults returns the configuration used where nothing else says.
func Defaults() Config {
	return Config{
		GitLab: GitLab{
			Concurrency:       8,
			RequestsPerMinute: 2000,
			MaxRetries:        5,
			Timeout:           30 * time.Second,
		},
		Containerfiles: []string{"Containerfile", "Dockerfile"},
		State:          "depsd.db",
		Mode:           ModeChain,
	}
}

// Source is where Load reads from. Env is looked up by name (os.LookupEnv
// in production); ReadFile reads the config and secret files.
type Source struct {
	// File is the config file named on the command line, if any; else
	// $DEPSD_CONFIG; else depsd.yaml in the working directory when present.
	File     string
	Env      func(string) (string, bool)
	ReadFile func(string) ([]byte, error)
}

// FileError is a problem in the configuration file, naming the key.
type FileError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": %s", e.Key)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	return b.String()
}

// Load builds the configuration from defaults, the file, and the
// environment. Flags are applied by the caller afterwards (they win), and
// then Validate is called.
func Load(src Source) (Config, error) {
	if src.Env == nil {
		src.Env = func(string) (string, bool) { return "", false }
	}
	if src.ReadFile == nil {
		src.ReadFile = os.ReadFile
	}
	cfg := Defaults()
	file, required := src.File, src.File != ""
	if !required {
		if v, ok := src.Env("DEPSD_CONFIG"); ok && v != "" {
			file, required = v, true
		} else {
			file = "depsd.yaml"
		}
	}
	data, err := src.ReadFile(file)
	switch {
	case err == nil:
		if err := decode(file, data, &cfg); err != nil {
			return Config{}, err
		}
	case errors.Is(err, fs.ErrNotExist) && !required:
	default:
		return Config{}, fmt.Errorf("config file: %w", err)
	}
	applyEnv(&cfg, src.Env)
	return cfg, nil
}

// decode reads YAML strictly: an unknown key is an error naming it, so a
// typo does not silently fall back to a default.
func decode(file string, data []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			return &FileError{File: file, Msg: strings.Join(te.Errors, "; ")}
		}
		return &FileError{File: file, Msg: err.Error()}
	}
	return nil
}

func applyEnv(cfg *Config, env func(string) (string, bool)) {
	set := func(name string, dst *string) {
		if v, ok := env(name); ok && v != "" {
			*dst = v
		}
	}
	set("GITLAB_URL", &cfg.GitLab.URL)
	set("GITLAB_TOKEN", &cfg.GitLab.Token)
	set("GITLAB_TOKEN_FILE", &cfg.GitLab.TokenFile)
	set("DEPSD_STATE", &cfg.State)
	set("DEPSD_REGISTRY", &cfg.Registry)
	set("DEPSD_HOOK_URL", &cfg.Hooks.URL)
	set("DEPSD_WEBHOOK_SECRET", &cfg.Hooks.Secret)
	set("DEPSD_WEBHOOK_SECRET_FILE", &cfg.Hooks.SecretFile)
	set("DEPSD_MODE", &cfg.Mode)
}

// ResolveSecrets reads the token and webhook secret files when the values
// were not given directly. Only what the command needs is required.
func (c *Config) ResolveSecrets(readFile func(string) ([]byte, error)) error {
	if readFile == nil {
		readFile = os.ReadFile
	}
	read := func(key, file string, dst *string) error {
		if *dst != "" || file == "" {
			return nil
		}
		b, err := readFile(file)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*dst = strings.TrimSpace(string(b))
		if *dst == "" {
			return fmt.Errorf("%s: %s is empty", key, file)
		}
		return nil
	}
	if err := read("gitlab.token_file", c.GitLab.TokenFile, &c.GitLab.Token); err != nil {
		return err
	}
	return read("hooks.secret_file", c.Hooks.SecretFile, &c.Hooks.Secret)
}

// RequireGitLab checks what commands that talk to GitLab need on top of
// Validate: a URL and a token.
func (c *Config) RequireGitLab() error {
	if c.GitLab.URL == "" {
		return errors.New("gitlab.url is not set (flag --gitlab-url, env GITLAB_URL, or gitlab.url in depsd.yaml)")
	}
	if c.GitLab.Token == "" {
		return errors.New("no GitLab token: set GITLAB_TOKEN, GITLAB_TOKEN_FILE or gitlab.token_file")
	}
	return nil
}

// RequireScope checks that commands working on the whole scope (scan,
// hooks sync, serve) have one.
func (c *Config) RequireScope() error {
	if len(c.Scope.Groups) == 0 && len(c.Scope.Projects) == 0 {
		return errors.New("scope is empty: name at least one group (--group, scope.groups) or project (--project, scope.projects)")
	}
	return nil
}

// Validate checks the values that are set, naming the key of the first
// bad one.
func (c *Config) Validate() error {
	if c.GitLab.URL != "" {
		u, err := url.Parse(c.GitLab.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("gitlab.url %q: want an http(s) URL such as https://gitlab.example.com", c.GitLab.URL)
		}
		if u.User != nil {
			return errors.New("gitlab.url must not carry credentials: use GITLAB_TOKEN or gitlab.token_file")
		}
	}
	if c.GitLab.Concurrency < 1 || c.GitLab.Concurrency > 64 {
		return fmt.Errorf("gitlab.concurrency %d: want 1 to 64", c.GitLab.Concurrency)
	}
	if c.GitLab.RequestsPerMinute < 1 {
		return fmt.Errorf("gitlab.requests_per_minute %d: want at least 1", c.GitLab.RequestsPerMinute)
	}
	if c.GitLab.MaxRetries < 0 || c.GitLab.MaxRetries > 20 {
		return fmt.Errorf("gitlab.max_retries %d: want 0 to 20", c.GitLab.MaxRetries)
	}
	if c.GitLab.Timeout <= 0 {
		return fmt.Errorf("gitlab.timeout %s: want a positive duration such as 30s", c.GitLab.Timeout)
	}
	for i, g := range c.Scope.Groups {
		if err := checkPath(g, 1); err != nil {
			return fmt.Errorf("scope.groups[%d] %q: %v", i, g, err)
		}
	}
	for i, p := range c.Scope.Projects {
		if err := checkPath(p, 2); err != nil {
			return fmt.Errorf("scope.projects[%d] %q: %v", i, p, err)
		}
	}
	for i, e := range c.Scope.Exclude {
		if _, err := path.Match(strings.ReplaceAll(e, "**", "*"), ""); err != nil || e == "" {
			return fmt.Errorf("scope.exclude[%d] %q: not a valid glob", i, e)
		}
	}
	if len(c.Containerfiles) == 0 {
		return errors.New("containerfiles is empty: name at least one file, e.g. Containerfile")
	}
	for i, f := range c.Containerfiles {
		if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "..") {
			return fmt.Errorf("containerfiles[%d] %q: want a path relative to the repository root", i, f)
		}
	}
	if c.State == "" {
		return errors.New("state is empty: name the SQLite file (--state, DEPSD_STATE)")
	}
	if c.Mode != ModeChain && c.Mode != ModeFirstLevel {
		return fmt.Errorf("mode %q: want chain or first-level", c.Mode)
	}
	if c.Hooks.URL != "" {
		if u, err := url.Parse(c.Hooks.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("hooks.url %q: want the http(s) URL GitLab should post to", c.Hooks.URL)
		}
	}
	return nil
}

// checkPath accepts a GitLab full path of at least minSegments segments.
func checkPath(p string, minSegments int) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return errors.New("want a full path such as group/subgroup")
	}
	if n := len(strings.Split(p, "/")); n < minSegments {
		return fmt.Errorf("want at least %d path segments", minSegments)
	}
	return nil
}
