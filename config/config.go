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
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scheduler"
	"gitlab.com/depsd/depsd/verify"
	"gitlab.com/depsd/depsd/webhook"
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
	// Platform is the platform (or comma-separated platforms) Containerfiles
	// are read for: it gives TARGETARCH, BUILDOS and the other platform
	// ARGs their values, as a build on such a host does. Default
	// deps.DefaultPlatform; several give the union of the dependencies.
	Platform string `yaml:"platform"`
	// State is where depsd keeps its state: an SQLite file path, or a
	// postgres:// (postgresql://) URL for several serve replicas.
	State string `yaml:"state"`
	// CatchUpInterval is how often serve's leader looks for successes of
	// upstream projects whose webhook never arrived (and once when it
	// takes the lead).
	CatchUpInterval time.Duration `yaml:"catch_up_interval"`
	Hooks           Hooks         `yaml:"hooks"`
	// Mode is how successes propagate: "full" (everything downstream, in
	// order, once) or "first-level" (direct dependents on every success,
	// as the original gitlab-deps). serve and rebuild must agree, so it is
	// configuration rather than a flag of one command. "chain", the old
	// name of "full", is accepted with a warning.
	Mode string `yaml:"mode"`
	// Schedules, the maintenance rescan and image watching (schedules,
	// catch_up, rescan, watch, watch_external, watch_interval,
	// registry_auth_file at the top level).
	Scheduler scheduler.Config `yaml:",inline"`
	// Images says how the images projects publish are verified
	// (docs/verification.md).
	Images Images `yaml:"images"`
	// Refs say which refs of which projects are followed beside the
	// default branch, and what each publishes (config/refs.go).
	Refs []Refs `yaml:"refs"`
	// Pins say what a project that pins a rebuilt upstream by digest gets
	// (docs/chains.md, "Pinned bases move through a merge request").
	Pins Pins `yaml:"pins"`
	// Premerge say which projects' merge requests are validated before
	// the merge: their dependents built on the candidate image
	// (config/premerge.go, docs/validation.md). Empty: none.
	Premerge []Premerge `yaml:"premerge"`
	// UI is who may use the dashboard and the API, and how they sign in
	// (docs/dashboard.md).
	UI UI `yaml:"ui"`
	// Metrics says what /metrics may carry (docs/monitoring.md).
	Metrics Metrics `yaml:"metrics"`
	// Warnings are notes for the user about the configuration, such as a
	// deprecated spelling, collected by Validate; commands print them.
	Warnings []string `yaml:"-"`
}

// Images says which images projects publish and how depsd verifies that
// each was built on its upstreams' current images.
type Images struct {
	// Verify is what a verification does: "off" (nothing is read),
	// "report" (recorded and shown) or "enforce" (default: a stale member
	// is rebuilt once without cache, then blocks its descendants).
	Verify string `yaml:"verify"`
	// Timeout bounds one verification (an image, a platform, its
	// upstreams); the verdict is then unknown. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// Publish are references every project in scope publishes on top of
	// those its downstreams name: {registry} is the host of the project's
	// registry prefix, {path} the rest ("{registry}/{path}:latest").
	Publish []string `yaml:"publish"`
	// Projects replace Publish for the projects they match (the first
	// that matches).
	Projects []ImagesOverride `yaml:"projects"`
	// ExternalRegistries are registry hosts (host[:port]) depsd reads
	// besides the instance's own (each project's registry prefix, and
	// registry above) and the hosts of watch entries: the upstreams FROM
	// lines name (verification) and the external images watched
	// (watch_external) on any other host are refused, so that a FROM
	// line cannot make depsd probe a host of its writer's choosing.
	// docker.io stands for Docker Hub's hosts.
	ExternalRegistries []string `yaml:"external_registries"`
	// InsecureRegistries are registry hosts (host[:port]) spoken to over
	// plain HTTP, and which may be on a loopback, private or link-local
	// address; no other registry may be, except the instance's own and
	// GitLab's host (not even 127.0.0.1 or localhost). They are read
	// like external_registries.
	InsecureRegistries []string `yaml:"insecure_registries"`
}

