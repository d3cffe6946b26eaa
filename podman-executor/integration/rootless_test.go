package integration

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// TestRootlessJob runs a whole job through a rootless podman API service
// (.ci/podman.sh rootless-start: an unprivileged user with subuid/subgid
// ranges and its own XDG_RUNTIME_DIR), the driver itself running as that
// user, as a runner registered by a non-root user does.
//
// Where the user can open /dev/net/tun (rootless bridge networks need it
// for slirp4netns), the job runs as by default, on a bridge network with a
// service it reaches by its alias. Where it cannot, the job runs with
// network_mode = "host" and no service, and the test says so in its log.
func TestRootlessJob(t *testing.T) {
	host, name := os.Getenv("DEPSD_ROOTLESS_HOST"), os.Getenv("DEPSD_ROOTLESS_USER")
	if host == "" || name == "" {
		if why := expected("rootless", os.Getenv); why != "" {
			t.Fatalf("%s but DEPSD_ROOTLESS_HOST/DEPSD_ROOTLESS_USER are not set: run eval \"$(.ci/podman.sh rootless-start)\" as root", why)
		}
		t.Skip("no rootless podman service: run eval \"$(.ci/podman.sh rootless-start)\" as root")
	}
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	bridge := tunUsable(cred)
	if bridge != nil {
		t.Logf("/dev/net/tun is not usable by %s (%v): rootless bridge networks (slirp4netns) cannot work on this machine; the job runs with network_mode = \"host\" and no service", name, bridge)
	} else {
		t.Logf("/dev/net/tun is usable by %s: the job runs on a rootless bridge network with a service", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	engine, err := container.Dial(ctx, host)
	if err != nil {
		t.Fatalf("rootless podman at %s: %v", host, err)
	}

	// Everything the driver touches belongs to the user, in a directory
	// only it (and root) can enter.
	base, err := os.MkdirTemp("", "podman-executor-rootless-")
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
	conf := fmt.Sprintf("podman_url = %q\ncache_host_dir = %q\nstate_dir = %q\nhelper_binary = \"none\"\nstop_grace = \"2s\"\n",
		host, filepath.Join(home, "cache"), filepath.Join(home, "state"))
	if bridge != nil {
		conf += "network_mode = \"host\"\n"
	}
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
		cred: cred, newDir: newDir,
		extraEnv: []string{"HOME=" + home, "XDG_RUNTIME_DIR=" + home}}
	j := r.newJob(uniqueID(80))
	j.Scripts["build_script"] = "echo uid-in-container=$(id -u)\n" +
		"if test -p /.podman-executor/ctl; then echo channel=yes; fi\n"
	if bridge == nil {
		j.Services = `[{"name":"` + r.env.image + `","alias":"web","entrypoint":["sh","-c","echo hello-from-rootless-service > /var/www/index.html && exec httpd -f -p 80 -h /var/www"],"command":null}]`
		j.Scripts["build_script"] += "ok=; for i in $(seq 1 50); do if wget -q -O - http://web/; then ok=1; break; fi; sleep 0.2; done; [ -n \"$ok\" ]\n"
	}
	j.Scripts["archive_cache"] = "echo kept > /cache/rootless-file\n"
	jr := r.runJob(j)
	if jr.prepare.code != 0 || jr.cleanup.code != 0 {
		t.Fatalf("prepare %d cleanup %d:\n%s", jr.prepare.code, jr.cleanup.code, jr.log)
	}
	for _, stage := range stages {
		if jr.stages[stage].code != 0 {
			t.Errorf("%s exited %d:\n%s", stage, jr.stages[stage].code, jr.log)
		}
	}
	out := jr.stages["build_script"].out
	if !strings.Contains(out, "uid-in-container=0") || !strings.Contains(out, "channel=yes") {
		t.Errorf("build_script output:\n%s", out)
	}
	if bridge == nil && !strings.Contains(out, "hello-from-rootless-service") {
		t.Errorf("the job did not reach its service on the rootless bridge network:\n%s", jr.log)
	}
	// Root in the container is the user on the host: the cache file the
	// job wrote belongs to it.
	files, _ := filepath.Glob(filepath.Join(r.cache, "runner-*", "project-*", "data", "rootless-file"))
	if len(files) != 1 {
		t.Fatalf("cache file not written: %v", files)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Errorf("cache file %s not owned by %s (uid %d): %v", files[0], name, uid, err)
	}
	r.assertGone(j)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// tunUsable is nil when the user of cred can open /dev/net/tun for
// reading and writing (as slirp4netns does), else why not.
func tunUsable(cred *syscall.Credential) error {
	cmd := exec.Command("/bin/sh", "-c", ": <>/dev/net/tun")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
