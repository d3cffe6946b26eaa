package config

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/gitlab"
	"gitlab.com/depsd/depsd/scan"
)

// This file is the one place where the validated configuration becomes the
// options of the packages that do the work, so `depsd serve` and the other
// commands cannot read the same setting two ways.

// ChainMode is the chain engine's mode for the configured mode.
func (c Config) ChainMode() chain.Mode {
	if c.Mode == ModeFirstLevel {
		return chain.FirstLevel
	}
	return chain.Full
}

// PinRules are pins.mode and its per-project overrides in the chain
// engine's terms.
func (c Config) PinRules() chain.PinRules {
	r := chain.PinRules{Default: chain.PinMode(c.Pins.Mode)}
	for _, o := range c.Pins.Projects {
		r.Overrides = append(r.Overrides, chain.PinOverride{Match: o.Match, Mode: chain.PinMode(o.Mode)})
	}
	return r
}

// GitLabScope is the configured scope in the gitlab package's terms.
func (c Config) GitLabScope() gitlab.Scope {
	return gitlab.Scope{Instance: c.Scope.Instance, Groups: c.Scope.Groups, Projects: c.Scope.Projects, Exclude: c.Scope.Exclude}
}

// InstanceHost is the host of gitlab.url, lower case, which .gitlab-deps
// URLs must name; "" when no URL is configured.
func (c Config) InstanceHost() string {
	return HostOf(c.GitLab.URL)
}

// HostOf is the lower-case host name of a URL, "" when it has none.
func HostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// ScanOptions are the scan package's options for this configuration.
func (c Config) ScanOptions(log *slog.Logger, now func() time.Time) scan.Options {
	return scan.Options{
		Scope: c.GitLabScope(), Containerfiles: c.Containerfiles, Registry: c.Registry, Analysis: c.Analysis(),
		InstanceHost: c.InstanceHost(), Concurrency: c.GitLab.Concurrency, Now: now, Logger: log, Refs: c.RefRules(),
		RESTOnly: c.GitLab.GraphQL != nil && !*c.GitLab.GraphQL,
	}
}

// GitLabClient builds the API client; it fails when the URL or the token
// is missing.
func (c Config) GitLabClient(log *slog.Logger) (*gitlab.Client, error) {
	if err := c.RequireGitLab(); err != nil {
		return nil, err
	}
	retries := c.GitLab.MaxRetries
	if retries == 0 {
		retries = -1 // the gitlab package reads 0 as "default"
	}
	return gitlab.New(gitlab.Config{
		BaseURL:           c.GitLab.URL,
		Token:             c.GitLab.Token,
		Concurrency:       c.GitLab.Concurrency,
		RequestsPerMinute: c.GitLab.RequestsPerMinute,
		MaxRetries:        retries,
		HTTPClient:        &http.Client{Timeout: c.GitLab.Timeout},
		Logger:            log,
	})
}

// PublicURL is depsd's address as people reach it, without a trailing
// slash: ui.url, else the origin of hooks.url (https://depsd.example.com
// for https://depsd.example.com/hooks/gitlab), "" when neither is set.
// The links depsd puts into GitLab (the chains' commit statuses) point
// there.
func (c Config) PublicURL() string {
	if c.UI.URL != "" {
		return strings.TrimSuffix(c.UI.URL, "/")
	}
	u, err := url.Parse(c.Hooks.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// ChainStatuses are the chain engine's commit status options, nil when
// gitlab.commit_status is off; gl posts them. A chain's status links to
// its page under PublicURL, and to nothing without one.
func (c Config) ChainStatuses(gl chain.StatusGitLab) *chain.ChainStatusOptions {
	if c.GitLab.CommitStatus == CommitStatusOff {
		return nil
	}
	o := &chain.ChainStatusOptions{GitLab: gl, Interval: c.GitLab.CommitStatusInterval}
	if base := c.PublicURL(); base != "" {
		o.ChainURL = func(id int64) string { return base + "/chains/" + strconv.FormatInt(id, 10) }
	}
	return o
}
