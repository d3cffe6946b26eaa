package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// overrideVar adds a job variable that redefines a predefined one, as
// GitLab sends it: the predefined variable first, the job's own (from
// `variables:`) after it.
func (j *fakeJob) overrideVar(key, value string) {
	j.payload.Variables = append(j.payload.Variables, payloadVar{Key: key, Value: value, Public: true})
}

// TestRealRunnerJobCannotChooseAnotherProject: under the real runner
// (`gitlab-runner run`, concurrent = 3, builds_volume = true), a job of
// one project (victim) runs and waits; meanwhile a job of another
// project redefines CI_PROJECT_ID as the victim's and CI_JOB_ID as the
// running job's, and a third redefines CI_CONCURRENT_PROJECT_ID. Neither
// may reach the victim's cache or builds volume, nor remove or take the
// running job's container: each fails at once, saying which variable it
// may not redefine, and the victim's job ends well with its files intact.
func TestRealRunnerJobCannotChooseAnotherProject(t *testing.T) {
	t.Parallel()
	api := startJobsAPI(t)
	r := newRealRunner(t, api, 3, "builds_volume = true\n")
	victim, attacker, slotter := int64(uniqueID(40)), int64(uniqueID(41)), int64(uniqueID(42))
	for _, p := range []int64{victim, attacker, slotter} {
		t.Cleanup(func() { removeProjectVolumes(t, p) })
	}
	a := api.newJob(victim,
		`echo "victim-secret-$((6*7))" > /cache/victim-marker`,
		`echo "victim-build-$((6*7))" > /builds/victim-marker`,
		`echo "victim-ready-$((1+1))"`,
		`n=0; until [ -e /cache/release ]; do n=$((n+1)); [ $n -gt 1800 ] && exit 1; sleep 0.1; done`,
		`echo "victim-end: $(cat /cache/victim-marker) $(cat /builds/victim-marker)"`)
	b := api.newJob(attacker,
		`echo "seen-cache: $(cat /cache/victim-marker 2>/dev/null || echo none)"`,
		`echo "seen-builds: $(cat /builds/victim-marker 2>/dev/null || echo none)"`,
		"echo pwned > /cache/victim-marker; echo pwned > /builds/victim-marker")
	b.overrideVar("CI_PROJECT_ID", strconv.FormatInt(victim, 10))
	b.overrideVar("CI_JOB_ID", strconv.FormatInt(a.payload.ID, 10))
	c := api.newJob(slotter, `echo "slotter-ran-$((1+1))"`)
	c.overrideVar("CI_CONCURRENT_PROJECT_ID", "5")

	cmd, out := r.start("run", "--config", r.config, "--working-directory", r.dir)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		r.wait(cmd, out, time.Minute)
	}()
	api.enqueue(a)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(a.log(), "victim-ready-2") {
		if time.Now().After(deadline) {
			t.Fatalf("the victim's job never got ready; log:\n%s\nrunner log:\n%s", a.log(), out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	api.enqueue(b, c)
	for _, j := range []*fakeJob{b, c} {
		waitDone(t, j, 2*time.Minute)
	}
	// Let the victim's job finish: its cache is on the host.
	data, _ := filepath.Glob(filepath.Join(r.cacheDir, "runner-*", fmt.Sprintf("project-%d", victim), "data"))
	if len(data) != 1 {
		t.Fatalf("victim's cache directory: %v", data)
	}
	if err := os.WriteFile(filepath.Join(data[0], "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a, 2*time.Minute)

	if u, log := a.final(); u.State != "success" || !strings.Contains(log, "victim-end: victim-secret-42 victim-build-42") {
		t.Errorf("the victim's job: %s (%s), or its files changed:\n%s\nrunner log:\n%s", u.State, u.FailureReason, log, out)
	}
	if m, err := os.ReadFile(filepath.Join(data[0], "victim-marker")); err != nil || string(m) != "victim-secret-42\n" {
		t.Errorf("the victim's cache marker is %q (%v)", m, err)
	}
	for _, tc := range []struct {
		j    *fakeJob
		says string
	}{{b, "CI_PROJECT_ID"}, {c, "CI_CONCURRENT_PROJECT_ID"}} {
		u, log := tc.j.final()
		if u.State != "failed" || u.FailureReason != "script_failure" || !strings.Contains(log, "ERROR: podman-executor: ") || !strings.Contains(log, tc.says) {
			t.Errorf("job %d redefining %s: %s (%s), want a build failure naming the variable:\n%s", tc.j.payload.ID, tc.says, u.State, u.FailureReason, log)
		}
		if strings.Contains(log, "victim-secret-42") || strings.Contains(log, "victim-build-42") || strings.Contains(log, "slotter-ran-2") {
			t.Errorf("job %d ran its script (and read the victim's files?):\n%s", tc.j.payload.ID, log)
		}
	}
	for _, j := range []*fakeJob{a, b, c} {
		assertJobGone(t, j.payload.ID)
	}
}

// TestRealRunnerProtectedRefsKeepTheirCache: with split_protected_refs
// (the default), a job of a protected ref and a branch job of the same
// project have caches of their own under the real runner: the branch job,
// even calling itself protected in its own variables, neither sees nor
// changes what the protected job cached.
func TestRealRunnerProtectedRefsKeepTheirCache(t *testing.T) {
	t.Parallel()
	api := startJobsAPI(t)
	r := newRealRunner(t, api, 1, "")
	project := int64(uniqueID(43))
	p := api.newJob(project, `echo "protected-$((6*7))" > /cache/marker`, `echo "wrote: $(cat /cache/marker)"`)
	p.setVar("CI_COMMIT_REF_PROTECTED", "true")
	u := api.newJob(project, `echo "branch-sees: $(cat /cache/marker 2>/dev/null || echo nothing)"`, "echo poisoned > /cache/marker")
	u.setVar("CI_COMMIT_REF_PROTECTED", "false")
	u.overrideVar("CI_COMMIT_REF_PROTECTED", "true")
	p2 := api.newJob(project, `echo "protected-reads: $(cat /cache/marker)"`)
	p2.setVar("CI_COMMIT_REF_PROTECTED", "true")
	api.enqueue(p, u, p2)
	runnerLog := r.runSingle(3)
	for _, j := range []*fakeJob{p, u, p2} {
		waitDone(t, j, time.Minute)
		if st, log := j.final(); st.State != "success" {
			t.Fatalf("job %d: %s\n%s\nrunner log:\n%s", j.payload.ID, st.State, log, runnerLog)
		}
	}
	if _, log := u.final(); !strings.Contains(log, "branch-sees: nothing") {
		t.Errorf("the branch job saw the protected job's cache:\n%s", log)
	}
	if _, log := p2.final(); !strings.Contains(log, "protected-reads: protected-42") {
		t.Errorf("the branch job changed the protected jobs' cache:\n%s", log)
	}
}
