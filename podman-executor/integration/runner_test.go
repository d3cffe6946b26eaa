package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests in this file drive podman-executor through the real GitLab
// Runner (gitlab-runner run-single or run, 17.9.3) against fakeJobsAPI: the
// runner writes the job's scripts, calls the driver's stages, streams the
// log and reports the outcome as it does against GitLab. Scripts print
// computed values ($((40+2))) so that the trace's echo of a command is not
// mistaken for its output.

// TestRealRunnerJobOutcome: what a job reports to GitLab through the real
// runner, one job per case, each on its own runner and fake GitLab.
func TestRealRunnerJobOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script []string
		adjust func(j *fakeJob)
		// what GitLab receives
		state, failureReason string
		exitCode             int
		logHas, logLacks     []string
	}{
		{
			name:   "success with output",
			script: []string{`echo "hello-$((40+2)) from job $CI_JOB_ID"`, `echo "image-$(cat /etc/passwd | head -c 4)"`},
			state:  "success",
			logHas: []string{"hello-42 from job ", "image-root", "Job succeeded"},
		},
		{
			// The script's own exit code reaches GitLab (exit_code, for
			// allow_failure: exit_codes) through BUILD_EXIT_CODE_FILE,
			// which runners read from 17.9 on.
			name:          "failing script's own exit code",
			script:        []string{`echo "before-$((1+1))"`, "exit 3", `echo "after-$((1+1))"`},
			state:         "failed",
			failureReason: "script_failure",
			exitCode:      3,
			logHas:        []string{"before-2", "exit status 3"},
			logLacks:      []string{"after-2"},
		},
		{
			name: "service reached by its alias",
			script: []string{"for i in $(seq 1 50); do wget -q -O - http://web/ && break; sleep 0.2; done",
				`wget -q -O - http://localhost-busybox-test/ | sed "s/^/again-/"`},
			adjust: func(j *fakeJob) {
				j.payload.Services = []payloadImage{{Name: shared.image, Alias: "web",
					Entrypoint: []string{"sh", "-c", "echo hello-from-service > /var/www/index.html && exec httpd -f -p 80 -h /var/www"}}}
			},
			state:  "success",
			logHas: []string{"\nhello-from-service", "again-hello-from-service"},
		},
		{
			name:   "job timeout",
			script: []string{`echo "sleeping-$((2+2))"`, "sleep 300", `echo "woke-$((2+2))"`},
			adjust: func(j *fakeJob) {
				// Long enough for prepare on a loaded machine: the timeout
				// counts from the job's start.
				j.payload.RunnerInfo.Timeout = 8
			},
			state:         "failed",
			failureReason: "job_execution_timeout",
			logHas:        []string{"sleeping-4", "execution took longer than"},
			logLacks:      []string{"woke-4"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := startJobsAPI(t)
			r := newRealRunner(t, api, 1, "")
			j := api.newJob(int64(uniqueID(30)), tc.script...)
			if tc.adjust != nil {
				tc.adjust(j)
			}
			api.enqueue(j)
			runnerLog := r.runSingle(1)
			waitDone(t, j, time.Minute)
			u, log := j.final()
			if u.State != tc.state || u.FailureReason != tc.failureReason || u.ExitCode != tc.exitCode {
				t.Errorf("GitLab got state %q failure_reason %q exit_code %d, want %q %q %d\njob log:\n%s\nrunner log:\n%s",
					u.State, u.FailureReason, u.ExitCode, tc.state, tc.failureReason, tc.exitCode, log, runnerLog)
			}
			if m := missing(log, tc.logHas...); len(m) > 0 {
				t.Errorf("job log lacks %q:\n%s", m, log)
			}
			for _, s := range tc.logLacks {
				if strings.Contains(log, s) {
					t.Errorf("job log has %q:\n%s", s, log)
				}
			}
			if u.Output.Bytesize != len(log) {
				t.Errorf("runner reported a %d-byte log, GitLab holds %d bytes", u.Output.Bytesize, len(log))
			}
			assertJobGone(t, j.payload.ID)
		})
	}
}

