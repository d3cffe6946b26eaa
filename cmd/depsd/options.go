package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/store"
)

// commonFlags are the flags every command that reads the configuration
// takes. Set flags override the environment and depsd.yaml.
type commonFlags struct {
	fs         *flag.FlagSet
	configFile string
	state      string
	gitlabURL  string
	registry   string
	groups     stringList
	projects   stringList
	excludes   stringList
	files      stringList
	logLevel   string
	secretFile string // serve's --webhook-secret-file
	mode       string // serve's and rebuild's --mode
}

// newCommand makes the flag set of a command with the common flags; gitlab
// adds the flags of commands that talk to GitLab.
func newCommand(name, usage string, stderr io.Writer, withGitLab bool) *commonFlags {
	c := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := c.fs
	fs.SetOutput(stderr)
	fs.StringVar(&c.configFile, "config", "", "configuration file (default $DEPSD_CONFIG, else ./depsd.yaml if present)")
	fs.StringVar(&c.state, "state", "", "SQLite state file (default $DEPSD_STATE, else depsd.db)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if withGitLab {
		fs.StringVar(&c.gitlabURL, "gitlab-url", "", "GitLab URL (default $GITLAB_URL); the token comes from $GITLAB_TOKEN or $GITLAB_TOKEN_FILE")
		fs.StringVar(&c.registry, "registry", "", "registry host whose images name projects by path (default: each project's container_registry_image_prefix)")
		fs.Var(&c.groups, "group", "group to scan with all its subgroups (repeatable)")
		fs.Var(&c.projects, "project", "single project to scan (repeatable)")
		fs.Var(&c.excludes, "exclude", "glob of project paths to leave out, e.g. 'g/legacy/**' (repeatable)")
		fs.Var(&c.files, "file", "Containerfile name to look for, in order (repeatable; default Containerfile, Dockerfile)")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: depsd %s\n", usage)
		fs.PrintDefaults()
	}
	return c
}

// parse parses args; ok false means return code (help is not an error).
func (c *commonFlags) parse(args []string) (code int, ok bool) {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	return exitOK, true
}

// load reads the configuration with this command's flags on top.
func (c *commonFlags) load() (config.Config, error) {
	cfg, err := config.Load(config.Source{File: c.configFile, Env: os.LookupEnv})
	if err != nil {
		return cfg, err
	}
	if c.state != "" {
		cfg.State = c.state
	}
	if c.gitlabURL != "" {
		cfg.GitLab.URL = c.gitlabURL
	}
	if c.registry != "" {
		cfg.Registry = c.registry
	}
	if len(c.groups) > 0 || len(c.projects) > 0 {
		// A scope on the command line replaces the configured one.
		cfg.Scope.Groups, cfg.Scope.Projects = c.groups, c.projects
	}
	if len(c.excludes) > 0 {
		cfg.Scope.Exclude = c.excludes
	}
	if len(c.files) > 0 {
		cfg.Containerfiles = c.files
	}
	if c.mode != "" {
		cfg.Mode = c.mode
	}
	if c.secretFile != "" {
		cfg.Hooks.SecretFile, cfg.Hooks.Secret = c.secretFile, ""
	}
	if err := cfg.ResolveSecrets(nil); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// logger writes text logs to stderr at the chosen level.
func (c *commonFlags) logger(stderr io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// openStore opens the state file.
func openStore(ctx context.Context, cfg config.Config) (*store.Store, error) {
	return store.Open(ctx, cfg.State)
}

// newGitLab builds the API client from the configuration.
func newGitLab(cfg config.Config, log *slog.Logger) (*gitlab.Client, error) {
	if err := cfg.RequireGitLab(); err != nil {
		return nil, err
	}
	retries := cfg.GitLab.MaxRetries
	if retries == 0 {
		retries = -1 // the gitlab package reads 0 as "default"
	}
	return gitlab.New(gitlab.Config{
		BaseURL:           cfg.GitLab.URL,
		Token:             cfg.GitLab.Token,
		Concurrency:       cfg.GitLab.Concurrency,
		RequestsPerMinute: cfg.GitLab.RequestsPerMinute,
		MaxRetries:        retries,
		HTTPClient:        &http.Client{Timeout: cfg.GitLab.Timeout},
		Logger:            log,
	})
}

// newScopedGitLab is newGitLab for commands that work on the whole scope.
func newScopedGitLab(cfg config.Config, log *slog.Logger) (*gitlab.Client, error) {
	if err := cfg.RequireScope(); err != nil {
		return nil, err
	}
	return newGitLab(cfg, log)
}

// addModeFlag adds --mode to a command that starts or advances chains.
func (c *commonFlags) addModeFlag() {
	c.fs.StringVar(&c.mode, "mode", "", "chain: rebuild everything downstream in order, once; first-level: trigger direct dependents on every success (the original gitlab-deps). Default: mode in depsd.yaml, $DEPSD_MODE, else chain. serve and rebuild must agree")
}

// engineMode maps the configured mode onto the chain engine's.
func engineMode(cfg config.Config) chain.Mode {
	if cfg.Mode == "first-level" {
		return chain.FirstLevel
	}
	return chain.Full
}

// scope converts the configured scope for the gitlab package.
func scope(cfg config.Config) gitlab.Scope {
	return gitlab.Scope{Groups: cfg.Scope.Groups, Projects: cfg.Scope.Projects, Exclude: cfg.Scope.Exclude}
}

// instanceHost is the GitLab host, which .gitlab-deps URLs must name.
func instanceHost(cfg config.Config) string {
	u, err := url.Parse(cfg.GitLab.URL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// fail prints an error for command name and returns the failure code.
func fail(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "depsd %s: %v\n", name, err)
	return exitFail
}
