package registry_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/verify"
)

// privateRegistry is a registry that wants user:pass, holding one image
// at ref; it returns the host, the ref and the image's digest.
func privateRegistry(t *testing.T, user, pass string) (host, ref, digest string) {
	t.Helper()
	inner := ggcrregistry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	ref = host + "/apps/shop:1"
	tag, _ := name.NewTag(ref)
	img, _ := random.Image(64, 1)
	if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: user, Password: pass})); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return host, ref, d.String()
}

// Credentials rotated on disk after a refusal are used at the next read:
// the refused transport is not kept.
func TestManifestAfterRotatedCredentials(t *testing.T) {
	host, ref, digest := privateRegistry(t, "depsd", "new-p4ss")
	auth := filepath.Join(t.TempDir(), "auth.json")
	writeAuth(t, auth, host, "depsd:old-p4ss")
	c := registry.New(registry.Options{AuthFile: auth, Insecure: []string{host}})
	_, err := c.Manifest(t.Context(), ref)
	if !errors.Is(err, verify.ErrUnauthorized) {
		t.Fatalf("old password: %v, want ErrUnauthorized", err)
	}
	writeAuth(t, auth, host, "depsd:new-p4ss")
	m, err := c.Manifest(t.Context(), ref)
	if err != nil || m.Digest != digest {
		t.Fatalf("after the rotation: %v, %v; want %s", m.Digest, err, digest)
	}
	if _, err := c.Manifest(t.Context(), host+"/apps/shop:2"); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("missing tag: %v, want ErrNotFound", err)
	}
}

// Without an auth file configured, the credentials come from podman's
// and docker's files in podman's order, the first naming the registry
// winning: a file that exists but does not name it hides nothing.
func TestDefaultCredentialFiles(t *testing.T) {
	host, ref, _ := privateRegistry(t, "depsd", "p4ss")
	home, runtime, dockerDir := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	t.Setenv("DOCKER_CONFIG", dockerDir)
	t.Setenv("REGISTRY_AUTH_FILE", "")
	read := func() error {
		_, err := registry.New(registry.Options{Insecure: []string{host}}).Manifest(t.Context(), ref)
		return err
	}
	if err := read(); !errors.Is(err, verify.ErrUnauthorized) {
		t.Fatalf("no file at all: %v, want ErrUnauthorized", err)
	}
	podman := filepath.Join(runtime, "containers", "auth.json")
	if err := os.MkdirAll(filepath.Dir(podman), 0o700); err != nil {
		t.Fatal(err)
	}
	writeAuth(t, podman, "other.example.com", "someone:else")
	writeAuth(t, filepath.Join(dockerDir, "config.json"), host, "depsd:p4ss")
	if err := read(); err != nil {
		t.Fatalf("podman's auth.json without the registry, docker's config.json with it: %v", err)
	}
	// REGISTRY_AUTH_FILE comes first.
	override := filepath.Join(t.TempDir(), "auth.json")
	writeAuth(t, override, host, "depsd:wrong")
	t.Setenv("REGISTRY_AUTH_FILE", override)
	if err := read(); !errors.Is(err, verify.ErrUnauthorized) {
		t.Errorf("REGISTRY_AUTH_FILE with a wrong password: %v, want it used first (ErrUnauthorized)", err)
	}
}
