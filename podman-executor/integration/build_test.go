package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/executor"
)

// fuseDevice is the device the build profile gives image-building jobs.
const fuseDevice = "/dev/fuse"

// requireFuse skips a test of image builds in jobs on a machine without
// fuseDevice, and fails it where such builds are expected to be tested
// (CI=true, DEPSD_REQUIRE=podman or all, CONTAINER_HOST set: the rule of
// depsd's internal/realtest, as e2e/realchain_test.go applies it).
func requireFuse(tb testing.TB) {
	tb.Helper()
	_, err := os.Stat(fuseDevice)
	if err == nil {
		return
	}
	if why := expected("podman", os.Getenv); why != "" {
		tb.Fatalf("%s but this machine has no %s for image builds in jobs: %v", why, fuseDevice, err)
	}
	tb.Skipf("no %s on this machine: %v", fuseDevice, err)
}

// buildahImage is built by .ci/buildah-image.sh: Debian minbase with
// buildah, the job image of an image-building job.
func buildahImage(t testing.TB) string {
	t.Helper()
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	image := os.Getenv("DEPSD_BUILDAH_IMAGE")
	if image == "" {
		image = "localhost/buildah-job-test:bookworm"
	}
	if ok, err := shared.engine.ImageExists(context.Background(), image); err != nil || !ok {
		if why := expected("buildah-image", os.Getenv); why != "" {
			t.Fatalf("%s but job image %s is missing (%v): run .ci/buildah-image.sh", why, image, err)
		}
		t.Skipf("job image %s missing (%v): run .ci/buildah-image.sh (debootstrap, a few minutes)", image, err)
	}
	return image
}

// buildScript is the README's build job (buildah login, build, push),
// after the variables GitLab would export, building FROM the registry's
// copy of the busybox test image.
func buildScript(g *registry, image, marker string) string {
	return fmt.Sprintf(`set -e
export CI_REGISTRY=%[1]s CI_REGISTRY_USER=%[2]s CI_REGISTRY_PASSWORD=%[3]s CI_REGISTRY_IMAGE=%[1]s/test/app
mkdir -p /tmp/ctx && cd /tmp/ctx
printf 'FROM %[4]s\nRUN echo %[5]s > /built-by-run\nCOPY hello /hello\n' > Containerfile
echo hello > hello
echo "$CI_REGISTRY_PASSWORD" | buildah login --tls-verify=false -u "$CI_REGISTRY_USER" --password-stdin "$CI_REGISTRY"
start=$(date +%%s%%N)
buildah build --tls-verify=false -t "%[6]s" .
echo "build-ms $(( ($(date +%%s%%N) - start) / 1000000 ))"
buildah push --tls-verify=false "%[6]s"
echo "driver: $(buildah info --format '{{.store.GraphDriverName}}')"
grep -E '^Cap(Eff|Bnd)' /proc/self/status
echo "uid_map: $(cat /proc/self/uid_map)"
`, g.host, g.user, g.password, g.ref("base"), marker, image)
}

