package gitlabtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/internal/realtest"
)

// gitLabRunner returns the real GitLab Runner: DEPSD_GITLAB_RUNNER, or the
// one in shared/tools beside the repository, unpacked by its install.sh.
func gitLabRunner(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("DEPSD_GITLAB_RUNNER"); bin != "" {
		_, err := os.Stat(bin)
		realtest.Require(t, realtest.GitLabRunner, err == nil, "DEPSD_GITLAB_RUNNER: "+bin)
		return bin
	}
	dir, _ := os.Getwd()
	for dir != "/" {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	install := filepath.Join(dir, "..", "shared", "tools", "gitlab-runner", "install.sh")
	_, err := os.Stat(install)
	realtest.Require(t, realtest.GitLabRunner, err == nil, "neither DEPSD_GITLAB_RUNNER nor "+install)
	out, err := exec.Command(install, t.TempDir()).Output()
	realtest.Require(t, realtest.GitLabRunner, err == nil, "install.sh failed")
	return strings.TrimSpace(string(out))
}

// TestRealRunnerRunsAPipeline: the real GitLab Runner (shell executor)
// takes the jobs of a pipeline from the fake, clones the project over
// git's HTTP protocol with the job token, runs the scripts with GitLab's
// predefined variables, streams the log, and reports a failing script's
// own exit code; the pipeline ends as its jobs did.
func TestRealRunnerRunsAPipeline(t *testing.T) {
	bin := gitLabRunner(t)
	_, err := exec.LookPath("git")
	realtest.Require(t, realtest.GitLabRunner, err == nil, "git is not installed")

	s := New(Options{Pipelines: Behavior{Jobs: true}})
	defer s.Close()
	ci := `build:
  stage: build
  variables:
    GREETING: hello
  script:
    - echo "$GREETING from $CI_PROJECT_PATH at $CI_COMMIT_SHORT_SHA"
    - cat Containerfile
    - test "$CI_PIPELINE_SOURCE" = api
    - exit "${DEPSD_EXIT:-0}"
`
	if _, err := s.AddProject(Project{Path: "g/base", Files: map[string]string{".gitlab-ci.yml": ci, "Containerfile": "FROM scratch\nCOPY app /app\n"}}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runJob := func(vars map[string]string) (Pipeline, []Job) {
		t.Helper()
		runner, log := startRunSingle(ctx, t, bin, s, work)
		id := createPipelineWithVars(t, s, "g/base", vars)
		if err := runner.Wait(); err != nil {
			t.Fatalf("gitlab-runner run-single: %v\n%s", err, log.String())
		}
		pl, err := s.WaitPipeline(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return pl, s.Jobs(id)
	}

	pl, jobs := runJob(nil)
	if pl.Status != "success" {
		t.Errorf("pipeline: %s, want success; log:\n%s", pl.Status, jobs[0].Trace)
	}
	for _, want := range []string{"hello from g/base at " + pl.SHA[:8], "COPY app /app", "Job succeeded"} {
		if !strings.Contains(jobs[0].Trace, want) {
			t.Errorf("job log lacks %q:\n%s", want, jobs[0].Trace)
		}
	}

	pl, jobs = runJob(map[string]string{"DEPSD_EXIT": "3"})
	if pl.Status != "failed" || jobs[0].ExitCode != 3 || jobs[0].FailureReason != "script_failure" {
		t.Errorf("failing script: pipeline %s, job exit code %d (%s), want failed, 3, script_failure; log:\n%s",
			pl.Status, jobs[0].ExitCode, jobs[0].FailureReason, jobs[0].Trace)
	}
}

// TestRealRunnerStopsACanceledJob: a pipeline canceled while its job runs
// ends canceled, and the real runner, told by the Job-Status of its next
// trace update, stops the job instead of running it to its end.
func TestRealRunnerStopsACanceledJob(t *testing.T) {
	bin := gitLabRunner(t)
	s := New(Options{Pipelines: Behavior{Jobs: true}})
	defer s.Close()
	// A job that writes a line a second: the runner sends its log every
	// update interval and learns of the cancel from the answer.
	ci := "build:\n  stage: build\n  script:\n    - echo started\n    - for i in $(seq 600); do echo tick; sleep 1; done\n"
	if _, err := s.AddProject(Project{Path: "g/base", Files: map[string]string{".gitlab-ci.yml": ci}}); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runner, log := startRunSingle(ctx, t, bin, s, work)
	id := createAPIPipeline(t, s, "g/base")
	err := s.waitFor(ctx, func() bool {
		js := s.jobsOf(id)
		return len(js) == 1 && strings.Contains(string(js[0].trace), "started")
	})
	if err != nil {
		t.Fatalf("the job never started: %v\n%s\ntrace:\n%s", err, log.String(), s.Jobs(id)[0].Trace)
	}
	if err := s.CancelPipeline(id); err != nil {
		t.Fatal(err)
	}
	_ = runner.Wait() // run-single ends once the canceled job is stopped
	if ctx.Err() != nil {
		t.Fatalf("the runner ran the canceled job on:\n%s", log.String())
	}
	if pl := s.Pipelines("g/base")[0]; pl.Status != "canceled" {
		t.Errorf("pipeline: %s, want canceled", pl.Status)
	}
	if !strings.Contains(log.String(), "canceled") {
		t.Errorf("the runner's log does not say the job was canceled:\n%s", log.String())
	}
}

// startRunSingle starts the real runner for one job of s with the shell
// executor, working in work; log collects what it prints.
func startRunSingle(ctx context.Context, t *testing.T, bin string, s *Server, work string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	runner := exec.CommandContext(ctx, bin, "run-single", "--url", s.URL, "--token", DefaultRunnerToken,
		"--executor", "shell", "--shell", "bash", "--builds-dir", filepath.Join(work, "builds"),
		"--cache-dir", filepath.Join(work, "cache"), "--max-builds", "1", "--wait-timeout", "60")
	runner.Dir = work
	log := &strings.Builder{}
	runner.Stdout, runner.Stderr = log, log
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	return runner, log
}
