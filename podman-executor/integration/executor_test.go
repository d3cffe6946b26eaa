package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// uniqueID keeps job IDs apart between test runs on one podman service.
func uniqueID(n int) int { return int(time.Now().Unix()%100000)*100 + n }

// TestJobRunsInItsImage runs a whole job through the stage channel (the
// default with a local socket) and, with state_dir = "", through podman
// exec sessions (as with a remote podman).
func TestJobRunsInItsImage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, config, channel string
	}{
		{"stage channel", "", "channel=yes"},
		{"exec sessions", "state_dir = \"\"\n", "channel=no"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testJobRunsInItsImage(t, tt.config, tt.channel)
		})
	}
}

func testJobRunsInItsImage(t *testing.T, config, channel string) {
	r := newRunner(t, config)
	j := r.newJob(uniqueID(1))
	if channel == "channel=no" {
		j.ID += "1"
	}
	j.Scripts["build_script"] = "echo sh-is=$(readlink /bin/sh)\n" +
		"if test -p /.podman-executor/ctl; then echo channel=yes; else echo channel=no; fi\n" +
		"command -v gitlab-runner\n" +
		"touch /usr/local/bin/gitlab-runner 2>/dev/null && echo helper-writable || echo helper-read-only\n" +
		"mkdir -p /builds/p && echo built > /builds/p/out && cat /builds/p/out\n"
	jr := r.runJob(j)
	if jr.prepare.code != 0 || jr.cleanup.code != 0 {
		t.Fatalf("prepare %d cleanup %d:\n%s", jr.prepare.code, jr.cleanup.code, jr.log)
	}
	for _, stage := range stages {
		if jr.stages[stage].code != 0 {
			t.Errorf("%s exited %d", stage, jr.stages[stage].code)
		}
		if stage != "build_script" && !strings.Contains(jr.stages[stage].out, "stage="+stage) {
			t.Errorf("%s output %q", stage, jr.stages[stage].out)
		}
	}
	for _, want := range []string{"sh-is=/bin/busybox", "/usr/local/bin/gitlab-runner\n", "helper-read-only", "built", channel} {
		if !strings.Contains(jr.stages["build_script"].out, want) {
			t.Errorf("build_script output lacks %q:\n%s", want, jr.stages["build_script"].out)
		}
	}
	if _, err := os.Stat(filepath.Join(j.tmp, "exit-code")); !os.IsNotExist(err) {
		t.Errorf("exit code file written on success: %v", err)
	}
	r.assertGone(j)
}

func TestScriptExitCode(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	j := r.newJob(uniqueID(2))
	j.Scripts["build_script"] = "echo before\nexit 3\n"
	j.Scripts["after_script"] = "echo after-ran\n"
	jr := r.runJob(j)
	if got := jr.stages["build_script"].code; got != 1 {
		t.Fatalf("build_script exit %d, want 1:\n%s", got, jr.log)
	}
	b, err := os.ReadFile(filepath.Join(j.tmp, "exit-code"))
	if err != nil || strings.TrimSpace(string(b)) != "3" {
		t.Errorf("exit code file %q, %v; want 3", b, err)
	}
	if !strings.Contains(jr.stages["after_script"].out, "after-ran") {
		t.Errorf("after_script: %+v", jr.stages["after_script"])
	}
	if _, ran := jr.stages["archive_cache"]; ran {
		t.Error("stages after the failure ran")
	}
	r.assertGone(j)
}

func TestMissingImageIsSystemFailure(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	j := r.newJob(uniqueID(3))
	j.Image = "localhost/podman-executor-no-such-image:1"
	jr := r.runJob(j)
	if jr.prepare.code != 2 {
		t.Fatalf("prepare exit %d, want 2:\n%s", jr.prepare.code, jr.log)
	}
	if !strings.Contains(jr.prepare.out, "ERROR: podman-executor: pull localhost/podman-executor-no-such-image:1") {
		t.Errorf("prepare output:\n%s", jr.prepare.out)
	}
	if jr.cleanup.code != 0 {
		t.Errorf("cleanup after failed prepare exit %d:\n%s", jr.cleanup.code, jr.cleanup.out)
	}
	r.assertGone(j)
}

func TestCachePersistsAcrossJobs(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	token := fmt.Sprint(time.Now().UnixNano())
	first := r.newJob(uniqueID(4))
	first.Scripts["archive_cache"] = "echo " + token + " > /cache/token\n"
	if jr := r.runJob(first); jr.stages["archive_cache"].code != 0 {
		t.Fatalf("first job:\n%s", jr.log)
	}
	second := r.newJob(uniqueID(5))
	second.Scripts["restore_cache"] = "cat /cache/token\n"
	jr := r.runJob(second)
	if !strings.Contains(jr.stages["restore_cache"].out, token) {
		t.Errorf("second job did not see the cache:\n%s", jr.log)
	}
	r.assertGone(first)
	r.assertGone(second)
}

