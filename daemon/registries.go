package daemon

import (
	"fmt"
	"net/url"
	"sync/atomic"

	"gitlab.com/depsd/depsd/buildinfo"
	"gitlab.com/depsd/depsd/config"
	"gitlab.com/depsd/depsd/registry"
)

// registryPolicy decides which registries depsd reads, for verification
// and the image watcher alike (registry.Options): the upstreams FROM lines
// name and the external images watched are chosen by developers of the
// projects in scope, so only these hosts are read:
//
//   - the instance's registry: the hosts of the projects' registry
//     prefixes (as GitLab reports them, renewed with each graph loaded)
//     and the configured registry;
//   - images.external_registries, images.insecure_registries, and the
//     hosts of watch entries, which the operator wrote.
//
// A registry is reached on a loopback, private or link-local address only
// when it is listed in images.insecure_registries, or is the instance's
// own (its host set by GitLab's administrator, not by a developer); so is
// GitLab's host, which GitLab's registry names as its token service.
type registryPolicy struct {
	listed  map[string]bool // the operator's lists
	trusted map[string]bool // the configured registry
	gitlab  string          // GitLab's host (internal only, not an image host)
	// instance are the hosts of the projects' registry prefixes.
	instance atomic.Pointer[map[string]bool]
}

func newRegistryPolicy(cfg config.Config) *registryPolicy {
	p := &registryPolicy{listed: map[string]bool{}, trusted: map[string]bool{}}
	for _, h := range append(append([]string{}, cfg.Images.ExternalRegistries...), cfg.Images.InsecureRegistries...) {
		p.listed[registry.Host(h)] = true
	}
	for _, w := range cfg.Scheduler.Watch {
		if h := imageHost(w.Image); h != "" {
			p.listed[h] = true
		}
	}
	if cfg.Registry != "" {
		p.trusted[registry.Host(cfg.Registry)] = true
	}
	if u, err := url.Parse(cfg.GitLab.URL); err == nil && u.Host != "" {
		p.gitlab = registry.Host(u.Host)
	}
	return p
}

// imageHost is the registry host of an image reference, in registry.Host's
// form ("" when it does not parse).
func imageHost(image string) string {
	r, err := registry.ImageHost(image)
	if err != nil {
		return ""
	}
	return r
}

// registriesChanged takes the hosts of the projects' registry prefixes
// (store.RegistryHosts) after a graph was loaded.
func (p *registryPolicy) registriesChanged(hosts []string) {
	m := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		m[registry.Host(h)] = true
	}
	p.instance.Store(&m)
}

func (p *registryPolicy) isInstance(host string) bool {
	m := p.instance.Load()
	return p.trusted[host] || (m != nil && (*m)[host])
}

// allowed implements registry.Options.Allowed.
func (p *registryPolicy) allowed(host string) error {
	if p.listed[host] || p.isInstance(host) {
		return nil
	}
	return fmt.Errorf("%s is neither this instance's registry nor listed in images.external_registries (or insecure_registries, or watch)", host)
}

// internal implements registry.Options.Internal.
func (p *registryPolicy) internal(host string) bool {
	return p.isInstance(host) || (p.gitlab != "" && host == p.gitlab)
}

// registryOptions are the options of every registry client the daemon
// makes: the verifier's and the image watcher's read the same registries
// the same way.
func (d *Daemon) registryOptions() registry.Options {
	cfg := d.opts.Config
	insecure := append([]string{}, cfg.Images.InsecureRegistries...)
	// GitLab's registry names GitLab as its token service: over plain
	// HTTP when the operator configured GitLab so.
	if u, err := url.Parse(cfg.GitLab.URL); err == nil && u.Scheme == "http" && u.Host != "" {
		insecure = append(insecure, u.Host)
	}
	return registry.Options{AuthFile: cfg.Scheduler.RegistryAuthFile, Insecure: insecure,
		Allowed: d.registries.allowed, Internal: d.registries.internal, UserAgent: buildinfo.UserAgent()}
}
