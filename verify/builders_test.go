package verify_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/internal/realtest"
	"gitlab.com/depsd/depsd/registry"
	"gitlab.com/depsd/depsd/registry/registrytest"
	"gitlab.com/depsd/depsd/verify"
)

// Images built by the real podman build and buildah, with their default
// annotations (and podman's --format docker, which writes none), pushed
// to the real registry: fresh on the base they were built on, stale once
// the base moved. The base is the busybox test image `.ci/podman.sh start`
// imports, pushed to the registry first; each builder has its own storage.
func TestVerifyImagesBuiltByPodmanAndBuildah(t *testing.T) {
	base := os.Getenv("DEPSD_TEST_IMAGE")
	_, perr := exec.LookPath("podman")
	_, berr := exec.LookPath("buildah")
	realtest.Require(t, realtest.Podman, perr == nil && berr == nil && base != "" && os.Getenv("CONTAINER_HOST") != "",
		`needs podman, buildah and eval "$(.ci/podman.sh start)" (CONTAINER_HOST, DEPSD_TEST_IMAGE)`)
	host := registrytest.Start(t)
	busybox := host + "/base/busybox:1"
	run(t, "podman", "--remote", "push", "--tls-verify=false", base, busybox)
	v := verify.New(registry.New(registry.Options{Insecure: []string{host}}), verify.Options{})
	first := currentDigest(t, v, busybox)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello"), []byte("hello from the shop\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	containerfile := filepath.Join(dir, "Containerfile")
	if err := os.WriteFile(containerfile, []byte("FROM "+busybox+"\nCOPY hello /hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	builders := []struct {
		name  string
		build func(ref string)
		by    string
	}{
		{"podman build", func(ref string) {
			p := local(t, "podman")
			run(t, p("build", "--tls-verify=false", "-f", containerfile, "-t", ref, dir)...)
			run(t, p("push", "--tls-verify=false", ref)...)
		}, verify.ByAnnotation},
		{"podman build --format docker", func(ref string) {
			p := local(t, "podman")
			run(t, p("build", "--format", "docker", "--tls-verify=false", "-f", containerfile, "-t", ref, dir)...)
			run(t, p("push", "--tls-verify=false", ref)...)
		}, verify.ByLayers},
		{"buildah", func(ref string) {
			b := local(t, "buildah")
			run(t, b("build", "--tls-verify=false", "-f", containerfile, "-t", ref, dir)...)
			run(t, b("push", "--tls-verify=false", ref)...)
		}, verify.ByAnnotation},
	}
	refs := map[string]string{}
	for i, b := range builders {
		refs[b.name] = host + "/apps/shop" + string(rune('a'+i)) + ":1"
		b.build(refs[b.name])
	}
	check := func(up verify.Upstream, want verify.State, builtOn string) {
		t.Helper()
		for _, b := range builders {
			res := v.Verify(t.Context(), verify.Request{Image: refs[b.name], Platform: amd64, Upstreams: []verify.Upstream{up}})
			got := res.Upstreams[0]
			if got.State != want || got.By != b.by || got.BuiltOn != builtOn {
				t.Errorf("%s: %s by %q on %s (%s); want %s by %q on %s", b.name, got.State, got.By, got.BuiltOn, got.Detail, want, b.by, builtOn)
			}
		}
	}
	check(verify.Upstream{Image: busybox, Current: first}, verify.StateFresh, first)

	// The base moves: a rebuild of it with one more file.
	if err := os.WriteFile(containerfile+".base", []byte("FROM "+busybox+"\nCOPY hello /etc/motd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := local(t, "podman")
	run(t, p("build", "--tls-verify=false", "-f", containerfile+".base", "-t", busybox, dir)...)
	run(t, p("push", "--tls-verify=false", busybox)...)
	second := currentDigest(t, v, busybox)
	if second == first {
		t.Fatal("the base did not move")
	}
	check(verify.Upstream{Image: busybox, Current: second, Earlier: []string{first}}, verify.StateStale, first)
}

// local returns an argument builder for a podman or buildah command on
// its own storage (vfs: no kernel overlay needed) in a temporary
// directory, not the shared service's.
func local(t *testing.T, bin string) func(args ...string) []string {
	root := t.TempDir()
	// podman refuses a run root longer than 50 characters.
	runroot, err := os.MkdirTemp("", "depsd-run")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runroot) })
	return func(args ...string) []string {
		return append([]string{bin, "--root", filepath.Join(root, "root"), "--runroot", runroot, "--storage-driver", "vfs"}, args...)
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), args[0], args[1:]...)
	if args[1] != "--remote" {
		// The local command, not the service CONTAINER_HOST names.
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "CONTAINER_HOST=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// currentDigest is the digest ref's tag points at, as the image watcher
// records it.
func currentDigest(t *testing.T, _ *verify.Verifier, ref string) string {
	t.Helper()
	host, _, _ := strings.Cut(ref, "/")
	d, err := registry.New(registry.Options{Insecure: []string{host}}).Digest(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
