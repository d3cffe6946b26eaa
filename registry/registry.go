// Package registry is depsd's only code that talks to container image
// registries: it resolves tags to digests for the scheduler's image
// watcher, and reads manifests and configs for image verification
// (verify.Registry). It speaks the registry v2 API through
// go-containerregistry, including the anonymous token flow of Docker Hub
// style registries, credentials from podman's and docker's auth files, and
// plain HTTP for the registries configured as insecure. It reads only the
// registries its Options allow, and never keeps what a registry answered
// in an error (policy.go).
//
// What it holds: the only code that talks to image
// registries (go-containerregistry): a tag's digest for the watcher,
// manifests and configs for verification; credentials from podman's and
// docker's auth files in podman's order; plain HTTP for insecure hosts
// only; the policy a FROM line cannot get around (`registry/policy.go`:
// only the hosts its options allow, no loopback, private or link-local
// address unless allowed, checked at each connection, errors that never
// carry a response body). `registry/registrytest`: Debian's docker-
// registry for tests
package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"gitlab.com/depsd/depsd/verify"
)

// Options configure a Client.
type Options struct {
	// AuthFile is a docker config.json (or podman auth.json) to take
	// credentials from. Empty: the podman and docker default locations
	// ($REGISTRY_AUTH_FILE, ${XDG_RUNTIME_DIR}/containers/auth.json,
	// ~/.config/containers/auth.json, $DOCKER_CONFIG/config.json,
	// ~/.docker/config.json: the first with an entry for the registry), and
	// anonymous access when none has one.
	AuthFile string
	// Insecure are registry hosts (host[:port]) spoken to over plain HTTP
	// (images.insecure_registries); they may also be on loopback, private
	// or link-local addresses. No other host is spoken to over plain HTTP,
	// not even 127.0.0.1 or localhost, nor on a redirect.
	Insecure []string
	// Allowed says whether an image on a registry host (in Host's form)
	// may be read: nil for a refusal, else why not (the message of the
	// refusal, which wraps verify.ErrRefused). It is asked before any
	// request. Nil: every host may be.
	Allowed func(host string) error
	// Internal says whether a host (in Host's form: a registry, its token
	// service, where it redirects) may be on a loopback, private or
	// link-local address besides the Insecure ones, such as the instance's
	// own registry. Nil: none. See the policy in policy.go.
	Internal func(host string) bool
	// Transport, if set, carries the requests the policy let through
	// (tests count them): the connections' addresses are then its to
	// check. Nil: depsd's transport, which checks them.
	Transport http.RoundTripper
	// UserAgent is sent with each request; empty: "depsd".
	UserAgent string
}

// Client resolves tags to digests and reads manifests and configs. It is
// safe for concurrent use.
type Client struct {
	opts     []remote.Option
	puller   atomic.Pointer[remote.Puller]
	insecure map[string]bool
	allowed  func(host string) error
}

// New returns a Client. It reads no file yet: the auth file is read at
// each request, so credentials rotated on disk are picked up.
func New(o Options) *Client {
	var keys authn.Keychain = defaultKeychain{}
	if o.AuthFile != "" {
		keys = fileKeychain{path: o.AuthFile}
	}
	if o.UserAgent == "" {
		o.UserAgent = "depsd"
	}
	c := &Client{insecure: map[string]bool{}, allowed: o.Allowed}
	for _, h := range o.Insecure {
		c.insecure[Host(h)] = true
	}
	c.opts = []remote.Option{
		remote.WithAuthFromKeychain(keys),
		remote.WithUserAgent(o.UserAgent),
		remote.WithTransport(newGuard(c.insecure, o.Internal, o.Transport)),
		// The watcher retries failed checks itself, with backoff on its
		// injected clock; retries in here would only sleep on the real one.
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
	}
	c.newPuller()
	return c
}

// check refuses, before any request, an image on a host that is not
// Allowed.
func (c *Client) check(r name.Registry) error {
	if c.allowed == nil {
		return nil
	}
	if err := c.allowed(Host(r.RegistryStr())); err != nil {
		return &refusedError{msg: err.Error()}
	}
	return nil
}

// Digest returns the digest of the manifest (or index, for multi-platform
// images) that image's tag points at: the digest `podman pull` would
// resolve it to. It asks with HEAD, which registries do not count against
// pull rate limits, and falls back to GET for registries that answer HEAD
// without a Docker-Content-Digest header. A reference pinned by digest is
// an error: it has nothing to resolve.
func (c *Client) Digest(ctx context.Context, image string) (string, error) {
	tag, err := name.NewTag(image, c.nameOpts(image, name.StrictValidation)...)
	if err != nil {
		return "", fmt.Errorf("resolve %s: not a tagged image reference: %w", image, err)
	}
	if err := c.check(tag.Registry); err != nil {
		return "", fmt.Errorf("resolve %s: %w", image, err)
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, c.opts...)
	desc, err := remote.Head(tag, opts...)
	if err == nil {
		return desc.Digest.String(), nil
	}
	if ctx.Err() != nil || isUnreachable(err) {
		return "", fmt.Errorf("resolve %s: %w", image, describe(err))
	}
	got, gerr := remote.Get(tag, opts...)
	if gerr != nil {
		return "", fmt.Errorf("resolve %s: %w", image, describe(gerr))
	}
	return got.Digest.String(), nil
}

// isUnreachable reports an error below HTTP (connection refused, DNS, TLS,
// a refusal of the policy), where a GET would fail the same way.
func isUnreachable(err error) bool {
	var ue interface{ Timeout() bool }
	return errors.As(err, &ue) || errors.Is(err, verify.ErrRefused)
}
