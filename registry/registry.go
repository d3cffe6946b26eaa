// Package registry is depsd's only code that talks to container image
// registries: it resolves tags to digests for the scheduler's image
// watcher, and reads manifests and configs for image verification
// (verify.Registry). It speaks the registry v2 API through
// go-containerregistry, including the anonymous token flow of Docker Hub
// style registries, credentials from podman's and docker's auth files, and
// plain HTTP for the registries configured as insecure.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
	// Insecure are registry hosts (host[:port]) spoken to over plain HTTP.
	// 127.0.0.1 and localhost are always allowed plain HTTP, as by
	// go-containerregistry.
	Insecure []string
	// Transport carries the requests; nil: http.DefaultTransport.
	Transport http.RoundTripper
	// UserAgent is sent with each request; empty: "depsd".
	UserAgent string
}

// Client resolves tags to digests. It is safe for concurrent use.
type Client struct {
	opts     []remote.Option
	puller   atomic.Pointer[remote.Puller]
	insecure map[string]bool
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
	opts := []remote.Option{
		remote.WithAuthFromKeychain(keys),
		remote.WithUserAgent(o.UserAgent),
		// The watcher retries failed checks itself, with backoff on its
		// injected clock; retries in here would only sleep on the real one.
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
	}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	c := &Client{opts: opts, insecure: map[string]bool{}}
	for _, h := range o.Insecure {
		c.insecure[strings.ToLower(h)] = true
	}
	c.newPuller()
	return c
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
	opts := append([]remote.Option{remote.WithContext(ctx)}, c.opts...)
	desc, err := remote.Head(tag, opts...)
	if err == nil {
		return desc.Digest.String(), nil
	}
	if ctx.Err() != nil || isUnreachable(err) {
		return "", fmt.Errorf("resolve %s: %w", image, err)
	}
	got, gerr := remote.Get(tag, opts...)
	if gerr != nil {
		return "", fmt.Errorf("resolve %s: %w", image, gerr)
	}
	return got.Digest.String(), nil
}

// isUnreachable reports an error below HTTP (connection refused, DNS, TLS),
// where a GET would fail the same way.
func isUnreachable(err error) bool {
	var ue interface{ Timeout() bool }
	return errors.As(err, &ue)
}
