package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// planterSource is a job's attack on the stage channel: it learns the
// host PID of the running stage's driver from the channel's file names
// (STAGE-PID.in), then plants symbolic links named for every stage and
// hundreds of PIDs around it (STAGE-PID.in and .pid, the files the driver
// once wrote), in every channel directory it can write, pointing at the
// host paths of sentinel files (the driver, on the host, would follow
// them). It plants a first batch, touches READY, then keeps
// planting ahead of each new stage it sees. Each batch is logged as
// "planted FROM-TO N" (PIDs, links made).
const planterSource = `package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

var stages = []string{"prepare_script", "get_sources", "clear_worktree", "restore_cache", "download_artifacts",
	"step_script", "step_release", "build_script", "after_script", "archive_cache", "archive_cache_on_failure",
	"upload_artifacts_on_success", "upload_artifacts_on_failure", "cleanup_file_variables"}

var name = regexp.MustCompile("^[a-z_]+-([0-9]+)\\.[a-z]+$")

func main() {
	sentinels, ready := os.Args[1], os.Args[2]
	dirs, _ := filepath.Glob("/.podman-executor*")
	// The host's pid_max, where the drivers' PIDs wrap: the job's own
	// /proc may show its namespace's, another number.
	pidMax, _ := strconv.Atoi(os.Args[3])
	seen := func() int {
		top := 0
		for _, d := range dirs {
			es, _ := os.ReadDir(d)
			for _, e := range es {
				if m := name.FindStringSubmatch(e.Name()); m != nil {
					n, _ := strconv.Atoi(m[1])
					top = max(top, n)
				}
			}
		}
		return top
	}
	done := map[int]bool{}
	plant := func(p, width int) {
		made, lo, hi := 0, 0, 0
		for k := -100; k <= width; k++ {
			pid := p + k
			if pid >= pidMax {
				pid = 300 + pid - pidMax // the kernel wraps past pid_max
			}
			if pid <= 0 || done[pid] {
				continue
			}
			done[pid] = true
			if lo == 0 {
				lo = pid
			}
			hi = pid
			for _, s := range stages {
				for _, ext := range []string{"in", "pid"} {
					for _, d := range dirs {
						if os.Symlink(filepath.Join(sentinels, ext), filepath.Join(d, fmt.Sprintf("%s-%d.%s", s, pid, ext))) == nil {
							made++
						}
					}
				}
			}
		}
		fmt.Printf("planted %d-%d %d\n", lo, hi, made)
	}
	p := seen()
	if p == 0 {
		fmt.Println("no stage file seen in", dirs)
		os.Exit(1)
	}
	plant(p, 1000)
	os.WriteFile(ready, nil, 0o644)
	plant(p, 1500)
	for {
		time.Sleep(20 * time.Millisecond)
		if q := seen(); q > p || q < p-pidMax/2 {
			p = q
			plant(p, 1500)
		}
	}
}
`

// hostPIDMax is the host's pid_max, past which its PIDs start again
// from 300.
func hostPIDMax(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid_max: %v", err)
	}
	return n
}

// inWrapped reports whether pid is in the batch of PIDs from lo to hi,
// which wraps past pid_max when hi < lo.
func inWrapped(lo, hi, pid int) bool {
	if lo <= hi {
		return lo <= pid && pid <= hi
	}
	return pid >= lo || pid <= hi
}