// Pins say what a project that pins a rebuilt upstream by digest gets.
type Pins struct {
	// Mode is merge-request (default: a merge request moving the pins,
	// merged by someone), auto-merge (the same, set to merge when its
	// pipeline succeeds, where the project allows it) or ignore (no merge
	// request; the project is skipped in the chain).
	Mode string `yaml:"mode"`
	// Timeout is how long a pin merge request may stay unmerged before
	// the project is skipped in its chain. Default 168h (7 days).
	Timeout time.Duration `yaml:"timeout"`
	// Projects replace Mode for the projects they match (the first that
	// matches).
	Projects []PinsOverride `yaml:"projects"`
}

// PinsOverride is the pins mode of some projects.
type PinsOverride struct {
	// Match is a project path, or a glob of paths (* within a segment).
	Match string `yaml:"match"`
	Mode  string `yaml:"mode"`
}

// problems checks the pins section.
func (p Pins) problems() Problems {
	var errs Problems
	var modes []string
	for _, m := range chain.PinModes() {
		modes = append(modes, string(m))
	}
	want := strings.Join(modes[:len(modes)-1], ", ") + " or " + modes[len(modes)-1]
	if !slices.Contains(modes, p.Mode) {
		errs = append(errs, fmt.Errorf("pins.mode %q: want %s", p.Mode, want))
	}
	if p.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("pins.timeout %s: want a positive duration such as 168h", p.Timeout))
	}
	for j, o := range p.Projects {
		if _, err := path.Match(o.Match, ""); err != nil || o.Match == "" {
			errs = append(errs, fmt.Errorf("pins.projects[%d].match %q: want a project path or a glob such as group/*", j, o.Match))
		}
		if !slices.Contains(modes, o.Mode) {
			errs = append(errs, fmt.Errorf("pins.projects[%d].mode %q: want %s", j, o.Mode, want))
		}
	}
	return errs
}

// UI is the dashboard's and the API's sign-in.
type UI struct {
	// Auth is UIAuthGitLab (people sign in with their GitLab account and
	// see only the projects they can read) or UIAuthNone (anyone who
	// reaches the listener sees everything, read-only). Default: gitlab
	// when ui.oauth.client_id is set, else none.
	Auth string `yaml:"auth"`
	// URL is depsd's address as browsers reach it
	// (https://depsd.example.com): the OAuth redirect URI is URL +
	// "/auth/callback", and an https URL makes the cookies Secure.
	URL string `yaml:"url"`
	// SessionLifetime ends a session this long after sign-in. Default 12h.
	SessionLifetime time.Duration `yaml:"session_lifetime"`
	// VisibilityTTL is how long what GitLab lists for a person is reused
	// before it is asked again (a page's ?refresh asks at once). Default 5m.
	VisibilityTTL time.Duration `yaml:"visibility_ttl"`
	OAuth         UIOAuth       `yaml:"oauth"`
}

// UIOAuth is the OAuth application registered on GitLab for depsd.
type UIOAuth struct {
	ClientID         string `yaml:"client_id"`
	ClientSecretFile string `yaml:"client_secret_file"`
	ClientSecret     string `yaml:"-"` // never read from the file
}

// The values of ui.auth.
const (
	UIAuthGitLab = "gitlab"
	UIAuthNone   = "none"
)

// Metrics says what /metrics may carry.
type Metrics struct {
	// ProjectLabels: "on" keeps the series labelled with a project path
	// (depsd_image_stale{project,image}); "off" (default) drops the
	// project label and aggregates over it, so /metrics names no project.
	ProjectLabels string `yaml:"project_labels"`
}

// ProjectLabelsOn reports whether metrics may name projects.
func (m Metrics) ProjectLabelsOn() bool { return m.ProjectLabels == "on" }

// ImagesOverride is what some projects publish instead of images.publish.
type ImagesOverride struct {
	// Match is a project path, or a glob of paths (* within a segment).
	Match   string   `yaml:"match"`
	Publish []string `yaml:"publish"`
}

// The values of images.verify.
const (
	VerifyOff     = "off"
	VerifyReport  = "report"
	VerifyEnforce = "enforce"
)

