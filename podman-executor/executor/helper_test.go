package executor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// TestHelperContainer: with helper_image, prepare starts a helper beside
// the job container, both mounting one builds volume; the stages that
// fetch sources and handle caches and artifacts run in the helper, the
// user's scripts in the job container; cleanup removes all of it.
func TestHelperContainer(t *testing.T) {
	const helper = "localhost/helper:1"
	f := newFixture(t, nil, func(c *Config) { c.HelperImage = helper })
	f.fake.Pull(context.Background(), helper, container.PullOptions{}, f.out)
	if err := f.e.PrepareStage(context.Background()); err != nil {
		t.Fatalf("prepare: %v\n%s", err, f.out)
	}
	job, _ := f.fake.Spec(jobName)
	h, ok := f.fake.Spec(jobName + "-helper")
	if !ok || h.Image != helper || h.Labels[LabelGroup] != jobName || h.Labels[LabelRole] != "helper" {
		t.Fatalf("helper spec %+v", h)
	}
	want := []string{jobName + "-builds:/builds"}
	if !slices.Equal(job.Volumes, want) || !slices.Equal(h.Volumes, want) {
		t.Errorf("builds volume not shared: job %v helper %v", job.Volumes, h.Volumes)
	}
	ran := map[string]string{}
	f.fake.ExecFunc = func(_ context.Context, name string, e container.Exec) (int, error) {
		ran[e.Cmd[2]] = name
		return 0, nil
	}
	script := filepath.Join(t.TempDir(), "s")
	_ = os.WriteFile(script, []byte("true\n"), 0o644)
	where := map[string]string{}
	for _, stage := range []string{"get_sources", "restore_cache", "build_script", "step_release", "after_script", "upload_artifacts_on_success"} {
		ran = map[string]string{}
		if err := f.e.RunStage(context.Background(), script, stage); err != nil {
			t.Fatal(err)
		}
		for _, n := range ran {
			where[stage] = n
		}
	}
	for stage, want := range map[string]string{"get_sources": jobName + "-helper", "restore_cache": jobName + "-helper",
		"upload_artifacts_on_success": jobName + "-helper", "build_script": jobName, "step_release": jobName, "after_script": jobName} {
		if where[stage] != want {
			t.Errorf("%s ran in %q, want %q", stage, where[stage], want)
		}
	}
	if err := f.e.CleanupStage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.Names(); len(n) != 0 {
		t.Errorf("containers left: %v", n)
	}
	if v := f.fake.VolumeNames(); len(v) != 0 {
		t.Errorf("volumes left: %v", v)
	}
}

// TestBuildJobHelperInItsUserNamespace: a build job in a user namespace
// of its own (rootful per-project) has its helper container in the same
// one, none of the build profile's privileges on it, the project's cache
// chowned into that namespace in both containers, and a kept builds
// volume of its own; where the build job keeps the runner's namespace
// (rootless) or is no build job, nothing of it changes.
func TestBuildJobHelperInItsUserNamespace(t *testing.T) {
	const helper = "localhost/helper:1"
	tests := []struct {
		name      string
		build     bool
		rootless  bool
		wantIDMap string // the job's and the helper's
		wantChown bool   // the cache mount, in both
		wantVol   string // the builds volume, in both
	}{
		{"rootful build job", true, false, idMap("7"), true, "podman-executor-builds-rtok-p7-c0-build:/builds"},
		{"rootless build job", true, true, "", false, "podman-executor-builds-rtok-p7-c0:/builds"},
		{"other job", false, false, "", false, "podman-executor-builds-rtok-p7-c0:/builds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, func(c *Config) {
				c.HelperImage, c.BuildsVolume = helper, true
				if tt.build {
					c.AllowedBuildImages = []string{testImage}
				}
			})
			f.fake.IsRootless = tt.rootless
			f.fake.Pull(context.Background(), helper, container.PullOptions{}, f.out)
			if err := f.e.PrepareStage(context.Background()); err != nil {
				t.Fatalf("prepare: %v\n%s", err, f.out)
			}
			job, _ := f.fake.Spec(jobName)
			h, _ := f.fake.Spec(jobName + "-helper")
			for _, c := range []container.Spec{job, h} {
				if c.Options.IDMap != tt.wantIDMap || c.Options.UserNS != "" {
					t.Errorf("%s: ID map %q userns %q, want ID map %q", c.Name, c.Options.IDMap, c.Options.UserNS, tt.wantIDMap)
				}
				i := slices.IndexFunc(c.Mounts, func(m container.Mount) bool { return m.Destination == "/cache" })
				if i < 0 || c.Mounts[i].Chown != tt.wantChown {
					t.Errorf("%s: cache mount %+v, want chowned %v", c.Name, c.Mounts, tt.wantChown)
				}
				if slices.ContainsFunc(c.Mounts, func(m container.Mount) bool { return m.Destination != "/cache" && m.Chown }) {
					t.Errorf("%s: a mount other than the cache is chowned: %+v", c.Name, c.Mounts)
				}
				if !slices.Contains(c.Volumes, tt.wantVol) {
					t.Errorf("%s: volumes %v, want %s", c.Name, c.Volumes, tt.wantVol)
				}
			}
			if len(h.Options.CapAdd) != 0 || len(h.Options.Devices) != 0 || len(h.Options.SecurityOpt) != 0 || len(h.Options.Env) != 0 {
				t.Errorf("the helper got the build profile's privileges: %+v", h.Options)
			}
		})
	}
}

