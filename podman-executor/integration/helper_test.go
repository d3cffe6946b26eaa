package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// helperImage is built by .ci/helper-image.sh: Debian minbase with git.
func helperImage(t *testing.T) string {
	t.Helper()
	if shared.skip != "" { // no podman here (TestMain fails instead where podman is expected)
		t.Skip(shared.skip)
	}
	image := os.Getenv("DEPSD_HELPER_IMAGE")
	if image == "" {
		image = "localhost/helper-git-test:bookworm"
	}
	if ok, err := shared.engine.ImageExists(context.Background(), image); err != nil || !ok {
		if why := expected("helper-image", os.Getenv); why != "" {
			t.Fatalf("%s but helper image %s is missing (%v): run .ci/helper-image.sh", why, image, err)
		}
		t.Skipf("helper image %s missing (%v): run .ci/helper-image.sh (debootstrap, a few minutes)", image, err)
	}
	return image
}

// gitServer serves a real git repository over HTTP on 127.0.0.1 with
// git's own http-backend behind a CGI handler, as a GitLab instance
// serves clones. commit adds a commit to it.
type gitServer struct {
	url  string
	repo string // bare repository
	work string // a working copy that pushes to it
}

func startGitServer(t *testing.T) *gitServer {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		if why := expected("git", os.Getenv); why != "" {
			t.Fatalf("%s but git is missing: %v", why, err)
		}
		t.Skip("git not installed")
	}
	root := t.TempDir()
	g := &gitServer{repo: filepath.Join(root, "project.git"), work: filepath.Join(root, "work")}
	g.git(t, root, "init", "-q", "--bare", g.repo)
	g.git(t, root, "clone", "-q", g.repo, g.work)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	g.url = "http://" + ln.Addr().String() + "/project.git"
	return g
}

func (g *gitServer) git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (g *gitServer) commit(t *testing.T, file, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.work, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	g.git(t, g.work, "add", file)
	g.git(t, g.work, "commit", "-q", "-m", "add "+file)
	g.git(t, g.work, "push", "-q", "origin", "HEAD:main")
	return g.git(t, g.work, "rev-parse", "HEAD")
}

// TestHelperImageFetchesSources: with helper_image, a busybox job (no
// git) gets its sources cloned over HTTP by the helper container into the
// shared builds directory; with builds_volume the next job fetches
// incrementally into the same checkout.
func TestHelperImageFetchesSources(t *testing.T) {
	t.Parallel()
	helper := helperImage(t)
	g := startGitServer(t)
	first := g.commit(t, "README", "hello from git\n")
	// The git server listens on the host's 127.0.0.1: the containers share
	// the host's network.
	r := newRunner(t, fmt.Sprintf("helper_image = %q\nnetwork_mode = \"host\"\nbuilds_volume = true\n", helper))
	project := fmt.Sprint(time.Now().UnixNano() % 1000000)
	getSources := "set -e\ncommand -v git\n" +
		"if [ -d /builds/g/p/.git ]; then echo reusing-checkout; cd /builds/g/p; git fetch -q origin; git checkout -q FETCH_HEAD; " +
		"else git clone -q " + g.url + " /builds/g/p; cd /builds/g/p; git checkout -q origin/main; fi\n" +
		"git rev-parse HEAD\n"
	build := "command -v git || echo job-has-no-git\ncat /builds/g/p/*\n"

	j := r.newJob(uniqueID(70))
	j.Project = project
	j.Scripts["get_sources"] = getSources
	j.Scripts["build_script"] = build
	jr := r.runJob(j)
	if jr.prepare.code != 0 || jr.stages["get_sources"].code != 0 || jr.stages["build_script"].code != 0 {
		t.Fatalf("first job:\n%s", jr.log)
	}
	if !strings.Contains(jr.stages["get_sources"].out, first) || strings.Contains(jr.stages["get_sources"].out, "reusing-checkout") {
		t.Errorf("get_sources did not clone %s:\n%s", first, jr.stages["get_sources"].out)
	}
	if out := jr.stages["build_script"].out; !strings.Contains(out, "job-has-no-git") || !strings.Contains(out, "hello from git") {
		t.Errorf("build_script (busybox job image) output:\n%s", out)
	}
	r.assertGone(j)

	second := g.commit(t, "NEWS", "second commit\n")
	j2 := r.newJob(uniqueID(71))
	j2.Project = project
	j2.Scripts["get_sources"] = getSources
	j2.Scripts["build_script"] = build
	jr = r.runJob(j2)
	if jr.stages["get_sources"].code != 0 || jr.stages["build_script"].code != 0 {
		t.Fatalf("second job:\n%s", jr.log)
	}
	if out := jr.stages["get_sources"].out; !strings.Contains(out, "reusing-checkout") || !strings.Contains(out, second) {
		t.Errorf("second job did not fetch incrementally into the kept checkout:\n%s", out)
	}
	if !strings.Contains(jr.stages["build_script"].out, "second commit") {
		t.Errorf("build_script does not see the fetched commit:\n%s", jr.stages["build_script"].out)
	}
	r.assertGone(j2)
	gc := r.call(j2, "gc", "--max-age", "1000h", "--cache-max-age", "1ns")
	if gc.code != 0 || !strings.Contains(gc.out, "removed builds volume") {
		t.Errorf("gc:\n%s", gc.out)
	}
}
