package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containers/podman/v4/pkg/bindings"
	"github.com/containers/podman/v4/pkg/bindings/images"

	"gitlab.com/depsd/depsd/podman-executor/container"
	"gitlab.com/depsd/depsd/podman-executor/executor"
)

// TestRootlessImageBuildInJob: on the rootless podman service of
// .ci/podman.sh rootless-start, with the driver running as its user, a job
// on allowed_build_images builds and pushes with buildah under the same
// default build profile: "per-project" keeps the user's own namespace
// there (root in the job is the user), and the next job's build uses the
// build storage's layers.
func TestRootlessImageBuildInJob(t *testing.T) {
	host, name := os.Getenv("DEPSD_ROOTLESS_HOST"), os.Getenv("DEPSD_ROOTLESS_USER")
	if host == "" || name == "" {
		if why := expected("rootless", os.Getenv); why != "" {
			t.Fatalf("%s but DEPSD_ROOTLESS_HOST/DEPSD_ROOTLESS_USER are not set: run eval \"$(.ci/podman.sh rootless-start)\" as root", why)
		}
		t.Skip("no rootless podman service: run eval \"$(.ci/podman.sh rootless-start)\" as root")
	}
	image := buildahImage(t)
	g := startRegistry(t, "base")
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	engine, err := container.Dial(ctx, host)
	if err != nil {
		t.Fatalf("rootless podman at %s: %v", host, err)
	}
	if rootless, err := engine.Rootless(ctx); err != nil || !rootless {
		t.Fatalf("podman at %s: rootless %v (%v)", host, rootless, err)
	}
	copyImage(t, ctx, image, host)

	base, err := os.MkdirTemp("", "podman-executor-rootless-build-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	newDir := func() string {
		n++
		d := filepath.Join(base, fmt.Sprint(n))
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, uid, gid); err != nil {
			t.Fatal(err)
		}
		return d
	}
	home := newDir()
	bin := filepath.Join(home, "podman-executor")
	copyFile(t, shared.bin, bin, 0o755)
	cfg := filepath.Join(home, "config.toml")
	conf := fmt.Sprintf("podman_url = %q\ncache_host_dir = %q\nstate_dir = %q\nhelper_binary = \"none\"\nnetwork_mode = \"host\"\nallowed_build_images = [%q]\n",
		host, filepath.Join(home, "cache"), filepath.Join(home, "state"), image)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bin, cfg} {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	env := shared
	env.bin, env.host, env.engine = bin, host, engine
	r := &runner{t: t, env: env, configFile: cfg, cache: filepath.Join(home, "cache"), state: filepath.Join(home, "state"),
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, newDir: newDir,
		extraEnv: []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + home}}

	project := fmt.Sprint(uniqueID(90))
	vol := executor.Identity{Runner: "itest", Project: project}.BuildStorageVolumeName()
	t.Cleanup(func() { _ = engine.RemoveVolume(context.Background(), vol) })
	var outs []string
	for i := range 2 {
		j := r.newJob(uniqueID(91 + i))
		j.Project, j.Image = project, image
		j.Scripts["build_script"] = buildScript(g, g.host+"/test/rootless:1", "rootless-"+project)
		jr := r.runJob(j)
		if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
			t.Fatalf("rootless build job %d failed:\n%s", i+1, jr.log)
		}
		if !strings.Contains(jr.prepare.out, "user namespace the runner user's") {
			t.Errorf("job %d: prepare does not say it keeps the runner user's namespace:\n%s", i+1, jr.prepare.out)
		}
		out := jr.stages["build_script"].out
		if !strings.Contains(out, "Writing manifest") || !strings.Contains(out, fmt.Sprintf("uid_map:          0 %10d", uid)) {
			t.Errorf("job %d: no push, or root in the job is not %s (uid %d):\n%s", i+1, name, uid, out)
		}
		r.assertGone(j)
		outs = append(outs, out)
	}
	if n := strings.Count(outs[1], "Using cache"); n < 2 {
		t.Errorf("the second rootless build reused %d layers:\n%s", n, outs[1])
	}
}

// copyImage copies image from the test's podman service to the podman
// service at host (an image archive streamed through the test), unless
// it is there already.
func copyImage(t *testing.T, ctx context.Context, image, host string) {
	t.Helper()
	to, err := bindings.NewConnection(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := images.Exists(to, image, nil); err == nil && ok {
		return
	}
	from, err := bindings.NewConnection(ctx, shared.host)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(images.Export(from, []string{image}, pw, new(images.ExportOptions).WithFormat("docker-archive")))
	}()
	if _, err := images.Load(to, pr); err != nil {
		pr.CloseWithError(err)
		t.Fatalf("copy %s to %s: %v", image, host, err)
	}
}