// PublishRules are images.publish and its overrides, and what refs:
// says each node publishes, as verification reads them.
func (c Config) PublishRules() verify.PublishRules {
	i := c.Images
	r := verify.PublishRules{Publish: i.Publish, Refs: c.RefRules()}
	for _, o := range i.Projects {
		r.Overrides = append(r.Overrides, verify.PublishOverride{Match: o.Match, Publish: o.Publish})
	}
	return r
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
	// GraphQL, when false, makes scans read dependency files through REST
	// only (a tree listing and a blob read per project) instead of in
	// batches of 50 projects through GitLab's GraphQL API. Default true.
	GraphQL *bool `yaml:"graphql"`
	// CommitStatus is CommitStatusOn (default) or CommitStatusOff: whether
	// a chain started by a pipeline's success shows its progress on that
	// pipeline's commit, as the commit status depsd/chain (docs/chains.md).
	CommitStatus string `yaml:"commit_status"`
	// CommitStatusInterval is the least time between two updates of one
	// chain's status: the changes in between are sent as one. Default 5s.
	CommitStatusInterval time.Duration `yaml:"commit_status_interval"`
}

// The values of gitlab.commit_status.
const (
	CommitStatusOn  = "on"
	CommitStatusOff = "off"
)

// Scope is the part of the instance depsd watches.
type Scope struct {
	// Instance is every project the token can see on the instance.
	Instance bool     `yaml:"instance"`
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
	// Mode is where depsd installs its hook: HooksProject (one per project)
	// or HooksGroup (one per group of scope.groups: Premium, Owner role).
	Mode string `yaml:"mode"`
	// SecretMode is what each hook carries as X-Gitlab-Token:
	// webhook.SecretPerProject (default: a secret derived from Secret for
	// each project hook, and for each group hook) or webhook.SecretShared
	// (Secret itself on every hook, as before per-project secrets).
	SecretMode string `yaml:"secret_mode"`
	// Signing is how deliveries' Standard Webhooks signatures are treated:
	// webhook.SigningAuto, SigningRequired or SigningOff.
	Signing string `yaml:"signing"`
	// SigningTokenFile holds the signing token hooks sync installs and the
	// receiver verifies ("whsec_" + base64 of 32 random bytes). Without
	// one, depsd generates a token once and keeps it in its state.
	SigningTokenFile string `yaml:"signing_token_file"`
	SigningToken     string `yaml:"-"`
	// SigningTokenPreviousFile holds the token being rotated out: its
	// signatures are still accepted until every hook carries the new one.
	SigningTokenPreviousFile string `yaml:"signing_token_previous_file"`
	SigningTokenPrevious     string `yaml:"-"`
}

// The values of Hooks.Mode.
const (
	HooksProject = "project"
	HooksGroup   = "group"
)

// HookGroups are the groups that get a group hook: scope.groups in
// hooks.mode: group, none in project mode.
func (c Config) HookGroups() []string {
	if c.Hooks.Mode != HooksGroup {
		return nil
	}
	return c.Scope.Groups
}

// SigningTokens are the configured signing tokens, the current one first.
func (h Hooks) SigningTokens() []string {
	var out []string
	for _, t := range []string{h.SigningToken, h.SigningTokenPrevious} {
		if t != "" {
			out = append(out, t)
		}
	}
	return out
}

// The values of Mode; the names are those of the chain engine, which the
// logs and the API show.
const (
	// ModeFull rebuilds everything downstream of a success, in dependency
	// order, each project once.
	ModeFull = "full"
	// ModeFirstLevel triggers the direct dependents on every success, as
	// the original gitlab-deps did.
	ModeFirstLevel = "first-level"
	// modeChainDeprecated is what ModeFull was called in depsd.yaml before
	// the names were unified; it is still accepted, with a warning.
	modeChainDeprecated = "chain"
)

// Modes are the accepted values of mode.
func Modes() []string { return []string{ModeFull, ModeFirstLevel} }

// warnf notes a warning for the command to show.
func (c *Config) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !slices.Contains(c.Warnings, msg) {
		c.Warnings = append(c.Warnings, msg)
	}
}