// TestImageBuildInJob: a job whose image is on allowed_build_images
// builds a Containerfile with RUN and COPY FROM an image in a registry
// and pushes the result, with buildah, without privileged, in a user
// namespace of its project; the next job's build of the same
// Containerfile finds its layers in the build storage volume ("Using
// cache"). A job of another image gets none of it.
func TestImageBuildInJob(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	image := buildahImage(t)
	g := startRegistry(t, "base")
	// Host networking: the registry listens on the host's 127.0.0.1.
	r := newRunner(t, fmt.Sprintf("network_mode = \"host\"\nallowed_build_images = [%q]\n", image))
	built := g.host + "/test/app:1"
	marker := fmt.Sprintf("run-%d", uniqueID(0))
	project := fmt.Sprint(uniqueID(0))
	vol := executor.Identity{Runner: "itest", Project: project}.BuildStorageVolumeName()
	t.Cleanup(func() { _ = shared.engine.RemoveVolume(context.Background(), vol) })

	var outs []string
	for i := range 2 {
		j := r.newJob(uniqueID(70 + i))
		j.Project, j.Image = project, image
		j.Scripts["build_script"] = buildScript(g, built, marker)
		jr := r.runJob(j)
		out := jr.stages["build_script"].out
		if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
			t.Fatalf("build job %d failed:\n%s", i+1, jr.log)
		}
		if !strings.Contains(jr.prepare.out, "Build profile: "+vol) {
			t.Errorf("job %d: prepare does not say it uses %s:\n%s", i+1, vol, jr.prepare.out)
		}
		if !strings.Contains(out, "Login Succeeded") || !strings.Contains(out, "Writing manifest") {
			t.Errorf("job %d: no login or push:\n%s", i+1, out)
		}
		const capSysModule, capSysAdmin = 16, 21
		if eff, ok := capEff(out); !ok || eff&(1<<capSysModule) != 0 || eff&(1<<capSysAdmin) == 0 {
			t.Errorf("job %d: CapEff %x, want CAP_SYS_ADMIN (the build profile) without CAP_SYS_MODULE (privileged):\n%s", i+1, eff, out)
		}
		if strings.Contains(out, "uid_map:          0          0") {
			t.Errorf("job %d: container root is the host's root:\n%s", i+1, out)
		}
		r.assertGone(j)
		outs = append(outs, out)
	}
	if strings.Contains(outs[0], "Using cache") {
		t.Errorf("the first build used a cache it cannot have had:\n%s", outs[0])
	}
	if n := strings.Count(outs[1], "Using cache"); n < 2 {
		t.Errorf("the second build reused %d layers, want the RUN and COPY steps from the build storage:\n%s", n, outs[1])
	}
	if vols, err := shared.engine.ListVolumes(context.Background(), map[string]string{executor.LabelProject: project}); err != nil || len(vols) != 1 || vols[0].Name != vol {
		t.Errorf("volumes of the project: %+v (%v), want only %s", vols, err, vol)
	}

	req, _ := http.NewRequest(http.MethodHead, "http://"+g.host+"/v2/test/app/manifests/1", nil)
	req.SetBasicAuth(g.user, g.password)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("pushed image %s: registry answers %s", built, resp.Status)
	}
}

// BenchmarkImageBuild times a cold build job (a project's first: empty
// build storage, the job image mapped to the project's ID range) against a
// warm one (the next job of the project: layers from the build storage),
// of the Containerfile of TestImageBuildInJob: the whole job as the runner
// drives it, and the `buildah build` step alone. The README quotes it.
func BenchmarkImageBuild(b *testing.B) {
	requireFuse(b)
	image := buildahImage(b)
	g := startRegistry(b, "base")
	r := newRunner(b, fmt.Sprintf("network_mode = \"host\"\nallowed_build_images = [%q]\n", image))
	var job, build [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		project := fmt.Sprint(uniqueID(80 + i%20))
		vol := executor.Identity{Runner: "itest", Project: project}.BuildStorageVolumeName()
		for k := range 2 {
			j := r.newJob(uniqueID(85 + k))
			j.Project, j.Image = project, image
			j.Scripts["build_script"] = buildScript(g, g.host+"/test/bench:"+project, project)
			start := time.Now()
			jr := r.runJob(j)
			job[k] += time.Since(start)
			out := jr.stages["build_script"].out
			if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
				b.Fatalf("build job failed:\n%s", jr.log)
			}
			if k == 1 && !strings.Contains(out, "Using cache") {
				b.Fatalf("the warm build used no cache:\n%s", out)
			}
			_, ms, _ := strings.Cut(out, "build-ms ")
			n, err := strconv.Atoi(strings.Fields(ms + " x")[0])
			if err != nil {
				b.Fatalf("no build-ms line:\n%s", out)
			}
			build[k] += time.Duration(n) * time.Millisecond
		}
		b.StopTimer()
		_ = shared.engine.RemoveVolume(context.Background(), vol)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(job[0].Milliseconds())/n, "cold-job-ms")
	b.ReportMetric(float64(job[1].Milliseconds())/n, "warm-job-ms")
	b.ReportMetric(float64(build[0].Milliseconds())/n, "cold-build-ms")
	b.ReportMetric(float64(build[1].Milliseconds())/n, "warm-build-ms")
}
