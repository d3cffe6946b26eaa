package registry_test

import (
	"encoding/base64"
	"fmt"
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
	"gitlab.com/depsd/depsd/registry/registrytest"
)

// Against the real registry: the digest is the pushed manifest's, and it
// follows the tag when a new image is pushed under it.
func TestDigestFollowsTag(t *testing.T) {
	host := registrytest.Start(t)
	ref := host + "/base/debian:12"
	c := registry.New(registry.Options{AuthFile: filepath.Join(t.TempDir(), "none.json"), Insecure: []string{host}})
	for range 2 {
		want := registrytest.Push(t, ref)
		got, err := registry.New(registry.Options{Insecure: []string{host}}).Digest(t.Context(), ref)
		if err != nil || got != want {
			t.Fatalf("Digest(%s) = %q, %v; want %s", ref, got, err, want)
		}
		if _, err := c.Digest(t.Context(), ref); err == nil || !strings.Contains(err.Error(), "registry auth file") {
			t.Errorf("missing auth file: err = %v, want it named", err)
		}
	}
	if _, err := registry.New(registry.Options{Insecure: []string{host}}).Digest(t.Context(), host+"/base/debian:nope"); err == nil {
		t.Error("unknown tag resolved")
	}
}

func TestUnreachableRegistry(t *testing.T) {
	addr := registrytest.ClosedAddr(t)
	_, err := registry.New(registry.Options{Insecure: []string{addr}}).Digest(t.Context(), addr+"/base/debian:12")
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), addr+"/base/debian:12") {
		t.Errorf("err = %v, want connection refused naming the image", err)
	}
}

// Credentials come from the configured auth file, and the secret never
// shows in an error.
func TestAuthFile(t *testing.T) {
	const user, pass = "depsd", "s3cret-p4ss"
	inner := ggcrregistry.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref := host + "/vendor/runtime:2"

	// Push with the credentials given directly.
	tag, _ := name.NewTag(ref)
	img, _ := random.Image(128, 1)
	if err := remote.Write(tag, img, remote.WithAuth(&authn.Basic{Username: user, Password: pass})); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()

	dir := t.TempDir()
	good := filepath.Join(dir, "auth.json")
	writeAuth(t, good, host, user+":"+pass)
	got, err := registry.New(registry.Options{AuthFile: good, Insecure: []string{host}}).Digest(t.Context(), ref)
	if err != nil || got != want.String() {
		t.Fatalf("with auth file: %q, %v; want %s", got, err, want)
	}

	bad := filepath.Join(dir, "bad.json")
	writeAuth(t, bad, host, user+":wrong-"+pass)
	_, err = registry.New(registry.Options{AuthFile: bad, Insecure: []string{host}}).Digest(t.Context(), ref)
	if err == nil {
		t.Fatal("wrong password accepted")
	}
	if strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(user+":wrong-"+pass))) {
		t.Errorf("error leaks the secret: %v", err)
	}
}

func writeAuth(t *testing.T, path, host, userpass string) {
	t.Helper()
	data := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(userpass)))
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