// TestRealRunnerCancel: a job canceled in GitLab while its script runs is
// stopped and cleaned up. The runner learns it from the answer to its next
// log upload (the script prints every second: a silent job would learn it
// from the runner's keep-alive update, every 30 s): a 403 with
// Job-Status: canceled, or, with graceful cancel, Job-Status: canceling,
// after which the runner still runs after_script and reports the end.
func TestRealRunnerCancel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status string
		// with graceful cancel: after_script runs, and the runner's
		// final update reaches GitLab
		graceful bool
	}{
		{"canceled", false},
		{"canceling", true},
	} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			api := startJobsAPI(t)
			r := newRealRunner(t, api, 1, "")
			j := api.newJob(int64(uniqueID(31)), `echo "sleeping-$((3+3))"`,
				`for i in $(seq 1 300); do echo "tick-$i"; sleep 1; done`, `echo "woke-$((3+3))"`)
			j.payload.Steps = append(j.payload.Steps, payloadStep{Name: "after_script",
				Script: []string{`echo "after-script-$((3+3))"`}, Timeout: 60, When: "always"})
			api.enqueue(j)
			cmd, out := r.start("run-single", "--config", r.config, "--runner", r.name, "--max-builds", "1", "--wait-timeout", "120")
			deadline := time.Now().Add(2 * time.Minute)
			for !strings.Contains(j.log(), "sleeping-6") {
				if time.Now().After(deadline) {
					t.Fatalf("job never started its script; log:\n%s\nrunner log:\n%s", j.log(), out)
				}
				time.Sleep(100 * time.Millisecond)
			}
			j.cancel(tc.status)
			// The runner exits once it has stopped the job and run cleanup.
			r.wait(cmd, out, 2*time.Minute)
			u, log := j.final()
			if strings.Contains(log, "woke-6") {
				t.Errorf("the canceled script went on:\n%s", log)
			}
			if tc.graceful {
				if u.State != "failed" || !strings.Contains(log, "after-script-6") {
					t.Errorf("graceful cancel: final state %q, want failed, after_script run:\n%s\nrunner log:\n%s", u.State, log, out)
				}
			} else if !strings.Contains(out.String(), "Job failed: canceled") {
				t.Errorf("runner log does not say the job was canceled:\n%s", out)
			}
			assertJobGone(t, j.payload.ID)
		})
	}
}

// TestRealRunnerCache: a job pushes a cache (the runner's cache-archiver,
// run by the driver in the job container, into the local cache directory)
// and the next job of the project pulls it.
func TestRealRunnerCache(t *testing.T) {
	t.Parallel()
	api := startJobsAPI(t)
	r := newRealRunner(t, api, 1, "")
	project := int64(uniqueID(32))
	nonce := fmt.Sprintf("nonce-%d", time.Now().UnixNano())
	cache := []payloadCache{{Key: "deps", Paths: []string{"vendor/"}, Policy: "pull-push", When: "on_success"}}
	push := api.newJob(project, "mkdir -p vendor", `echo "$CACHE_NONCE" > vendor/token`)
	push.setVar("CACHE_NONCE", nonce)
	push.payload.Cache = cache
	pull := api.newJob(project, "cat vendor/token")
	pull.payload.Cache = cache
	api.enqueue(push, pull)
	runnerLog := r.runSingle(2)
	for _, j := range []*fakeJob{push, pull} {
		waitDone(t, j, time.Minute)
		if u, log := j.final(); u.State != "success" {
			t.Fatalf("job %d: %s\n%s\nrunner log:\n%s", j.payload.ID, u.State, log, runnerLog)
		}
		assertJobGone(t, j.payload.ID)
	}
	if t.Failed() {
		t.Logf("runner log:\n%s", runnerLog)
	}
	if _, log := push.final(); !strings.Contains(log, "Created cache") {
		t.Errorf("first job did not archive the cache:\n%s", log)
	}
	if _, log := pull.final(); !strings.Contains(log, "Successfully extracted cache") || !strings.Contains(log, "\n"+nonce) {
		t.Errorf("second job did not get the first job's cache (%s):\n%s", nonce, log)
	}
}

// TestRealRunnerConcurrentJobs: `gitlab-runner run` with concurrent = 3
// runs three jobs of one project at once. Each job waits, in the project's
// cache directory (which all three share), until all three have started:
// the jobs succeed only if they really run side by side.
func TestRealRunnerConcurrentJobs(t *testing.T) {
	t.Parallel()
	api := startJobsAPI(t)
	r := newRealRunner(t, api, 3, "")
	project := int64(uniqueID(33))
	var jobs []*fakeJob
	for range 3 {
		j := api.newJob(project, "touch /cache/started-$CI_JOB_ID",
			`n=0; while [ "$(ls /cache | grep -c started-)" -lt 3 ]; do n=$((n+1)); if [ $n -gt 600 ]; then echo "alone-$((1+1))"; exit 1; fi; sleep 0.1; done`,
			`echo "together-$((1+1)) in slot $CI_CONCURRENT_ID"`)
		jobs = append(jobs, j)
	}
	api.enqueue(jobs...)
	cmd, out := r.start("run", "--config", r.config, "--working-directory", r.dir)
	defer func() {
		// SIGQUIT: stop taking jobs, let running ones finish, exit.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		r.wait(cmd, out, time.Minute)
	}()
	slots := map[string]bool{}
	for _, j := range jobs {
		waitDone(t, j, 3*time.Minute)
		u, log := j.final()
		if u.State != "success" || !strings.Contains(log, "together-2 in slot ") {
			t.Errorf("job %d: %s:\n%s\nrunner log:\n%s", j.payload.ID, u.State, log, out)
			continue
		}
		_, slot, _ := strings.Cut(log, "together-2 in slot ")
		slot, _, _ = strings.Cut(slot, "\n")
		slots[slot] = true
	}
	if len(slots) != 3 {
		t.Errorf("jobs ran in concurrent slots %v, want 3 different ones", slots)
	}
	for _, j := range jobs {
		assertJobGone(t, j.payload.ID)
	}
}

