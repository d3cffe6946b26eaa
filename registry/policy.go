package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"gitlab.com/depsd/depsd/verify"
)

// Which registries depsd reads. The images it reads are named by FROM
// lines, which any developer of a project in scope writes: without a
// policy, a FROM line would make depsd send requests to any host and port
// (an internal service, a cloud metadata endpoint) and show what came
// back. So a Client
//
//   - reads an image only on a host Options.Allowed accepts, before any
//     request is made;
//   - connects to a loopback, private, link-local (or otherwise
//     non-public) address only for the hosts listed in Options.Insecure or
//     accepted by Options.Internal: checked on the address each connection
//     is made to, after DNS, so a name that resolves (or is rebound) to
//     such an address is refused too, and so is a redirect or a token
//     service there;
//   - speaks plain HTTP only to the hosts of Options.Insecure, on
//     redirects too (go-containerregistry would also for localhost and
//     RFC 1918 names);
//   - never keeps a response body in an error: a registry's answer is
//     told by its status and its registry error codes (errors.go).

// Host is a registry host as an image reference names it, in the form
// Options.Allowed and Options.Internal are asked about: lower case, with
// the port when the reference has one, Docker Hub's aliases (docker.io,
// registry-1.docker.io) as index.docker.io.
func Host(registry string) string {
	h := strings.ToLower(strings.TrimSpace(registry))
	if h == "docker.io" || h == "registry-1.docker.io" {
		return name.DefaultRegistry
	}
	if r, err := name.NewRegistry(h, name.WeakValidation); err == nil {
		return r.RegistryStr()
	}
	return h
}

// ImageHost is the registry host of an image reference, in Host's form
// (debian:12 is on index.docker.io).
func ImageHost(image string) (string, error) {
	r, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return "", err
	}
	return Host(r.Context().RegistryStr()), nil
}

// refusedError is a read refused by the policy. It wraps
// verify.ErrRefused; its message names the host and why, nothing the host
// sent (nothing was sent to it).
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return "refused: " + e.msg }
func (e *refusedError) Unwrap() error { return verify.ErrRefused }

// refused says why a read was refused.
func refused(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// InternalAddress reports whether connecting to ip reaches something a
// registry on the internet is not: loopback, private (RFC 1918, RFC 4193),
// link-local (169.254/16 with the cloud metadata endpoints, fe80::/10),
// unspecified (0.0.0.0 connects to this host), multicast, shared address
// space (100.64/10), benchmarking and reserved ranges, and the IPv4
// addresses embedded in IPv4-mapped, NAT64 and 6to4 IPv6 addresses.
func InternalAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.Is6() {
		for _, p := range embeddingV4 {
			if p.Contains(ip) {
				b := ip.As16()
				var v4 [4]byte
				if p.Bits() == 16 { // 6to4: 2002:AABB:CCDD::/48
					copy(v4[:], b[2:6])
				} else { // NAT64: the last 32 bits
					copy(v4[:], b[12:16])
				}
				return InternalAddress(netip.AddrFrom4(v4))
			}
		}
	}
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

var (
	nonPublic = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
		netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (carrier-grade NAT)
		netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
		netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
		netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
		netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
		netip.MustParsePrefix("100::/64"),       // discard-only
		netip.MustParsePrefix("2001:db8::/32"),  // documentation
		netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated)
		netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
		netip.MustParsePrefix("2001::/32"),      // Teredo: an IPv4 address in disguise
		netip.MustParsePrefix("2001:10::/28"),   // ORCHID
		netip.MustParsePrefix("2001:20::/28"),   // ORCHIDv2
	}
	// embeddingV4 are IPv6 ranges that carry an IPv4 address a gateway
	// connects to.
	embeddingV4 = []netip.Prefix{
		netip.MustParsePrefix("64:ff9b::/96"), // NAT64
		netip.MustParsePrefix("2002::/16"),    // 6to4
	}
)

// guard is the client's HTTP transport: the policy's address and scheme
// rules on every connection and request, redirects and token services
// included.
type guard struct {
	base     http.RoundTripper
	insecure map[string]bool
	internal func(host string) bool // nil: none besides insecure
	// proxies are the proxies the environment names, reached whatever
	// their address (the operator chose them).
	proxies sync.Map
}

// newGuard returns the guard; base, if set, carries the requests instead
// of a transport of its own that checks each connection's address.
func newGuard(insecure map[string]bool, internal func(string) bool, base http.RoundTripper) *guard {
	g := &guard{insecure: insecure, internal: internal, base: base}
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = g.dial
		t.Proxy = g.proxy
		g.base = t
	}
	return g
}

// candidates are the names hostport (host:port, as a connection or a URL
// names it) may be listed under: with its port, and without it when the
// port is a scheme's default, as an image reference writes it.
func candidates(hostport, defaultPort string) []string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.Trim(hostport, "[]"), defaultPort
	}
	host = strings.ToLower(host)
	out := []string{net.JoinHostPort(host, port)}
	if port == "443" || port == "80" || port == "" {
		if strings.Contains(host, ":") {
			out = append(out, "["+host+"]")
		} else {
			out = append(out, host)
		}
	}
	for i, c := range out {
		out[i] = Host(c)
	}
	return out
}

// mayBeInternal reports whether hostport may be on a non-public address.
func (g *guard) mayBeInternal(hostport, defaultPort string) bool {
	for _, c := range candidates(hostport, defaultPort) {
		if g.insecure[c] || (g.internal != nil && g.internal(c)) {
			return true
		}
		if _, ok := g.proxies.Load(c); ok {
			return true
		}
	}
	return false
}