// TestProtectedRefsKeepTheirOwnCacheAndVolumes: with split_protected_refs
// (the default), a job of a protected ref gets a cache directory, builds
// volume and build storage of its own, apart from the project's other
// jobs, so a branch job cannot poison what a protected job builds. Whether
// the ref is protected is the job response's say: git_info.protected when
// the runner passes it, else GitLab's CI_COMMIT_REF_PROTECTED, which comes
// before any the job defines itself.
func TestProtectedRefsKeepTheirOwnCacheAndVolumes(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name      string
		vars      []ResponseVar
		gitInfo   *bool
		split     bool
		protected bool
	}{
		{"protected ref", []ResponseVar{{Key: "CI_COMMIT_REF_PROTECTED", Value: "true"}}, nil, true, true},
		{"unprotected ref", []ResponseVar{{Key: "CI_COMMIT_REF_PROTECTED", Value: "false"}}, nil, true, false},
		{"unprotected ref calling itself protected", []ResponseVar{{Key: "CI_COMMIT_REF_PROTECTED", Value: "false"}, {Key: "CI_COMMIT_REF_PROTECTED", Value: "true"}}, nil, true, false},
		{"git_info says protected", []ResponseVar{{Key: "CI_COMMIT_REF_PROTECTED", Value: "false"}}, &yes, true, true},
		{"git_info says unprotected", []ResponseVar{{Key: "CI_COMMIT_REF_PROTECTED", Value: "true"}}, &no, true, false},
		{"protected ref, split off", []ResponseVar{{Key: "CI_COMMIT_REF_PROTECTED", Value: "true"}}, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, func(c *Config) {
				c.BuildsVolume = true
				c.AllowedBuildImages = []string{testImage}
				c.SplitProtectedRefs = tt.split
			})
			f.e.Job.Response.Variables = tt.vars
			f.e.Job.Response.GitInfo.Protected = tt.gitInfo
			if err := f.e.PrepareStage(context.Background()); err != nil {
				t.Fatalf("prepare: %v\n%s", err, f.out)
			}
			key := "p7"
			cache := "/project-7/data"
			if tt.protected {
				key, cache = "p7-protected", "/project-7-protected/data"
			}
			job, _ := f.fake.Spec(jobName)
			if !slices.ContainsFunc(job.Mounts, func(m container.Mount) bool { return m.Destination == "/cache" && strings.HasSuffix(m.Source, cache) }) {
				t.Errorf("cache mount %+v, want one from ...%s", job.Mounts, cache)
			}
			for _, want := range []string{"podman-executor-builds-rtok-" + key + "-c0-build:/builds", "podman-executor-buildstore-rtok-" + key + ":/var/lib/containers"} {
				if !slices.Contains(job.Volumes, want) {
					t.Errorf("volumes %v, want %s", job.Volumes, want)
				}
			}
		})
	}
}
