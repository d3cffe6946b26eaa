package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRealRunnerTrivialJobStages: the stages the real runner calls for a
// trivial job (one script line, GIT_STRATEGY none, no cache, artifacts or
// after_script) are trivialJobStages, the sequence BenchmarkJobOverhead
// drives; the driver's calls are recorded by a wrapper in its place.
func TestRealRunnerTrivialJobStages(t *testing.T) {
	t.Parallel()
	api := startJobsAPI(t)
	r := newRealRunner(t, api, 1, "")
	calls := filepath.Join(r.dir, "calls")
	wrapper := filepath.Join(r.dir, "driver")
	// The runner calls: --config FILE STAGE [SCRIPT RUN-STAGE].
	body := fmt.Sprintf("#!/bin/sh\nif [ \"$3\" = run ]; then echo \"run $5\" >>%q; else echo \"$3\" >>%q; fi\nexec %q \"$@\"\n", calls, calls, shared.bin)
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
	j := api.newJob(int64(uniqueID(30)), "echo trivial")
	api.enqueue(j)
	runnerLog := r.runSingle(1)
	waitDone(t, j, time.Minute)
	if u, log := j.final(); u.State != "success" {
		t.Fatalf("job %s:\n%s\nrunner log:\n%s", u.State, log, runnerLog)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(strings.ReplaceAll(string(b), "run ", "run:"))
	want := []string{"config", "prepare"}
	for _, s := range trivialJobStages {
		want = append(want, "run:"+s)
	}
	want = append(want, "cleanup")
	if !slices.Equal(got, want) {
		t.Errorf("the runner called\n%q\nthe benchmark drives\n%q", got, want)
	}
}
