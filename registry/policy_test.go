package registry_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/verify"
)

// secretAnswer is what the internal services of these tests answer.
const secretAnswer = "the-internal-service-SECRET"

// service is a loopback server standing in for something only depsd's
// host can reach: it counts the connections made to it (a request, or
// only a TLS handshake) and the requests it answers, each with a status
// and secretAnswer.
type service struct {
	host            string
	conns, requests atomic.Int64
}

func internalService(t *testing.T, status int) *service {
	t.Helper()
	s := &service{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		w.WriteHeader(status)
		io.WriteString(w, secretAnswer)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.host = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// reads tries every way a Client reads an image on host.
func reads(c *registry.Client, t *testing.T, host string) map[string]error {
	return map[string]error{
		"Digest": func() error { _, err := c.Digest(t.Context(), host+"/internal/admin:1"); return err }(),
		"Manifest": func() error {
			_, err := c.Manifest(t.Context(), host+"/internal/admin:1")
			return err
		}(),
		"Blob": func() error {
			_, err := c.Blob(t.Context(), host+"/internal/admin", "sha256:"+strings.Repeat("0", 64))
			return err
		}(),
	}
}

// A host Options.Allowed refuses is never sent a request, even one that
// may be spoken to (listed as insecure): the refusal says why.
func TestHostNotAllowedIsNeverAsked(t *testing.T) {
	svc := internalService(t, http.StatusOK)
	host := svc.host
	c := registry.New(registry.Options{Insecure: []string{host},
		Allowed: func(h string) error {
			if h == "registry.example.com" {
				return nil
			}
			return fmt.Errorf("%s is not the instance's registry", h)
		}})
	for what, err := range reads(c, t, host) {
		if !errors.Is(err, verify.ErrRefused) || !strings.Contains(err.Error(), "is not the instance's registry") {
			t.Errorf("%s: %v, want refused, saying why", what, err)
		}
	}
	if n := svc.conns.Load(); n != 0 {
		t.Errorf("the refused host got %d connections", n)
	}
}

// A registry on a loopback address (by address or by a name resolving to
// it) is refused at connection time unless listed as insecure or internal;
// nothing reaches it, not even over plain HTTP, which go-containerregistry
// tries by itself for such names.
func TestInternalAddressRefusedAtConnection(t *testing.T) {
	svc := internalService(t, http.StatusOK)
	host := svc.host
	_, port, _ := strings.Cut(host, ":")
	for _, h := range []string{host, "localhost:" + port} {
		for what, err := range reads(registry.New(registry.Options{}), t, h) {
			if !errors.Is(err, verify.ErrRefused) {
				t.Errorf("%s on %s: %v, want refused", what, h, err)
			}
		}
	}
	if n := svc.conns.Load(); n != 0 {
		t.Errorf("the internal service got %d connections", n)
	}
	// Internal but not insecure: reached over https only (which this
	// plain-HTTP server cannot speak: no request gets through).
	c := registry.New(registry.Options{Internal: func(h string) bool { return h == host }})
	for what, err := range reads(c, t, host) {
		if err == nil || !strings.Contains(err.Error(), "plain HTTP") {
			t.Errorf("%s on an internal host that is not insecure: %v, want plain HTTP refused", what, err)
		}
	}
	if n := svc.requests.Load(); n != 0 {
		t.Errorf("the internal service got %d plain-HTTP requests", n)
	}
}

// A listed registry that redirects to an unlisted internal address, or to
// plain HTTP, does not take depsd there.
func TestRedirectToRefusedHostNotFollowed(t *testing.T) {
	svc := internalService(t, http.StatusOK)
	target := svc.host
	inner := ggcrregistry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/manifests/") || strings.Contains(r.URL.Path, "/blobs/") {
			http.Redirect(w, r, "http://"+target+r.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for what, err := range reads(registry.New(registry.Options{Insecure: []string{host}}), t, host) {
		if !errors.Is(err, verify.ErrRefused) {
			t.Errorf("%s redirected to %s: %v, want refused", what, target, err)
		}
	}
	if n := svc.conns.Load(); n != 0 {
		t.Errorf("the redirect's target got %d connections", n)
	}
}

// What a registry answers is never kept in an error: a status, and the
// registry error codes of the spec.
func TestErrorsDoNotCarryTheAnswer(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusNotFound, http.StatusForbidden, http.StatusTeapot} {
		host := internalService(t, status).host
		for what, err := range reads(registry.New(registry.Options{Insecure: []string{host}}), t, host) {
			if err == nil || strings.Contains(err.Error(), secretAnswer) || !strings.Contains(err.Error(), fmt.Sprint(status)) {
				t.Errorf("%s answered %d: %v; want the status, not the body", what, status, err)
			}
		}
	}
	// A registry's own errors: the code is kept, the message is not.
	inner := ggcrregistry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/manifests/") {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":%q},{"code":%q}]}`, secretAnswer, secretAnswer)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	_, err := registry.New(registry.Options{Insecure: []string{host}}).Manifest(t.Context(), host+"/a/b:1")
	if !errors.Is(err, verify.ErrNotFound) || !strings.Contains(err.Error(), "MANIFEST_UNKNOWN") || strings.Contains(err.Error(), secretAnswer) {
		t.Errorf("registry error: %v; want not found with MANIFEST_UNKNOWN and nothing else", err)
	}
}

// Listed registries work as before: a plain-HTTP registry listed as
// insecure, read by its own name (the port included).
func TestListedRegistryIsRead(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	tag, _ := name.NewTag(host + "/apps/shop:1")
	img, _ := random.Image(64, 1)
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	c := registry.New(registry.Options{Insecure: []string{host}, Allowed: func(h string) error {
		if h != host {
			return errors.New("not listed")
		}
		return nil
	}})
	if got, err := c.Digest(t.Context(), tag.String()); err != nil || got != want.String() {
		t.Errorf("Digest = %s, %v; want %s", got, err, want)
	}
}

func TestInternalAddress(t *testing.T) {
	for addr, internal := range map[string]bool{
		"127.0.0.1": true, "127.3.2.1": true, "::1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true,
		"169.254.169.254": true, "fe80::1": true, "fd00::1": true, "0.0.0.0": true, "::": true, "100.64.0.1": true,
		"::ffff:127.0.0.1": true, "::ffff:169.254.169.254": true, "64:ff9b::a9fe:a9fe": true, "2002:7f00:1::1": true,
		"224.0.0.1": true, "255.255.255.255": true, "198.18.0.1": true,
		"93.184.216.34": false, "2606:4700::1111": false, "64:ff9b::5db8:d822": false, "8.8.8.8": false,
	} {
		if got := registry.InternalAddress(netip.MustParseAddr(addr)); got != internal {
			t.Errorf("InternalAddress(%s) = %v, want %v", addr, got, internal)
		}
	}
}

func TestHost(t *testing.T) {
	for in, want := range map[string]string{
		"docker.io": "index.docker.io", "Registry-1.Docker.io": "index.docker.io", "index.docker.io": "index.docker.io",
		"Registry.Example.com:5000": "registry.example.com:5000", "127.0.0.1:5000": "127.0.0.1:5000", "ghcr.io": "ghcr.io",
	} {
		if got := registry.Host(in); got != want {
			t.Errorf("Host(%q) = %q, want %q", in, got, want)
		}
	}
}
