package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/executor"
)

// TestBuildsVolumePersists: with builds_volume = true the builds directory
// survives the job in a labelled volume per runner, project and concurrent
// id (the next job of that slot finds its checkout), and gc removes it
// once unused for --cache-max-age, never while a job uses it.
func TestBuildsVolumePersists(t *testing.T) {
	r := newRunner(t, "builds_volume = true\n")
	project := fmt.Sprint(time.Now().UnixNano() % 1000000)
	token := fmt.Sprint(time.Now().UnixNano())
	newJob := func(n int, concurrent string) *job {
		j := r.newJob(uniqueID(n))
		j.Project, j.Concurrent = project, concurrent
		return j
	}
	first := newJob(60, "0")
	first.Scripts["get_sources"] = "mkdir -p /builds/g/p && echo " + token + " > /builds/g/p/checkout\n"
	if jr := r.runJob(first); jr.stages["get_sources"].code != 0 {
		t.Fatalf("first job:\n%s", jr.log)
	}
	second := newJob(61, "0")
	second.Scripts["get_sources"] = "cat /builds/g/p/checkout\n"
	jr := r.runJob(second)
	if !strings.Contains(jr.stages["get_sources"].out, token) {
		t.Errorf("second job of the slot did not find the first's checkout:\n%s", jr.log)
	}
	other := newJob(62, "1")
	other.Scripts["get_sources"] = "cat /builds/g/p/checkout 2>/dev/null && echo shared || echo fresh\n"
	if jr := r.runJob(other); !strings.Contains(jr.stages["get_sources"].out, "fresh") {
		t.Errorf("another concurrent slot shares the builds directory:\n%s", jr.log)
	}
	ctx := context.Background()
	vols, err := shared.engine.ListVolumes(ctx, map[string]string{executor.LabelProject: project, executor.LabelRole: "builds"})
	if err != nil || len(vols) != 2 {
		t.Fatalf("builds volumes %v (%v), want one per concurrent slot", vols, err)
	}
	for _, v := range vols {
		if v.Labels[executor.LabelManaged] != "true" || v.Labels[executor.LabelRunner] != "itest" {
			t.Errorf("volume %s labels %v", v.Name, v.Labels)
		}
	}

	// While a job of slot 0 runs, gc keeps its volume.
	busy := newJob(63, "0")
	r.config(busy)
	if res := r.call(busy, "prepare"); res.code != 0 {
		t.Fatalf("prepare:\n%s", res.out)
	}
	gc := r.call(busy, "gc", "--max-age", "1000h", "--cache-max-age", "1ns")
	if gc.code != 0 || !strings.Contains(gc.out, "kept builds volume "+executor.Identity{Runner: "itest", Project: project, Concurrent: "0"}.BuildsVolumeName()+": in use") {
		t.Errorf("gc while in use:\n%s", gc.out)
	}
	if res := r.call(busy, "cleanup"); res.code != 0 {
		t.Fatalf("cleanup:\n%s", res.out)
	}
	gc = r.call(busy, "gc", "--max-age", "1000h", "--cache-max-age", "1ns")
	if gc.code != 0 {
		t.Fatalf("gc:\n%s", gc.out)
	}
	vols, _ = shared.engine.ListVolumes(ctx, map[string]string{executor.LabelProject: project, executor.LabelRole: "builds"})
	if len(vols) != 0 {
		t.Errorf("gc left builds volumes %v:\n%s", vols, gc.out)
	}
}
