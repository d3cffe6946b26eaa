package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestImageEntrypoint: the image's ENTRYPOINT starts the job's shell, as
// with GitLab's docker executor, so what it sets up is there in every
// stage; the job's `image: entrypoint` replaces it, and [""] disables it.
func TestImageEntrypoint(t *testing.T) {
	t.Parallel()
	image := commitImage(t, `ENTRYPOINT ["sh", "-c", "export FROM_ENTRYPOINT=image; exec \"$0\" \"$@\""]`)
	tests := []struct {
		name, entrypoint, want string
	}{
		{"image's own", "", "from-entrypoint=image"},
		{"job's override", `"entrypoint":["sh","-c","export FROM_ENTRYPOINT=job; exec \"$0\" \"$@\""],`, "from-entrypoint=job"},
		{"disabled", `"entrypoint":[""],`, "from-entrypoint=\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRunner(t, "")
			j := r.newJob(uniqueID(30 + i))
			j.Image = image
			j.setResponse(t, fmt.Sprintf(`{"id":%s,"image":{%s"name":%q}}`, j.ID, tt.entrypoint, image))
			j.Scripts["build_script"] = "echo from-entrypoint=$FROM_ENTRYPOINT\n"
			jr := r.runJob(j)
			if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
				t.Fatalf("job failed:\n%s", jr.log)
			}
			if !strings.Contains(jr.stages["build_script"].out, tt.want) {
				t.Errorf("build_script output lacks %q:\n%s", tt.want, jr.stages["build_script"].out)
			}
			r.assertGone(j)
		})
	}
}

// TestPullPolicyRefused: a job asking for a pull policy the runner does
// not allow fails as a build failure with a clear message, and nothing is
// left behind.
func TestPullPolicyRefused(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	j := r.newJob(uniqueID(35))
	j.setResponse(t, fmt.Sprintf(`{"id":%s,"image":{"name":%q,"pull_policy":["always"]}}`, j.ID, j.Image))
	jr := r.runJob(j)
	if jr.prepare.code != 1 {
		t.Fatalf("prepare exit %d, want the build failure code 1:\n%s", jr.prepare.code, jr.log)
	}
	want := "pull_policy (always) defined in the job is not one of the allowed_pull_policies of this runner (if-not-present)"
	if !strings.Contains(jr.prepare.out, want) {
		t.Errorf("prepare output lacks %q:\n%s", want, jr.prepare.out)
	}
	r.assertGone(j)
}

// TestDockerUserAndPlatform: `image: docker: user` runs the stages as that
// user; `platform` selects the image variant (the host's here).
func TestDockerUserAndPlatform(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	j := r.newJob(uniqueID(36))
	j.setResponse(t, fmt.Sprintf(`{"id":%s,"image":{"name":%q,"executor_opts":{"docker":{"user":"1234:1234","platform":"linux/amd64"}}}}`, j.ID, j.Image))
	j.Scripts["build_script"] = "echo uid=$(id -u) gid=$(id -g) arch=$(uname -m)\n"
	jr := r.runJob(j)
	if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
		t.Fatalf("job failed:\n%s", jr.log)
	}
	if !strings.Contains(jr.stages["build_script"].out, "uid=1234 gid=1234 arch=x86_64") {
		t.Errorf("build_script output:\n%s", jr.stages["build_script"].out)
	}
	r.assertGone(j)
}
