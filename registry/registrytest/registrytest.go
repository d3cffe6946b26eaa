// Package registrytest runs a real image registry (the Debian package
// docker-registry, i.e. distribution 2.x) on 127.0.0.1 for integration
// tests, and pushes images to it with go-containerregistry.
package registrytest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"gitlab.com/depsd/depsd/internal/realtest"
)

// Binary is where Debian installs the registry.
const Binary = "docker-registry"

// Start runs a registry with its storage in a temporary directory until
// the test ends, and returns its host:port. It skips the test when the
// registry is not installed (apt-get install docker-registry), or fails
// it where the registry is expected (realtest.Require: CI=true, ...).
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	realtest.Require(t, realtest.Registry, err == nil, fmt.Sprintf("apt-get install -y docker-registry: %v", err))
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "storage"), addr)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("registry output:\n%s", out.String())
		}
	})
	// Wait for it to answer; the process start is the only real wait here.
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("registry exited: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry on %s did not answer within 15s: %v\n%s", addr, err, out.String())
		}
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// ClosedAddr returns a 127.0.0.1 address nothing listens on: an
// unreachable registry, whose connections are refused. Its port stays
// bound to a socket that never listens until t ends: a port merely free a
// moment ago was once taken by another test package's server running
// beside this one, which answered 401 instead of refusing.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// Push writes a new random single-layer image under ref (host/path:tag)
// and returns its manifest digest.
func Push(t testing.TB, ref string) string {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return digest(t, img)
}

func digest(t testing.TB, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