// Defaults returns the configuration used where nothing else says.
func Defaults() Config {
	return Config{
		GitLab: GitLab{
			Concurrency:       8,
			RequestsPerMinute: 2000,
			MaxRetries:        5,
			Timeout:           30 * time.Second,

			CommitStatus:         CommitStatusOn,
			CommitStatusInterval: 5 * time.Second,
		},
		Containerfiles:  []string{"Containerfile", "Dockerfile"},
		Platform:        deps.DefaultPlatform,
		State:           "depsd.db",
		CatchUpInterval: 5 * time.Minute,
		Mode:            ModeFull,
		Hooks:           Hooks{Mode: HooksProject, Signing: webhook.SigningAuto, SecretMode: webhook.SecretPerProject},
		Images:          Images{Verify: VerifyEnforce, Timeout: verify.DefaultTimeout},
		Pins:            Pins{Mode: string(chain.PinMergeRequest), Timeout: 7 * 24 * time.Hour},
		UI:              UI{SessionLifetime: 12 * time.Hour, VisibilityTTL: 5 * time.Minute},
		Metrics:         Metrics{ProjectLabels: "off"},
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

// decode reads YAML strictly: every unknown key and every value of the
// wrong kind is reported at once, with its line and the key's full name,
// so a typo does not silently fall back to a default.
func decode(file string, data []byte, cfg *Config) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return lineError(file, err, " (not valid YAML)")
	}
	var problems Problems
	checkKeys(file, &doc, reflect.TypeFor[Config](), "", &problems)
	if len(problems) > 0 {
		return problems
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			for _, msg := range te.Errors {
				problems = append(problems, lineError(file, errors.New(msg), ""))
			}
			return problems
		}
		return lineError(file, err, "")
	}
	return nil
}

// yamlLine matches the "line N: msg" the YAML library and the scheduler's
// decoders put in their errors.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// lineError turns a decoder error into file:line: msg.
func lineError(file string, err error, suffix string) *FileError {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FileError{File: file, Line: line, Msg: m[2] + suffix}
	}
	return &FileError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ") + suffix}
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
	set("DEPSD_WEBHOOK_SIGNING", &cfg.Hooks.Signing)
	set("DEPSD_WEBHOOK_SIGNING_TOKEN", &cfg.Hooks.SigningToken)
	set("DEPSD_WEBHOOK_SIGNING_TOKEN_FILE", &cfg.Hooks.SigningTokenFile)
	set("DEPSD_WEBHOOK_SIGNING_TOKEN_PREVIOUS", &cfg.Hooks.SigningTokenPrevious)
	set("DEPSD_WEBHOOK_SIGNING_TOKEN_PREVIOUS_FILE", &cfg.Hooks.SigningTokenPreviousFile)
	set("DEPSD_HOOKS_MODE", &cfg.Hooks.Mode)
	set("DEPSD_HOOKS_SECRET_MODE", &cfg.Hooks.SecretMode)
	set("DEPSD_MODE", &cfg.Mode)
	set("DEPSD_UI_AUTH", &cfg.UI.Auth)
	set("DEPSD_UI_URL", &cfg.UI.URL)
	set("DEPSD_UI_OAUTH_CLIENT_ID", &cfg.UI.OAuth.ClientID)
	set("DEPSD_UI_OAUTH_CLIENT_SECRET", &cfg.UI.OAuth.ClientSecret)
	set("DEPSD_UI_OAUTH_CLIENT_SECRET_FILE", &cfg.UI.OAuth.ClientSecretFile)
	set("DEPSD_METRICS_PROJECT_LABELS", &cfg.Metrics.ProjectLabels)
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
	if err := read("hooks.secret_file", c.Hooks.SecretFile, &c.Hooks.Secret); err != nil {
		return err
	}
	if err := read("hooks.signing_token_file", c.Hooks.SigningTokenFile, &c.Hooks.SigningToken); err != nil {
		return err
	}
	if err := read("hooks.signing_token_previous_file", c.Hooks.SigningTokenPreviousFile, &c.Hooks.SigningTokenPrevious); err != nil {
		return err
	}
	if err := read("ui.oauth.client_secret_file", c.UI.OAuth.ClientSecretFile, &c.UI.OAuth.ClientSecret); err != nil {
		return err
	}
	return c.checkSigningTokens().orNil()
}