// plainHTTP reports whether hostport may be spoken to over plain HTTP.
func (g *guard) plainHTTP(hostport string) bool {
	for _, c := range candidates(hostport, "80") {
		if g.insecure[c] {
			return true
		}
	}
	return false
}

// RoundTrip refuses plain HTTP to a host not listed as insecure: a
// request of go-containerregistry's (it tries plain HTTP for localhost and
// RFC 1918 names by itself), or a redirect from https.
func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !g.plainHTTP(req.URL.Host) {
		return nil, refused("plain HTTP to %s: depsd speaks plain HTTP only to the registries listed in images.insecure_registries", req.URL.Host)
	}
	return g.base.RoundTrip(req)
}

// dial connects to addr, refusing a non-public address unless addr may be
// internal: the check is on the address connected to, after DNS.
func (g *guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !g.mayBeInternal(addr, "") {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return refused("%s: cannot tell the address %s", addr, address)
			}
			if InternalAddress(ap.Addr()) {
				return refused("%s is at %s, a loopback, private or link-local address: depsd reads a registry there only when images.insecure_registries lists it", addr, ap.Addr())
			}
			return nil
		}
	}
	return d.DialContext(ctx, network, addr)
}

// proxy is the environment's proxy for req (HTTPS_PROXY, NO_PROXY...).
// Through a proxy, the proxy resolves the target's name: the target is
// then looked up here too and refused on a non-public address (the proxy
// might resolve it otherwise; a proxy that must not reach internal
// addresses should refuse them itself).
func (g *guard) proxy(req *http.Request) (*url.URL, error) {
	u, err := http.ProxyFromEnvironment(req)
	if err != nil || u == nil {
		return u, err
	}
	def := "443"
	if req.URL.Scheme == "http" {
		def = "80"
	}
	if !g.mayBeInternal(req.URL.Host, def) {
		host := req.URL.Hostname()
		addrs, err := net.DefaultResolver.LookupNetIP(req.Context(), "ip", host)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if InternalAddress(a) {
				return nil, refused("%s is at %s, a loopback, private or link-local address: depsd reads a registry there only when images.insecure_registries lists it", req.URL.Host, a)
			}
		}
	}
	pdef := "80"
	if u.Scheme == "https" {
		pdef = "443"
	}
	for _, c := range candidates(u.Host, pdef) {
		g.proxies.Store(c, true)
	}
	return u, nil
}

// maxDetail bounds what an error says: a registry's error codes and a
// request's URL are short, and nothing longer belongs in a verdict.
const maxDetail = 512

// readError is a read's error as depsd keeps and shows it: its message
// says what happened without what the registry sent; Unwrap gives the
// cause, for errors.Is and errors.As.
type readError struct {
	msg   string
	cause error
}

func (e *readError) Error() string { return e.msg }
func (e *readError) Unwrap() error { return e.cause }

// describe turns an error of go-containerregistry into one that never
// carries a response body (its transport.Error holds up to 64 KiB of one,
// which would be stored in verdicts and image checks, shown by depsd
// freshness, depsd schedules, the API and the dashboard, and logged): a
// registry's answer is told by its status and the registry error codes it
// gave (a fixed list), a URL without its query (a redirect to storage
// carries a signature there), and the whole is clipped.
func describe(err error) error {
	if err == nil {
		return nil
	}
	var re *refusedError
	if errors.As(err, &re) {
		return &readError{msg: re.Error(), cause: err}
	}
	var te *transport.Error
	if errors.As(err, &te) {
		msg := fmt.Sprintf("the registry answered %d %s", te.StatusCode, http.StatusText(te.StatusCode))
		var codes []string
		for _, d := range te.Errors {
			if knownCodes[d.Code] {
				codes = append(codes, string(d.Code))
			}
		}
		if len(codes) > 0 {
			msg += " (" + strings.Join(codes, ", ") + ")"
		}
		return &readError{msg: msg, cause: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		u := ue.URL
		if p, perr := url.Parse(u); perr == nil {
			p.RawQuery, p.Fragment, p.User = "", "", nil
			u = p.String()
		} else {
			u, _, _ = strings.Cut(u, "?")
		}
		return &readError{msg: clip(fmt.Sprintf("%s %q: %v", ue.Op, u, ue.Err)), cause: err}
	}
	return &readError{msg: clip(err.Error()), cause: err}
}

// clip bounds s to maxDetail bytes.
func clip(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	return s[:maxDetail] + "…"
}

// knownCodes are the registry error codes of the distribution spec: only
// these are repeated from an answer.
var knownCodes = map[transport.ErrorCode]bool{
	transport.BlobUnknownErrorCode: true, transport.BlobUploadInvalidErrorCode: true, transport.BlobUploadUnknownErrorCode: true,
	transport.DigestInvalidErrorCode: true, transport.ManifestBlobUnknownErrorCode: true, transport.ManifestInvalidErrorCode: true,
	transport.ManifestUnknownErrorCode: true, transport.ManifestUnverifiedErrorCode: true, transport.NameInvalidErrorCode: true,
	transport.NameUnknownErrorCode: true, transport.SizeInvalidErrorCode: true, transport.TagInvalidErrorCode: true,
	transport.UnauthorizedErrorCode: true, transport.DeniedErrorCode: true, transport.UnsupportedErrorCode: true,
	transport.TooManyRequestsErrorCode: true, transport.UnknownErrorCode: true, transport.UnavailableErrorCode: true,
}
