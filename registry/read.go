package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"gitlab.com/depsd/depsd/verify"
)

// maxBlob caps a config blob read for verification: configs are a few
// KiB, and a registry answering with more is not serving a config.
const maxBlob = 4 << 20

var _ verify.Registry = (*Client)(nil)

// Manifest implements verify.Registry: one GET of the manifest or index
// ref names.
func (c *Client) Manifest(ctx context.Context, ref string) (verify.Manifest, error) {
	r, err := name.ParseReference(ref, c.nameOpts(ref, name.StrictValidation)...)
	if err != nil {
		return verify.Manifest{}, fmt.Errorf("read %s: not an image reference: %w", ref, err)
	}
	if err := c.check(r.Context().Registry); err != nil {
		return verify.Manifest{}, fmt.Errorf("read %s: %w", ref, err)
	}
	d, err := c.puller.Load().Get(ctx, r)
	if err != nil {
		return verify.Manifest{}, fmt.Errorf("read %s: %w", ref, c.classify(err))
	}
	return verify.Manifest{MediaType: string(d.MediaType), Digest: d.Digest.String(), Body: d.Manifest}, nil
}

// Blob implements verify.Registry: one GET of the blob, checked against
// its digest.
func (c *Client) Blob(ctx context.Context, repository, digest string) ([]byte, error) {
	ref := repository + "@" + digest
	d, err := name.NewDigest(ref, c.nameOpts(ref, name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("read %s: not a blob reference: %w", ref, err)
	}
	if err := c.check(d.Registry); err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	l, err := c.puller.Load().Layer(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, c.classify(err))
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, c.classify(err))
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, maxBlob+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, c.classify(err))
	}
	if len(body) > maxBlob {
		return nil, fmt.Errorf("read %s: larger than %d bytes: not a config", ref, maxBlob)
	}
	// Reading to the end checked the digest; a short read did not.
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, describe(err))
	}
	return body, nil
}

// newPuller starts afresh: the puller keeps each repository's
// authenticated transport, so the auth handshake (a /v2/ ping, the
// credentials, a token) happens once per repository, not at each read.
func (c *Client) newPuller() {
	p, _ := remote.NewPuller(c.opts...) // fails only on invalid options
	c.puller.Store(p)
}

// classify wraps the registry's answers verify tells apart, described
// without what the registry sent (describe). A refusal of the
// credentials drops the authenticated transports, so the next read takes
// them from the auth files again (they may have been rotated).
func (c *Client) classify(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", verify.ErrNotFound, describe(err))
		case http.StatusUnauthorized, http.StatusForbidden:
			c.newPuller()
			return fmt.Errorf("%w: %w", verify.ErrUnauthorized, describe(err))
		}
	}
	return describe(err)
}

// nameOpts adds name.Insecure for a reference to a registry configured as
// insecure.
func (c *Client) nameOpts(ref string, opts ...name.Option) []name.Option {
	host, _, _ := strings.Cut(ref, "/")
	if c.insecure[Host(host)] {
		opts = append(opts, name.Insecure)
	}
	return opts
}