// checkSigningTokens checks the format of the signing tokens that are set,
// naming where each comes from and never repeating it.
func (c *Config) checkSigningTokens() Problems {
	var errs Problems
	for _, t := range []struct{ key, env, value string }{
		{"hooks.signing_token_file", "DEPSD_WEBHOOK_SIGNING_TOKEN", c.Hooks.SigningToken},
		{"hooks.signing_token_previous_file", "DEPSD_WEBHOOK_SIGNING_TOKEN_PREVIOUS", c.Hooks.SigningTokenPrevious},
	} {
		if t.value == "" {
			continue
		}
		if err := webhook.CheckGitLabSigningToken(t.value); err != nil {
			errs = append(errs, fmt.Errorf("signing token (%s or %s): %v", t.key, t.env, err))
		}
	}
	if c.Hooks.SigningTokenPrevious != "" && c.Hooks.SigningToken == "" {
		errs = append(errs, errors.New("hooks.signing_token_previous_file is set without hooks.signing_token_file: the previous token only verifies during a rotation to a new one"))
	}
	return errs
}

// RequireGitLab checks what commands that talk to GitLab need on top of
// Validate: a URL and a token.
func (c *Config) RequireGitLab() error {
	return c.missingGitLab().orNil()
}

func (c *Config) missingGitLab() Problems {
	var errs Problems
	if c.GitLab.URL == "" {
		errs = append(errs, errors.New("gitlab.url is not set (flag --gitlab-url, env GITLAB_URL, or gitlab.url in depsd.yaml)"))
	}
	if c.GitLab.Token == "" {
		errs = append(errs, errors.New("no GitLab token: set GITLAB_TOKEN, GITLAB_TOKEN_FILE or gitlab.token_file"))
	}
	return errs
}

// RequireScope checks that commands working on the whole scope (scan,
// hooks sync, serve) have one.
func (c *Config) RequireScope() error {
	if !c.Scope.Instance && len(c.Scope.Groups) == 0 && len(c.Scope.Projects) == 0 {
		return errors.New("scope is empty: name at least one group (--group, scope.groups) or project (--project, scope.projects), or the whole instance (scope.instance)")
	}
	return nil
}

// RequireServe checks everything depsd serve needs on top of Validate, and
// lists every missing setting at once.
func (c *Config) RequireServe() error {
	errs := c.missingGitLab()
	if err := c.RequireScope(); err != nil {
		errs = append(errs, err)
	}
	if c.Hooks.Secret == "" {
		errs = append(errs, errors.New("no webhook secret: depsd serve refuses to accept unauthenticated webhooks (set DEPSD_WEBHOOK_SECRET, DEPSD_WEBHOOK_SECRET_FILE, --webhook-secret-file or hooks.secret_file)"))
	}
	if c.UIAuth() == UIAuthGitLab {
		if c.UI.OAuth.ClientID == "" {
			errs = append(errs, errors.New("ui.auth is gitlab but ui.oauth.client_id is not set: register an OAuth application on GitLab (docs/dashboard.md) and set its id"))
		}
		if c.UI.OAuth.ClientSecret == "" {
			errs = append(errs, errors.New("ui.auth is gitlab but the OAuth application's secret is not set (ui.oauth.client_secret_file, DEPSD_UI_OAUTH_CLIENT_SECRET_FILE or DEPSD_UI_OAUTH_CLIENT_SECRET)"))
		}
		if c.UI.URL == "" {
			errs = append(errs, errors.New("ui.auth is gitlab but ui.url is not set: the address browsers reach depsd at, such as https://depsd.example.com (the redirect URI is ui.url + /auth/callback)"))
		}
	}
	return errs.orNil()
}

