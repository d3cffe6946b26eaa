package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/executor"
)

// TestRealRunnerBuildJobWithHelperImage: an image-building job (its image
// on allowed_build_images: its own user namespace, the build profile)
// with helper_image, through the real runner. The helper container clones
// the sources (the runner's get_sources) into the shared builds
// directory; the job's script then writes into the checkout (as the
// runner's own build_script does, and as a build that generates files
// does), builds an image from it with buildah and finds the checkout its
// own (git accepts it). Each job pulls the cache the job before pushed
// (the cache stages run in the helper container). With builds_volume, the next build job of the
// project fetches into the kept checkout, which is the build jobs' own: a
// plain job of the same slot (no build profile) before and after them
// keeps another, and the project's cache goes from one kind to the other.
func TestRealRunnerBuildJobWithHelperImage(t *testing.T) {
	t.Parallel()
	requireFuse(t)
	helper := helperImage(t)
	image := buildahImage(t)
	for _, tc := range []struct {
		name   string
		config string
		// jobs run one after another in the same project and slot:
		// true for a build job, false for a plain (busybox) one
		jobs []bool
	}{
		{"per-job builds volume", "", []bool{true}},
		{"kept builds volume", "builds_volume = true\n", []bool{false, true, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := startJobsAPI(t)
			// The git server listens on the host's 127.0.0.1.
			r := newRealRunner(t, api, 1, fmt.Sprintf("helper_image = %q\nnetwork_mode = \"host\"\nallowed_build_images = [%q]\n%s",
				helper, image, tc.config))
			g := startGitServer(t)
			project := int64(uniqueID(36))
			if tc.config != "" {
				project = int64(uniqueID(37))
			}
			t.Cleanup(func() { removeProjectVolumes(t, project) })
			host := strings.TrimPrefix(g.url, "http://")
			for i, build := range tc.jobs {
				sha := g.commit(t, "README", fmt.Sprintf("commit %d\n", i))
				script := []string{
					`echo "readme: $(cat README)"`,
					// the job writes into its checkout
					`echo "generated-$((40+i))" > generated.txt`, "cat generated.txt",
					// and into its cache, which the job before it left
					`if [ -d vendor ]; then cat vendor/* | sed "s/^/cached-/"; fi`, `mkdir -p vendor && echo "from-job-$((i+1))" > vendor/job-$i`,
				}
				if build {
					script = append(script,
						`printf 'FROM scratch\nCOPY README generated.txt /\n' > Containerfile`,
						"buildah build -q -t localhost/helper-image-test:$CI_JOB_ID .",
						"buildah rmi localhost/helper-image-test:$CI_JOB_ID >/dev/null",
						`git status --short >/dev/null && echo "git-accepts-checkout-$((1+1))"`,
						`echo "uid_map: $(cat /proc/self/uid_map)"`)
				}
				j := api.newJob(project, script...)
				if build {
					j.payload.Image.Name = image
				}
				j.setVar("i", strconv.Itoa(i))
				j.payload.Cache = []payloadCache{{Key: "deps", Paths: []string{"vendor/"}, Policy: "pull-push", When: "on_success"}}
				j.setVar("GIT_STRATEGY", "fetch")
				j.payload.GitInfo.RepoURL = "http://gitlab-ci-token:" + j.payload.Token + "@" + host
				j.payload.GitInfo.Sha = sha
				j.setVar("CI_REPOSITORY_URL", j.payload.GitInfo.RepoURL)
				j.setVar("CI_COMMIT_SHA", sha)
				api.enqueue(j)
				runnerLog := r.runSingle(1)
				waitDone(t, j, 2*time.Minute)
				u, log := j.final()
				if u.State != "success" {
					t.Fatalf("job %d (build %v): state %q:\n%s\nrunner log:\n%s", i+1, build, u.State, log, runnerLog)
				}
				want := []string{"Checking out " + sha[:8], fmt.Sprintf("readme: commit %d", i), fmt.Sprintf("\ngenerated-%d", 40+i)}
				for k := range i { // every earlier job's cache file, in the cache this job pulled
					want = append(want, fmt.Sprintf("\ncached-from-job-%d", k+1))
				}
				if build {
					want = append(want, "Build profile: ", "git-accepts-checkout-2")
				}
				if m := missing(log, want...); len(m) > 0 {
					t.Errorf("job %d (build %v): log lacks %q:\n%s", i+1, build, m, log)
				}
				if build && strings.Contains(log, "uid_map:          0          0") {
					t.Errorf("job %d: the build job's root is the host's root:\n%s", i+1, log)
				}
				// A build job's root is not the other jobs': each kind
				// keeps its own checkout.
				if kept := tc.config != "" && slices.Contains(tc.jobs[:i], build); kept != strings.Contains(log, "Reinitialized existing Git repository") {
					t.Errorf("job %d (build %v): fetched into a kept checkout %v, want %v:\n%s", i+1, build, !kept, kept, log)
				}
				assertJobGone(t, j.payload.ID)
			}
		})
	}
}

// removeProjectVolumes removes the volumes a test's project kept (builds
// volume, build storage).
func removeProjectVolumes(t *testing.T, project int64) {
	ctx := context.Background()
	vols, err := shared.engine.ListVolumes(ctx, map[string]string{executor.LabelProject: strconv.FormatInt(project, 10)})
	if err != nil {
		t.Error(err)
		return
	}
	for _, v := range vols {
		if err := shared.engine.RemoveVolume(ctx, v.Name); err != nil {
			t.Errorf("remove volume %s: %v", v.Name, err)
		}
	}
}