// TestRealRunnerGitSources: the runner's own get_sources (git init, fetch,
// checkout of the job's SHA) runs in the helper container (helper_image:
// Debian with git) against a repository served by `git http-backend`, and
// the busybox job sees the checkout. The git server listens on the host's
// 127.0.0.1, so the job's containers use network_mode = "host".
func TestRealRunnerGitSources(t *testing.T) {
	t.Parallel()
	helper := helperImage(t)
	api := startJobsAPI(t)
	r := newRealRunner(t, api, 1, fmt.Sprintf("helper_image = %q\nnetwork_mode = \"host\"\n", helper))
	g := startGitServer(t)
	sha := g.commit(t, "README", "hello from git\n")
	j := api.newJob(int64(uniqueID(34)), `echo "readme: $(cat README)"`, "git --version || echo no-git-in-job-image")
	j.setVar("GIT_STRATEGY", "fetch")
	host := strings.TrimPrefix(g.url, "http://")
	j.payload.GitInfo.RepoURL = "http://gitlab-ci-token:" + j.payload.Token + "@" + host
	j.payload.GitInfo.Sha = sha
	j.setVar("CI_REPOSITORY_URL", j.payload.GitInfo.RepoURL)
	j.setVar("CI_COMMIT_SHA", sha)
	api.enqueue(j)
	runnerLog := r.runSingle(1)
	waitDone(t, j, time.Minute)
	u, log := j.final()
	if u.State != "success" {
		t.Fatalf("state %q:\n%s\nrunner log:\n%s", u.State, log, runnerLog)
	}
	if m := missing(log, "Fetching changes", "Checking out "+sha[:8], "readme: hello from git", "no-git-in-job-image"); len(m) > 0 {
		t.Errorf("job log lacks %q:\n%s", m, log)
	}
	assertJobGone(t, j.payload.ID)
}

// TestRealRunnerArtifacts: the runner's artifacts-uploader, run by the
// driver in the job container, uploads the job's artifacts to GitLab,
// which the container must reach: on a bridge network the fake GitLab
// listens on the host's address on podman's network (as a real GitLab is
// reached by its address); with network_mode = "host", on 127.0.0.1.
func TestRealRunnerArtifacts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, config string
		listen       func(t *testing.T) string
	}{
		{"bridge network", "", podmanGateway},
		{"host network", "network_mode = \"host\"\n", func(*testing.T) string { return "127.0.0.1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if shared.skip != "" {
				t.Skip(shared.skip)
			}
			api := startJobsAPIOn(t, tc.listen(t))
			r := newRealRunner(t, api, 1, tc.config)
			testArtifacts(t, api, r)
		})
	}
}

func testArtifacts(t *testing.T, api *fakeJobsAPI, r *realRunner) {
	j := api.newJob(int64(uniqueID(35)), "mkdir -p out", `echo "built-$((40+2))" > out/result.txt`, "echo not-an-artifact > other.txt")
	j.payload.Artifacts = []payloadArtif{{Name: "result", Paths: []string{"out/"}, When: "on_success", Type: "archive", Format: "zip", ExpireIn: "1 day"}}
	api.enqueue(j)
	runnerLog := r.runSingle(1)
	waitDone(t, j, time.Minute)
	u, log := j.final()
	if u.State != "success" {
		t.Fatalf("state %q:\n%s\nrunner log:\n%s", u.State, log, runnerLog)
	}
	ups := j.uploads()
	if len(ups) != 1 {
		t.Fatalf("%d artifact uploads, want 1:\n%s", len(ups), log)
	}
	if q := ups[0].query; q["artifact_format"] != "zip" || q["artifact_type"] != "archive" || q["expire_in"] != "1 day" {
		t.Errorf("upload query %v", q)
	}
	files, err := ups[0].files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files["out/result.txt"] != "built-42\n" {
		t.Errorf("artifact holds %q, want only out/result.txt = built-42", files)
	}
	if !strings.Contains(log, "Uploading artifacts") {
		t.Errorf("job log does not show the upload:\n%s", log)
	}
	assertJobGone(t, j.payload.ID)
}
