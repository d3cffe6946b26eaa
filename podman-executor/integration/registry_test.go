package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containers/podman/v4/pkg/bindings"
	"github.com/containers/podman/v4/pkg/bindings/containers"
	"github.com/containers/podman/v4/pkg/bindings/images"
	"golang.org/x/crypto/bcrypt"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// registryBinary is Debian's docker-registry (distribution 2.8).
const registryBinary = "/usr/bin/docker-registry"

// registry is a local image registry with htpasswd authentication, on
// plain HTTP at 127.0.0.1, holding one image under several tags.
type registry struct {
	host     string // 127.0.0.1:PORT
	user     string
	password string
	marker   string // REGISTRY_MARKER in the pushed image's environment
	conn     context.Context
}

// ref is the image under tag in the test repository.
func (g *registry) ref(tag string) string { return g.host + "/test/busybox:" + tag }

// dockerAuthConfig is a docker config.json with this registry's credentials.
func (g *registry) dockerAuthConfig() string {
	b64 := base64.StdEncoding.EncodeToString([]byte(g.user + ":" + g.password))
	return `{"auths":{"` + g.host + `":{"auth":"` + b64 + `"}}}`
}

// startRegistry runs docker-registry for the test's lifetime and pushes a
// copy of the busybox test image that differs from it only by an ENV line
// (so a job can tell it runs in the pulled image) under each of tags.
func startRegistry(t testing.TB, tags ...string) *registry {
	t.Helper()
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	if _, err := os.Stat(registryBinary); err != nil {
		if why := expected("docker-registry", os.Getenv); why != "" {
			t.Fatalf("%s but %s is missing (Debian package docker-registry): %v", why, registryBinary, err)
		}
		t.Skipf("%s not installed (Debian package docker-registry): %v", registryBinary, err)
	}
	dir := t.TempDir()
	g := &registry{user: "ci-user", password: fmt.Sprintf("pw-%d", time.Now().UnixNano()),
		marker: fmt.Sprintf("pulled-%d", time.Now().UnixNano())}
	hash, err := bcrypt.GenerateFromPassword([]byte(g.password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(g.user+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	g.host = fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
auth:
  htpasswd:
    realm: podman-executor-test
    path: %s
`, filepath.Join(dir, "data"), g.host, htpasswd)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(registryBinary, "serve", cfg)
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", registryBinary, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("docker-registry log:\n%s", log.String())
		}
	})
	if err := waitUnauthorized("http://" + g.host + "/v2/"); err != nil {
		t.Fatalf("registry on %s: %v\n%s", g.host, err, log.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := bindings.NewConnection(ctx, shared.host)
	if err != nil {
		t.Fatal(err)
	}
	g.conn = context.WithoutCancel(conn)
	t.Cleanup(func() { g.removeImages(tags...) })
	if err := g.push(ctx, tags); err != nil {
		t.Fatal(err)
	}
	return g
}

// push commits a never-started container of the test image with the
// marker ENV, pushes the result under each tag with the registry's
// credentials, and removes the local copy, so only a pull brings it back.
func (g *registry) push(ctx context.Context, tags []string) error {
	ctx = withConn(ctx, g.conn)
	name := fmt.Sprintf("podman-executor-regtest-%d", time.Now().UnixNano())
	if _, err := shared.engine.Create(ctx, container.Spec{Name: name, Image: shared.image, Command: []string{"sh"}}); err != nil {
		return err
	}
	defer func() { _ = shared.engine.Remove(context.Background(), name) }()
	local := "localhost/podman-executor-regtest:" + strings.TrimPrefix(name, "podman-executor-regtest-")
	repo, tag, _ := strings.Cut(local, ":")
	opts := new(containers.CommitOptions).WithRepo(repo).WithTag(tag).
		WithChanges([]string{"ENV REGISTRY_MARKER=" + g.marker})
	if _, err := containers.Commit(ctx, name, opts); err != nil {
		return fmt.Errorf("commit test image: %w", err)
	}
	defer func() { _, _ = images.Remove(withConn(context.Background(), g.conn), []string{local}, nil) }()
	for _, tag := range tags {
		popts := new(images.PushOptions).WithSkipTLSVerify(true).WithQuiet(true).
			WithUsername(g.user).WithPassword(g.password)
		if err := images.Push(ctx, local, g.ref(tag), popts); err != nil {
			return fmt.Errorf("push %s: %w", g.ref(tag), err)
		}
	}
	return nil
}

// removeImages removes the pulled tags, so the next run pulls again.
func (g *registry) removeImages(tags ...string) {
	refs := make([]string, 0, len(tags))
	for _, tag := range tags {
		ref := g.ref(tag)
		if ok, _ := shared.engine.ImageExists(context.Background(), ref); ok {
			refs = append(refs, ref)
		}
	}
	if len(refs) > 0 {
		_, _ = images.Remove(withConn(context.Background(), g.conn), refs, nil)
	}
}

// withConn adds the bindings' connection to ctx.
func withConn(ctx, conn context.Context) context.Context {
	return connCtx{Context: ctx, conn: conn}
}

type connCtx struct {
	context.Context
	conn context.Context
}

func (c connCtx) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.conn.Value(key)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitUnauthorized waits until url answers 401 (the registry is up and
// wants credentials).
func waitUnauthorized(url string) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
			err = fmt.Errorf("GET %s: %s, want 401", url, resp.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for the registry's two output pipes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPullWithCredentials pulls the job image from a registry with
// htpasswd authentication, with each source of credentials the executor
// reads, and with a wrong password.
func TestPullWithCredentials(t *testing.T) {
	t.Parallel()
	tags := []string{"ci-registry", "docker-auth-config", "auth-file", "wrong-password", "not-insecure", "cred-helper", "per-repo"}
	g := startRegistry(t, tags...)
	secrets := func(password string) []string {
		return []string{password, base64.StdEncoding.EncodeToString([]byte(g.user + ":" + password))}
	}
	// registryConfig is the driver config for every subtest.
	registryConfig := fmt.Sprintf("pull_policy = \"always\"\ninsecure_registries = [%q]\n", g.host)
	ciRegistry := func(password string) map[string]string {
		return map[string]string{"CI_REGISTRY": g.host, "CI_REGISTRY_USER": g.user, "CI_REGISTRY_PASSWORD": password}
	}

	// runs checks a job that must pull its image and run in it.
	runs := func(t *testing.T, r *runner, j *job, source string) {
		t.Helper()
		if ok, err := r.env.engine.ImageExists(context.Background(), j.Image); err != nil || ok {
			t.Fatalf("%s present before the job (%v): the test would not pull", j.Image, err)
		}
		j.Scripts["build_script"] = "echo marker=$REGISTRY_MARKER\n"
		jr := r.runJob(j)
		if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 || jr.cleanup.code != 0 {
			t.Fatalf("prepare %d build %d cleanup %d:\n%s", jr.prepare.code, jr.stages["build_script"].code, jr.cleanup.code, jr.log)
		}
		if want := "Pulling image " + j.Image + " with credentials from " + source; !strings.Contains(jr.prepare.out, want) {
			t.Errorf("prepare log lacks %q:\n%s", want, jr.prepare.out)
		}
		if want := "marker=" + g.marker; !strings.Contains(jr.stages["build_script"].out, want) {
			t.Errorf("job did not run in the pulled image: output lacks %q:\n%s", want, jr.log)
		}
		if ok, _ := r.env.engine.ImageExists(context.Background(), j.Image); !ok {
			t.Errorf("%s not present after the job", j.Image)
		}
		assertNoSecret(t, jr.log, secrets(g.password))
		r.assertGone(j)
	}

	t.Run("CI_REGISTRY_USER", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, registryConfig)
		j := r.newJob(uniqueID(11))
		j.Image = g.ref("ci-registry")
		j.Vars = ciRegistry(g.password)
		runs(t, r, j, "CI_REGISTRY_USER")
	})

	t.Run("DOCKER_AUTH_CONFIG", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, registryConfig)
		j := r.newJob(uniqueID(12))
		j.Image = g.ref("docker-auth-config")
		// CI_REGISTRY with a wrong password as well: DOCKER_AUTH_CONFIG
		// comes first, as in GitLab's docker executor.
		j.Vars = ciRegistry("not-" + g.password)
		j.Vars["DOCKER_AUTH_CONFIG"] = g.dockerAuthConfig()
		runs(t, r, j, "job DOCKER_AUTH_CONFIG")
	})

	t.Run("DOCKER_AUTH_CONFIG credHelpers", func(t *testing.T) {
		t.Parallel()
		// A credential helper on the driver's PATH, speaking docker's
		// protocol, gives the registry's credentials.
		dir := t.TempDir()
		helper := fmt.Sprintf("#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread url\nprintf '{\"ServerURL\":\"%%s\",\"Username\":\"%s\",\"Secret\":\"%s\"}\\n' \"$url\"\n", g.user, g.password)
		if err := os.WriteFile(filepath.Join(dir, "docker-credential-itest"), []byte(helper), 0o755); err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, registryConfig)
		r.extraEnv = []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}
		j := r.newJob(uniqueID(15))
		j.Image = g.ref("cred-helper")
		j.Vars = map[string]string{"DOCKER_AUTH_CONFIG": fmt.Sprintf(`{"credHelpers":{%q:"itest"}}`, g.host)}
		runs(t, r, j, "job DOCKER_AUTH_CONFIG")
	})

	t.Run("DOCKER_AUTH_CONFIG per-repository key", func(t *testing.T) {
		t.Parallel()
		// The registry-wide entry has a wrong password; the entry for
		// this repository, which wins, the right one.
		r := newRunner(t, registryConfig)
		j := r.newJob(uniqueID(16))
		j.Image = g.ref("per-repo")
		repo, _, _ := strings.Cut(j.Image, ":"+"per-repo")
		enc := func(p string) string { return base64.StdEncoding.EncodeToString([]byte(g.user + ":" + p)) }
		j.Vars = map[string]string{"DOCKER_AUTH_CONFIG": fmt.Sprintf(`{"auths":{%q:{"auth":%q},%q:{"auth":%q}}}`,
			g.host, enc("wrong-"+g.password), repo, enc(g.password))}
		runs(t, r, j, "job DOCKER_AUTH_CONFIG")
	})

	t.Run("malformed DOCKER_AUTH_CONFIG", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, registryConfig)
		j := r.newJob(uniqueID(17))
		j.Image = g.ref("docker-auth-config")
		j.Vars = map[string]string{"DOCKER_AUTH_CONFIG": `{"auths":{` + g.password}
		jr := r.runJob(j)
		if jr.prepare.code != 1 || !strings.Contains(jr.prepare.out, "job variable DOCKER_AUTH_CONFIG: not valid JSON") {
			t.Fatalf("prepare exit %d, want 1 (build failure) saying the JSON is malformed:\n%s", jr.prepare.code, jr.log)
		}
		assertNoSecret(t, jr.log, secrets(g.password))
		r.assertGone(j)
	})

	t.Run("auth_file", func(t *testing.T) {
		t.Parallel()
		authFile := filepath.Join(t.TempDir(), "auth.json")
		if err := os.WriteFile(authFile, []byte(g.dockerAuthConfig()), 0o600); err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, registryConfig+fmt.Sprintf("auth_file = %q\n", authFile))
		j := r.newJob(uniqueID(13))
		j.Image = g.ref("auth-file")
		runs(t, r, j, "auth file "+authFile)
	})

	t.Run("wrong password", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, registryConfig)
		j := r.newJob(uniqueID(14))
		j.Image = g.ref("wrong-password")
		wrong := "wrong-" + g.password
		j.Vars = ciRegistry(wrong)
		jr := r.runJob(j)
		if jr.prepare.code != 2 {
			t.Fatalf("prepare exit %d, want 2 (system failure):\n%s", jr.prepare.code, jr.log)
		}
		if !strings.Contains(jr.prepare.out, "ERROR: podman-executor: pull "+j.Image) || !strings.Contains(jr.prepare.out, "unauthorized") {
			t.Errorf("prepare log does not say the pull was unauthorized:\n%s", jr.prepare.out)
		}
		if len(jr.stages) != 0 || jr.cleanup.code != 0 {
			t.Errorf("stages %v ran or cleanup failed:\n%s", jr.stages, jr.log)
		}
		assertNoSecret(t, jr.log, append(secrets(wrong), secrets(g.password)...))
		if ok, _ := r.env.engine.ImageExists(context.Background(), j.Image); ok {
			t.Errorf("%s present after an unauthorized pull", j.Image)
		}
		r.assertGone(j)
	})

	t.Run("plain HTTP registry not in insecure_registries", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, "pull_policy = \"always\"\n")
		j := r.newJob(uniqueID(15))
		j.Image = g.ref("not-insecure")
		j.Vars = ciRegistry(g.password)
		jr := r.runJob(j)
		if jr.prepare.code != 2 {
			t.Fatalf("prepare exit %d, want 2:\n%s", jr.prepare.code, jr.log)
		}
		if !strings.Contains(jr.prepare.out, "insecure_registries") {
			t.Errorf("prepare log does not point at insecure_registries:\n%s", jr.prepare.out)
		}
		assertNoSecret(t, jr.log, secrets(g.password))
		r.assertGone(j)
	})
}

// assertNoSecret fails when the driver's output shows any of secrets.
func assertNoSecret(t *testing.T, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(out, s) {
			t.Errorf("driver output shows a secret (%d chars):\n%s", len(s), strings.ReplaceAll(out, s, "<SECRET>"))
		}
	}
}
