// Package verify decides whether an image a project published was built
// on its upstreams' current images: it reads the image from its registry
// for one platform and judges it fresh, stale or unknown against each
// upstream image its built stage is FROM. The judgement (Decide) is pure;
// the reads go through a Registry, which the registry package implements.
// It declares what it needs, like chain: the store, the chain engine and
// the CLI call it, it calls nothing of theirs.
//
// What it holds: core package: judges a published image
// fresh / stale / unknown for a platform against the upstreams its built
// stage is FROM (pure `Decide`: the base-digest annotation, else the
// config's `diff_ids` prefix, never compressed digests), cached reads,
// which images a project publishes (`Published`), `Checker` (verify, save,
// record the digest history), `Freshness`, `Paginate` (one page of
// freshness rows by a cursor over `Compare`'s stalest-first order, with
// counts per state); declares the `Registry` and `Store` it needs
package verify

import (
	"context"
	"errors"

	"gitlab.com/depsd/depsd/deps"
)

// State is the judgement of one image for one platform.
type State string

// The states of a verification, as the store, the API and the CLI show
// them.
const (
	// StateFresh: built on every upstream's current image.
	StateFresh State = "fresh"
	// StateStale: built on an earlier image of at least one upstream.
	StateStale State = "stale"
	// StateUnknown: cannot be judged (Reason says why). Unknown never
	// blocks a chain.
	StateUnknown State = "unknown"
	// StatePinned: built on an earlier image of an upstream that its
	// Containerfile pins by digest: neither fresh nor stale. A rebuild
	// would build on the pin again; moving the pin is a commit.
	StatePinned State = "pinned"
)

// States are the states a verification can end in, stalest first: a
// pinned image is known not to be on its upstream's current image, an
// unknown one may be.
func States() []State { return []State{StateStale, StatePinned, StateUnknown, StateFresh} }

// Reason says why a verdict is unknown. It is a stable word for the store,
// the API and metrics; Verdict.Detail says it in a sentence.
type Reason string

// The reasons an image cannot be judged. docs/verification.md explains
// each to an operator.
const (
	// ReasonNoBase: no base annotation, and the upstream's layers are not
	// a prefix of the image's: a squashed image, or one built by a tool
	// that does not annotate (BuildKit, kaniko) on a base that is neither
	// current nor recorded.
	ReasonNoBase Reason = "no-base"
	// ReasonScratch: the base annotation is present and empty: the built
	// stage is FROM scratch.
	ReasonScratch Reason = "scratch"
	// ReasonUnrecordedBase: the annotation names a digest that is neither
	// the upstream's current one nor one depsd recorded for it, and the
	// layers do not tell either.
	ReasonUnrecordedBase Reason = "unrecorded-base"
	// ReasonNoPlatform: the image (or the upstream) has no manifest for
	// the platform.
	ReasonNoPlatform Reason = "no-platform"
	// ReasonNotFound: the registry has no such repository, tag or digest.
	ReasonNotFound Reason = "not-found"
	// ReasonUnauthorized: the registry refused the credentials (401, 403).
	ReasonUnauthorized Reason = "unauthorized"
	// ReasonUnreachable: no answer (connection refused, DNS, TLS, a 5xx,
	// or no answer within the verification's timeout).
	ReasonUnreachable Reason = "unreachable"
	// ReasonInvalid: the registry answered with a manifest or config that
	// cannot be parsed.
	ReasonInvalid Reason = "invalid"
	// ReasonRefused: depsd does not read that registry: its host is
	// neither the instance's registry nor listed by the operator
	// (images.external_registries), or it is on a loopback, private or
	// link-local address, or speaks plain HTTP, without being listed in
	// images.insecure_registries. Nothing was sent to it.
	ReasonRefused Reason = "refused-host"
)

// How a verdict was reached.
const (
	ByAnnotation = "annotation" // org.opencontainers.image.base.digest
	ByLayers     = "layers"     // the config's rootfs.diff_ids
)