func TestServiceAnswersOnItsAlias(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	j := r.newJob(uniqueID(6))
	j.Services = `[{"name":"` + r.env.image + `","alias":"web","entrypoint":["sh","-c","echo hello-from-service > /var/www/index.html && exec httpd -f -p 80 -h /var/www"],"command":null}]`
	fetch := func(host string) string {
		return "ok=; for i in $(seq 1 50); do if wget -q -O - http://" + host + "/; then ok=1; break; fi; sleep 0.2; done; [ -n \"$ok\" ]\n"
	}
	j.Scripts["build_script"] = fetch("web") + fetch("localhost-busybox-test")
	jr := r.runJob(j)
	if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 {
		t.Fatalf("prepare %d build %d:\n%s", jr.prepare.code, jr.stages["build_script"].code, jr.log)
	}
	if n := strings.Count(jr.stages["build_script"].out, "hello-from-service"); n != 2 {
		t.Errorf("service answered %d times, want 2:\n%s", n, jr.log)
	}
	r.assertGone(j)
}

func TestConcurrentJobsDoNotCollide(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	var wg sync.WaitGroup
	runs := make([]jobRun, 2)
	jobs := make([]*job, 2)
	for i := range jobs {
		jobs[i] = r.newJob(uniqueID(7 + i))
		jobs[i].Concurrent = fmt.Sprint(i)
		jobs[i].Scripts["build_script"] = fmt.Sprintf("mkdir -p /builds && echo job-%d > /builds/who && sleep 1 && cat /builds/who\n", i)
	}
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = r.runJob(jobs[i])
		}()
	}
	wg.Wait()
	for i, jr := range runs {
		if jr.prepare.code != 0 || jr.stages["build_script"].code != 0 || jr.cleanup.code != 0 {
			t.Errorf("job %d failed:\n%s", i, jr.log)
		}
		if !strings.Contains(jr.stages["build_script"].out, fmt.Sprintf("job-%d", i)) {
			t.Errorf("job %d saw another job's files:\n%s", i, jr.log)
		}
		r.assertGone(jobs[i])
	}
}

// TestKilledJobIsRemovedByGC is not parallel: gc --max-age 0s would also
// collect the other tests' jobs between two of their stages. (Sequential
// tests run before the parallel ones start.)
func TestKilledJobIsRemovedByGC(t *testing.T) {
	r := newRunner(t, "")
	j := r.newJob(uniqueID(9))
	r.config(j)
	if res := r.call(j, "prepare"); res.code != 0 {
		t.Fatalf("prepare:\n%s", res.out)
	}
	script := filepath.Join(j.tmp, "script")
	if err := os.WriteFile(script, []byte("echo started\nuntil [ -e /tmp/go ]; do sleep 0.1; done\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd, out := r.start(j, "run", script, "build_script")
	r.waitOutput(out, "started")
	if err := kill(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	dry := r.call(j, "gc", "--max-age", "0s", "--dry-run")
	if dry.code != 0 {
		t.Fatalf("gc --dry-run:\n%s", dry.out)
	}
	// While the orphaned script still runs the job is not over: gc keeps
	// it (its stage loop says a stage runs); once it ends, gc removes the
	// container.
	if res := r.call(j, "gc", "--max-age", "0s"); res.code != 0 || strings.Contains(res.out, j.name()) {
		t.Fatalf("gc while the orphaned script runs:\n%s", res.out)
	}
	if _, err := r.env.engine.Exec(context.Background(), j.name(), container.Exec{Cmd: []string{"touch", "/tmp/go"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		res := r.call(j, "gc", "--max-age", "0s")
		if res.code != 0 {
			t.Fatalf("gc:\n%s", res.out)
		}
		if strings.Contains(res.out, "removed job "+j.name()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gc never removed %s; last output:\n%s", j.name(), res.out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := r.env.engine.Inspect(context.Background(), j.name()); err == nil {
		t.Error("container still there after gc")
	}
	r.assertGone(j)
}

func TestSIGTERMStopsTheScript(t *testing.T) {
	t.Parallel()
	r := newRunner(t, "")
	j := r.newJob(uniqueID(10))
	r.config(j)
	if res := r.call(j, "prepare"); res.code != 0 {
		t.Fatalf("prepare:\n%s", res.out)
	}
	defer r.call(j, "cleanup")
	script := filepath.Join(j.tmp, "script")
	if err := os.WriteFile(script, []byte("echo started\nsleep 300\necho not-reached\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd, out := r.start(j, "run", script, "build_script")
	r.waitOutput(out, "started")
	if err := kill(cmd, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r.waitExit(cmd, out)
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("canceled stage exited %d, want the system failure code 2:\n%s", code, out)
	}
	if strings.Contains(out.String(), "not-reached") || !strings.Contains(out.String(), "started") {
		t.Errorf("output:\n%s", out)
	}
	ps := filepath.Join(j.tmp, "ps")
	if err := os.WriteFile(ps, []byte("ps -o args | grep -v grep | grep 'sleep 300' && exit 1; exit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if res := r.call(j, "run", ps, "check"); res.code != 0 {
		t.Errorf("sleep still running in the container:\n%s", res.out)
	}
}
