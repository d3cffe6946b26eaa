package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/store"
)

// settings are the flags of the commands that read the configuration. Set
// flags override the environment and depsd.yaml; load applies them and
// config turns the result into the options of the packages (config/derive.go),
// for serve and every other command alike.
type settings struct {
	configFile string
	state      string
	gitlabURL  string
	registry   string
	groups     []string
	projects   []string
	excludes   []string
	files      []string
	logLevel   string
	secretFile string // serve's --webhook-secret-file
	mode       string // serve's and rebuild's --mode
}

// addCommon adds the flags every command that reads the configuration
// takes; logLevel is the default level.
func (s *settings) addCommon(fs *pflag.FlagSet, logLevel string) {
	fs.StringVar(&s.configFile, "config", "", "configuration file (default $DEPSD_CONFIG, else ./depsd.yaml if present)")
	fs.StringVar(&s.state, "state", "", "SQLite state file (default $DEPSD_STATE, else depsd.db)")
	fs.StringVar(&s.logLevel, "log-level", logLevel, "log level: debug, info, warn, error")
}

// addGitLab adds the flags of commands that talk to GitLab.
func (s *settings) addGitLab(fs *pflag.FlagSet) {
	fs.StringVar(&s.gitlabURL, "gitlab-url", "", "GitLab URL (default $GITLAB_URL); the token comes from $GITLAB_TOKEN or $GITLAB_TOKEN_FILE")
	fs.StringVar(&s.registry, "registry", "", "registry host whose images name projects by path (default: each project's container_registry_image_prefix)")
	fs.StringArrayVar(&s.groups, "group", nil, "group to scan with all its subgroups (repeatable)")
	fs.StringArrayVar(&s.projects, "project", nil, "single project to scan (repeatable)")
	fs.StringArrayVar(&s.excludes, "exclude", nil, "glob of project paths to leave out, e.g. 'g/legacy/**' (repeatable)")
	fs.StringArrayVar(&s.files, "file", nil, "Containerfile name to look for, in order (repeatable; default Containerfile, Dockerfile)")
}

// addMode adds --mode to a command that starts or advances chains.
func (s *settings) addMode(fs *pflag.FlagSet) {
	fs.StringVar(&s.mode, "mode", "", "chain: rebuild everything downstream in order, once; first-level: trigger direct dependents on every success (the original gitlab-deps). Default: mode in depsd.yaml, $DEPSD_MODE, else chain. serve and rebuild must agree")
}

// load reads the configuration with these flags on top.
func (s *settings) load(a *app) (config.Config, error) {
	cfg, err := config.Load(config.Source{File: s.configFile, Env: a.env})
	if err != nil {
		return cfg, err
	}
	if s.state != "" {
		cfg.State = s.state
	}
	if s.gitlabURL != "" {
		cfg.GitLab.URL = s.gitlabURL
	}
	if s.registry != "" {
		cfg.Registry = s.registry
	}
	if len(s.groups) > 0 || len(s.projects) > 0 {
		// A scope on the command line replaces the configured one.
		cfg.Scope.Groups, cfg.Scope.Projects = s.groups, s.projects
	}
	if len(s.excludes) > 0 {
		cfg.Scope.Exclude = s.excludes
	}
	if len(s.files) > 0 {
		cfg.Containerfiles = s.files
	}
	if s.mode != "" {
		cfg.Mode = s.mode
	}
	if s.secretFile != "" {
		cfg.Hooks.SecretFile, cfg.Hooks.Secret = s.secretFile, ""
	}
	if err := cfg.ResolveSecrets(nil); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// logger writes text logs to w at the chosen level.
func (s *settings) logger(w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// openStore opens the state file.
func openStore(ctx context.Context, cfg config.Config) (*store.Store, error) {
	return store.Open(ctx, cfg.State)
}

// newScopedGitLab builds the API client for commands that work on the
// whole scope.
func newScopedGitLab(cfg config.Config, log *slog.Logger) (*gitlab.Client, error) {
	if err := cfg.RequireScope(); err != nil {
		return nil, err
	}
	return cfg.GitLabClient(log)
}
