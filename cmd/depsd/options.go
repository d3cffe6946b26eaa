package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

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
	logFormat  string
	secretFile string // serve's --webhook-secret-file
	mode       string // serve's and rebuild's --mode
}

// addCommon adds the flags every command that reads the configuration
// takes; logLevel is the default level.
func (s *settings) addCommon(fs *pflag.FlagSet, logLevel string) {
	fs.StringVar(&s.configFile, "config", "", "configuration file (default $DEPSD_CONFIG, else ./depsd.yaml if present)")
	fs.StringVar(&s.state, "state", "", "state: an SQLite file, or a postgres:// URL shared by serve replicas (default $DEPSD_STATE, else depsd.db)")
	s.addLogging(fs, logLevel)
}

// addLogging adds the logging flags alone, for a command that reads no
// configuration and keeps no state of its own (demo).
func (s *settings) addLogging(fs *pflag.FlagSet, logLevel string) {
	enumVar(fs, &s.logLevel, "log-level", logLevel, logLevels, "log level: "+strings.Join(logLevels, ", "))
	enumVar(fs, &s.logFormat, "log-format", "text", logFormats, "log format: text (key=value) or json (one object per line, for log collectors)")
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
	m := enumVar(fs, &s.mode, "mode", "", config.Modes(), "full: rebuild everything downstream in order, once; first-level: trigger direct dependents on every success (the original gitlab-deps). Default: mode in depsd.yaml, $DEPSD_MODE, else full. serve and rebuild must agree")
	m.aliases = []string{"chain"} // the old name of full: config.Validate warns
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
		cfg.Scope.Instance, cfg.Scope.Groups, cfg.Scope.Projects = false, s.groups, s.projects
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
	err = cfg.Validate()
	for _, w := range cfg.Warnings {
		fmt.Fprintf(a.stderr, "depsd: warning: %s\n", w)
	}
	return cfg, err
}

// logLevels are the values of --log-level.
var logLevels = []string{"debug", "info", "warn", "error"}

// logFormats are the values of --log-format.
var logFormats = []string{"text", "json"}

// logger writes logs to w in the chosen format at the chosen level.
func (s *settings) logger(w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		level = slog.LevelInfo // --log-level only takes valid names
	}
	opts := &slog.HandlerOptions{Level: level}
	if s.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// openStore opens the state file, creating it if needed (scan, serve).
func openStore(ctx context.Context, cfg config.Config) (*store.Store, error) {
	return store.Open(ctx, cfg.State)
}

// openExisting opens the state file of a command that only reads it: it
// never creates one (issue 12: depsd graph in an empty directory wrote a
// new depsd.db).
func openExisting(ctx context.Context, cfg config.Config) (*store.Store, error) {
	if !strings.Contains(cfg.State, "://") { // a file, not a database URL
		if _, err := os.Stat(cfg.State); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no state at %s: run depsd scan first", cfg.State)
		}
	}
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