// Verdict is the judgement of one image for one platform against one
// upstream image.
type Verdict struct {
	Upstream string `json:"upstream"` // the upstream's image reference
	State    State  `json:"state"`
	Reason   Reason `json:"reason,omitempty"` // unknown only
	// By says how a fresh or stale verdict was reached: ByAnnotation or
	// ByLayers.
	By string `json:"by,omitempty"`
	// BuiltOn is the upstream digest the image was built on, when known:
	// the current one (fresh) or the earlier one (stale), as recorded for
	// the upstream (an index or a manifest digest).
	BuiltOn string `json:"built_on,omitempty"`
	// Current is the upstream's current digest.
	Current string `json:"current,omitempty"`
	// Pin is the digest the Containerfile pins the upstream to, when it
	// does (FROM …@sha256:…, directly or through an ARG default).
	Pin string `json:"pin,omitempty"`
	// Detail says the verdict in a sentence for an operator.
	Detail string `json:"detail"`
}

// Result is the verification of one image for one platform.
type Result struct {
	Image    string        `json:"image"`
	Platform deps.Platform `json:"platform"`
	// Digest is what the reference resolved to (an index or a manifest);
	// Manifest is the platform's manifest digest (equal to Digest for a
	// single-platform image). Both empty when the image could not be read.
	Digest   string `json:"digest,omitempty"`
	Manifest string `json:"manifest,omitempty"`
	// State is stale when any upstream is stale, fresh when all are fresh,
	// unknown otherwise.
	State State `json:"state"`
	// Reason and Detail are set when the image itself could not be read
	// (then Upstreams are all unknown with the same reason), and Detail
	// otherwise sums up the verdicts that decided State.
	Reason    Reason    `json:"reason,omitempty"`
	Detail    string    `json:"detail"`
	Upstreams []Verdict `json:"upstreams"`
}

// Manifest is a manifest or an index as a registry served it.
type Manifest struct {
	MediaType string
	Digest    string // sha256:… of Body
	Body      []byte
}

// Registry reads images. The registry package's *Client implements it
// with go-containerregistry. Calls may be concurrent. Each call is one
// HTTP request, plus what a registry's auth handshake needs the first time
// a repository is read.
type Registry interface {
	// Manifest returns the manifest or index ref names (host/path:tag or
	// host/path@sha256:…). Errors wrap ErrNotFound when the registry says
	// the repository, tag or digest does not exist, ErrUnauthorized when
	// it refuses the credentials, ErrRefused when depsd does not read that
	// registry; any other error counts as unreachable.
	Manifest(ctx context.Context, ref string) (Manifest, error)
	// Blob returns the blob digest of repository (host/path), checked
	// against its digest, with the same errors as Manifest.
	Blob(ctx context.Context, repository, digest string) ([]byte, error)
}

// Errors a Registry wraps, checked with errors.Is.
var (
	ErrNotFound     = errors.New("not found")
	ErrUnauthorized = errors.New("unauthorized")
	// ErrRefused: the read was refused before anything was sent to that
	// host (or address): see ReasonRefused.
	ErrRefused = errors.New("refused")
)

// Request asks for the verification of one image for one platform.
type Request struct {
	Image     string // host/path:tag (or @digest)
	Platform  deps.Platform
	Upstreams []Upstream
}

// Upstream is one upstream image the built stage is FROM, with what depsd
// knows of it.
type Upstream struct {
	Image string // host/path:tag
	// Current is its current digest (an index or a manifest digest), as
	// depsd last recorded it. Empty: the tag is resolved at each
	// verification (one more request).
	Current string
	// Earlier are digests it had before (index or manifest digests),
	// newest first: an image built on one of them is stale.
	Earlier []string
	// Pin is the digest the image's Containerfile pins this upstream to
	// (empty when not pinned): an image built on it while the upstream
	// moved on is pinned, not stale.
	Pin string
}