// TestRealRunnerChannelLinks: a job plants symbolic links in the stage
// channel (planterSource) for every stage and hundreds of PIDs around the
// one it sees, pointing at sentinel files on the host, while the real
// runner calls the driver (root here, as with rootful podman) for the
// job's remaining stages: after_script, archive_cache,
// upload_artifacts_on_success, cleanup_file_variables. The sentinels are
// mounted read-only into the job at the same path, so a link resolves to
// the same file on both sides and only the driver could change them: they
// must keep their content and mode. The job also finds the driver's
// channel directory read-only.
func TestRealRunnerChannelLinks(t *testing.T) {
	t.Parallel()
	api := startJobsAPIOn(t, "127.0.0.1")
	tools := t.TempDir()
	if err := os.WriteFile(filepath.Join(tools, "main.go"), []byte(planterSource), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(tools, "planter"), "main.go")
	build.Dir = tools
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the planter: %v\n%s", err, out)
	}
	sentinels := t.TempDir()
	const content = "sentinel\n"
	exts := []string{"in", "pid"}
	for _, ext := range exts {
		if err := os.WriteFile(filepath.Join(sentinels, ext), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := newRealRunner(t, api, 1, fmt.Sprintf("network_mode = \"host\"\nvolumes = [%q, %q]\n",
		tools+":/attack:ro", sentinels+":"+sentinels+":ro"))
	// A wrapper in the driver's place records each run stage's PID: it
	// execs the driver, which keeps it.
	pids := filepath.Join(r.dir, "pids")
	wrapper := filepath.Join(r.dir, "driver")
	body := fmt.Sprintf("#!/bin/sh\nif [ \"$3\" = run ]; then echo \"$5 $$\" >>%q; fi\nexec %q \"$@\"\n", pids, shared.bin)
	if err := os.WriteFile(wrapper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(r.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.config, []byte(strings.ReplaceAll(string(cfg), fmt.Sprintf("%q", shared.bin), fmt.Sprintf("%q", wrapper))), 0o600); err != nil {
		t.Fatal(err)
	}
	j := api.newJob(int64(uniqueID(38)),
		fmt.Sprintf(`/attack/planter %s /tmp/planted %d </dev/null >/tmp/plant.log 2>&1 &`, sentinels, hostPIDMax(t)),
		`n=0; until [ -e /tmp/planted ]; do n=$((n+1)); [ $n -gt 1200 ] && { cat /tmp/plant.log; exit 1; }; sleep 0.1; done`,
		"cat /tmp/plant.log",
		"mkdir -p out && echo built > out/result.txt")
	j.payload.Steps = append(j.payload.Steps, payloadStep{Name: "after_script", Timeout: 60, When: "always",
		Script: []string{
			`touch /.podman-executor/probe 2>/dev/null && echo "driver-dir-$((1+1))-writable" || echo "driver-dir-$((1+1))-read-only"`,
			"cat /tmp/plant.log",
		}})
	j.payload.Cache = []payloadCache{{Key: "links", Paths: []string{"out/"}, Policy: "pull-push", When: "on_success"}}
	j.payload.Artifacts = []payloadArtif{{Name: "result", Paths: []string{"out/"}, When: "on_success", Type: "archive", Format: "zip", ExpireIn: "1 day"}}
	api.enqueue(j)
	runnerLog := r.runSingle(1)
	waitDone(t, j, 2*time.Minute)
	u, log := j.final()
	if u.State != "success" {
		t.Errorf("job %s (%s):\n%s\nrunner log:\n%s", u.State, u.FailureReason, log, runnerLog)
	}
	for _, ext := range exts {
		p := filepath.Join(sentinels, ext)
		st, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		if string(b) != content || st.Mode() != 0o600 {
			t.Errorf("host file %s changed through a link the job planted: mode %v, content %q (want -rw------- %q)", p, st.Mode(), b, content)
		}
	}
	if !strings.Contains(log, "driver-dir-2-read-only") {
		t.Errorf("the job could write into the driver's channel directory:\n%s", log)
	}
	// The attack was in place: the links covered after_script's driver.
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^after_script (\d+)$`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no after_script stage in the driver's calls:\n%s", b)
	}
	own, _ := strconv.Atoi(m[1])
	covered := false
	for _, batch := range regexp.MustCompile(`planted (\d+)-(\d+) (\d+)`).FindAllStringSubmatch(log, -1) {
		lo, _ := strconv.Atoi(batch[1])
		hi, _ := strconv.Atoi(batch[2])
		n, _ := strconv.Atoi(batch[3])
		covered = covered || (n > 0 && inWrapped(lo, hi, own))
	}
	if !covered {
		t.Errorf("the planted links did not cover after_script's driver (PID %d): the test proves nothing\nstages: %s\njob log:\n%s", own, b, log)
	}
	t.Logf("run stages and their drivers' PIDs:\n%s", b)
	if ups := j.uploads(); len(ups) != 1 {
		t.Errorf("%d artifact uploads, want 1 (upload_artifacts_on_success ran through the channel)", len(ups))
	}
	assertJobGone(t, j.payload.ID)
}