// Validate checks the values that are set and reports every bad one at
// once (as Problems), naming its key and what is allowed. It also turns the
// deprecated spelling of a value into the current one, noting a warning in
// Warnings.
func (c *Config) Validate() error {
	var errs Problems
	if c.Mode == modeChainDeprecated {
		c.Mode = ModeFull
		c.warnf("mode: %q is the old name of %q; write mode: %s (the old name still works)", modeChainDeprecated, ModeFull, ModeFull)
	}
	if c.GitLab.URL != "" {
		u, err := url.Parse(c.GitLab.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("gitlab.url %q: want an http(s) URL such as https://gitlab.example.com", c.GitLab.URL))
		} else if u.User != nil {
			errs = append(errs, errors.New("gitlab.url must not carry credentials: use GITLAB_TOKEN or gitlab.token_file"))
		}
	}
	if c.GitLab.Concurrency < 1 || c.GitLab.Concurrency > 64 {
		errs = append(errs, fmt.Errorf("gitlab.concurrency %d: want 1 to 64", c.GitLab.Concurrency))
	}
	if c.GitLab.RequestsPerMinute < 1 {
		errs = append(errs, fmt.Errorf("gitlab.requests_per_minute %d: want at least 1", c.GitLab.RequestsPerMinute))
	}
	if c.GitLab.MaxRetries < 0 || c.GitLab.MaxRetries > 20 {
		errs = append(errs, fmt.Errorf("gitlab.max_retries %d: want 0 to 20", c.GitLab.MaxRetries))
	}
	if c.CatchUpInterval <= 0 {
		errs = append(errs, fmt.Errorf("catch_up_interval %s: want a positive duration such as 5m", c.CatchUpInterval))
	}
	if c.GitLab.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("gitlab.timeout %s: want a positive duration such as 30s", c.GitLab.Timeout))
	}
	for i, g := range c.Scope.Groups {
		if err := checkPath(g, 1); err != nil {
			errs = append(errs, fmt.Errorf("scope.groups[%d] %q: %v", i, g, err))
		}
	}
	for i, p := range c.Scope.Projects {
		if err := checkPath(p, 2); err != nil {
			errs = append(errs, fmt.Errorf("scope.projects[%d] %q: %v", i, p, err))
		}
	}
	for i, e := range c.Scope.Exclude {
		if _, err := path.Match(strings.ReplaceAll(e, "**", "*"), ""); err != nil || e == "" {
			errs = append(errs, fmt.Errorf("scope.exclude[%d] %q: not a valid glob", i, e))
		}
	}
	if len(c.Containerfiles) == 0 {
		errs = append(errs, errors.New("containerfiles is empty: name at least one file, e.g. Containerfile"))
	}
	for i, f := range c.Containerfiles {
		if f == "" || strings.HasPrefix(f, "/") || strings.Contains(f, "..") {
			errs = append(errs, fmt.Errorf("containerfiles[%d] %q: want a path relative to the repository root", i, f))
		}
	}
	if _, err := deps.ParsePlatforms(c.Platform); err != nil {
		errs = append(errs, fmt.Errorf("platform: %v", err))
	}
	if c.State == "" {
		errs = append(errs, errors.New("state is empty: name the SQLite file (--state, DEPSD_STATE)"))
	}
	if c.Mode != ModeFull && c.Mode != ModeFirstLevel {
		errs = append(errs, fmt.Errorf("mode %q: want %s", c.Mode, strings.Join(Modes(), " or ")))
	}
	if !slices.Contains(webhook.SigningModes(), c.Hooks.Signing) {
		errs = append(errs, fmt.Errorf("hooks.signing %q: want %s", c.Hooks.Signing, strings.Join(webhook.SigningModes(), ", ")))
	}
	if !slices.Contains(webhook.SecretModes(), c.Hooks.SecretMode) {
		errs = append(errs, fmt.Errorf("hooks.secret_mode %q: want %s", c.Hooks.SecretMode, strings.Join(webhook.SecretModes(), " or ")))
	}
	if c.Hooks.Mode != HooksProject && c.Hooks.Mode != HooksGroup {
		errs = append(errs, fmt.Errorf("hooks.mode %q: want %s or %s", c.Hooks.Mode, HooksProject, HooksGroup))
	}
	if c.Hooks.Mode == HooksGroup && len(c.Scope.Groups) == 0 {
		c.warnf("hooks.mode: group has no effect without scope.groups: every project gets a project hook")
	}
	if c.GitLab.CommitStatus != CommitStatusOn && c.GitLab.CommitStatus != CommitStatusOff {
		errs = append(errs, fmt.Errorf("gitlab.commit_status %q: want %s or %s", c.GitLab.CommitStatus, CommitStatusOn, CommitStatusOff))
	}
	if c.GitLab.CommitStatusInterval < time.Second {
		errs = append(errs, fmt.Errorf("gitlab.commit_status_interval %s: want at least 1s, such as 5s", c.GitLab.CommitStatusInterval))
	}
	errs = append(errs, c.checkSigningTokens()...)
	errs = append(errs, c.Images.problems()...)
	errs = append(errs, c.refsProblems()...)
	errs = append(errs, c.Pins.problems()...)
	errs = append(errs, c.premergeProblems()...)
	if c.Hooks.URL != "" {
		if u, err := url.Parse(c.Hooks.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("hooks.url %q: want the http(s) URL GitLab should post to", c.Hooks.URL))
		}
	}
	errs = append(errs, c.uiProblems()...)
	return errs.orNil()
}

// UIAuth is ui.auth as it applies: as set, else gitlab when an OAuth
// application is configured, else none.
func (c Config) UIAuth() string {
	switch {
	case c.UI.Auth != "":
		return c.UI.Auth
	case c.UI.OAuth.ClientID != "":
		return UIAuthGitLab
	}
	return UIAuthNone
}

// uiProblems checks the ui and metrics sections.
func (c Config) uiProblems() Problems {
	var errs Problems
	if a := c.UI.Auth; a != "" && a != UIAuthGitLab && a != UIAuthNone {
		errs = append(errs, fmt.Errorf("ui.auth %q: want %s or %s", a, UIAuthGitLab, UIAuthNone))
	}
	if c.UI.URL != "" {
		if u, err := url.Parse(c.UI.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			errs = append(errs, fmt.Errorf("ui.url %q: want the http(s) address browsers reach depsd at, such as https://depsd.example.com (no path)", c.UI.URL))
		}
	}
	if c.UI.SessionLifetime < time.Minute {
		errs = append(errs, fmt.Errorf("ui.session_lifetime %s: want a duration of at least 1m, such as 12h", c.UI.SessionLifetime))
	}
	if c.UI.VisibilityTTL <= 0 {
		errs = append(errs, fmt.Errorf("ui.visibility_ttl %s: want a positive duration, such as 5m", c.UI.VisibilityTTL))
	}
	if p := c.Metrics.ProjectLabels; p != "on" && p != "off" {
		errs = append(errs, fmt.Errorf("metrics.project_labels %q: want on or off", p))
	}
	return errs
}

// problems checks the images section.
func (i Images) problems() Problems {
	var errs Problems
	if !slices.Contains([]string{VerifyOff, VerifyReport, VerifyEnforce}, i.Verify) {
		errs = append(errs, fmt.Errorf("images.verify %q: want off, report or enforce", i.Verify))
	}
	if i.Timeout <= 0 || i.Timeout > 10*time.Minute {
		errs = append(errs, fmt.Errorf("images.timeout %s: want a positive duration up to 10m, such as 30s", i.Timeout))
	}
	for j, t := range i.Publish {
		if err := verify.CheckTemplate(t); err != nil {
			errs = append(errs, fmt.Errorf("images.publish[%d] %q: %v", j, t, err))
		}
	}
	for j, o := range i.Projects {
		if _, err := path.Match(o.Match, ""); err != nil || o.Match == "" {
			errs = append(errs, fmt.Errorf("images.projects[%d].match %q: want a project path or a glob such as group/*", j, o.Match))
		}
		for k, t := range o.Publish {
			if err := verify.CheckTemplate(t); err != nil {
				errs = append(errs, fmt.Errorf("images.projects[%d].publish[%d] %q: %v", j, k, t, err))
			}
		}
	}
	for j, h := range i.ExternalRegistries {
		if h == "" || strings.ContainsAny(h, "/ ") || strings.Contains(h, "://") {
			errs = append(errs, fmt.Errorf("images.external_registries[%d] %q: want a registry host such as ghcr.io or registry.test:5000, without scheme or path", j, h))
		}
	}
	for j, h := range i.InsecureRegistries {
		if h == "" || strings.ContainsAny(h, "/ ") || strings.Contains(h, "://") {
			errs = append(errs, fmt.Errorf("images.insecure_registries[%d] %q: want a registry host such as registry.test:5000, without scheme or path", j, h))
		}
	}
	return errs
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

// Analysis is how Containerfiles are read: for the platforms of Platform
// (checked by Validate; the default platform if it does not parse).
func (c Config) Analysis() deps.Options {
	p, err := deps.ParsePlatforms(c.Platform)
	if err != nil {
		return deps.Options{}
	}
	return deps.Options{Platforms: p}
}
