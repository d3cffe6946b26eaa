package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containers/podman/v4/libpod/define"
	"github.com/containers/podman/v4/pkg/bindings"
	"github.com/containers/podman/v4/pkg/bindings/containers"
	"github.com/containers/podman/v4/pkg/specgen"
)

// trivialJobStages are the run stages the real runner (17.9.3) calls for
// a trivial job: one script line, GIT_STRATEGY none, no cache, artifacts
// or after_script (TestRealRunnerTrivialJobStages checks it).
var trivialJobStages = []string{"prepare_script", "get_sources", "build_script", "cleanup_file_variables"}

// overheadGoal is the per-job overhead goal: a trivial job's whole driver time
// within 1.5 times one bare `podman run --rm IMAGE true`.
const overheadGoal = 1.5

// BenchmarkJobOverhead measures the per-job overhead goal: per iteration,
// a trivial job's whole driver time (config → prepare → the run stages
// the real runner calls → cleanup, each call a fresh process, as the
// runner drives it) against its floors on the same podman service: one
// `podman --remote run --rm IMAGE true` (the CLI) and the same through the
// REST API the driver uses (create, start, wait, remove). All of them
// alternate within each iteration, in a rotating order, so that each sees
// the same machine load. With PODMAN_EXECUTOR_BASELINE naming another
// build of the driver (e.g. the code before a change), it runs in the
// same rotation. It reports medians (ms) and the ratio of the driver's
// median to each floor's; the log has each one's range and the driver's
// per-call profile (PODMAN_EXECUTOR_TRACE), median ms per call per job.
func BenchmarkJobOverhead(b *testing.B) {
	type contestant struct {
		name  string
		run   func(i int) time.Duration
		times []time.Duration
		trace string // the driver's trace file
		prof  map[string][]float64
	}
	var cs []*contestant
	driver := func(name, bin string) {
		r := newRunner(b, "")
		r.runStages = trivialJobStages
		r.env.bin = bin
		c := &contestant{name: name, trace: filepath.Join(b.TempDir(), "trace"), prof: map[string][]float64{}}
		r.extraEnv = []string{"PODMAN_EXECUTOR_TRACE=" + c.trace}
		c.run = func(i int) time.Duration {
			j := r.newJob(uniqueID(i % 100))
			j.Scripts = map[string]string{"build_script": "echo trivial\n"}
			start := time.Now()
			jr := r.runJob(j)
			d := time.Since(start)
			if jr.prepare.code != 0 || jr.cleanup.code != 0 || jr.stages["build_script"].code != 0 {
				b.Fatalf("%s: job failed:\n%s", name, jr.log)
			}
			return d
		}
		cs = append(cs, c)
	}
	driver("podman-executor", shared.bin)
	if base := os.Getenv("PODMAN_EXECUTOR_BASELINE"); base != "" {
		driver("baseline", base)
	}
	cli := &contestant{name: "floor: podman --remote run --rm"}
	cli.run = func(int) time.Duration {
		start := time.Now()
		out, err := exec.Command("podman", "--remote", "--url", shared.host, "run", "--rm", shared.image, "true").CombinedOutput()
		if err != nil {
			b.Fatalf("podman run: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	conn, err := bindings.NewConnection(context.Background(), shared.host)
	if err != nil {
		b.Fatal(err)
	}
	api := &contestant{name: "floor: REST create+start+wait+remove", prof: map[string][]float64{}}
	api.run = func(i int) time.Duration {
		start := time.Now()
		steps, err := restRun(conn, fmt.Sprintf("podman-executor-bench-floor-%d-%d", os.Getpid(), i))
		if err != nil {
			b.Fatal(err)
		}
		for k, v := range steps {
			api.prof["floor "+k] = append(api.prof["floor "+k], ms(v))
		}
		return time.Since(start)
	}
	cs = append(cs, cli, api)
	exe := cs[0]

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range cs {
			c := cs[(i+k)%len(cs)]
			c.times = append(c.times, c.run(i))
			if c.trace != "" {
				addProfile(b, c.trace, c.prof)
			}
		}
	}
	b.StopTimer()
	for _, c := range cs {
		b.Logf("%-40s median %5.0f ms, quartiles %5.0f–%5.0f, range %5.0f–%5.0f ms (%d runs)", c.name,
			ms(median(c.times)), ms(quantile(c.times, 0.25)), ms(quantile(c.times, 0.75)), ms(slices.Min(c.times)), ms(slices.Max(c.times)), len(c.times))
	}
	drivers, floors := cs[:len(cs)-2], []*contestant{cli, api}
	for _, d := range drivers {
		against := floors
		if d == exe && len(drivers) == 2 {
			against = append([]*contestant{drivers[1]}, floors...)
		}
		for _, f := range against {
			// Each iteration's own ratio: both ran within seconds of each
			// other, so a load swing between iterations cancels out.
			paired := make([]time.Duration, len(d.times))
			for i := range d.times {
				paired[i] = time.Duration(float64(time.Second) * float64(d.times[i]) / float64(f.times[i]))
			}
			line := fmt.Sprintf("%s / %s: ratio of medians %.2f, per-iteration ratio median %.2f (quartiles %.2f–%.2f)", d.name, f.name,
				float64(median(d.times))/float64(median(f.times)), median(paired).Seconds(), quantile(paired, 0.25).Seconds(), quantile(paired, 0.75).Seconds())
			if d == exe && f == cli {
				line += fmt.Sprintf(": the goal is ≤ %.1f", overheadGoal)
			}
			b.Log(line)
		}
	}
	for _, c := range cs {
		if c.prof != nil {
			b.Logf("profile of %s (median ms per job):\n%s", c.name, formatProfile(c.prof))
		}
	}
	b.ReportMetric(ms(median(exe.times)), "driver-ms")
	b.ReportMetric(ms(median(cli.times)), "cli-floor-ms")
	b.ReportMetric(ms(median(api.times)), "rest-floor-ms")
	b.ReportMetric(float64(median(exe.times))/float64(median(cli.times)), "ratio-cli")
	b.ReportMetric(float64(median(exe.times))/float64(median(api.times)), "ratio-rest")
	if len(drivers) == 2 {
		b.ReportMetric(ms(median(cs[1].times)), "baseline-ms")
		b.ReportMetric(float64(median(cs[1].times))/float64(median(cli.times)), "baseline-ratio-cli")
	}
}

// restRun is `podman run --rm IMAGE true` through the REST API, as the
// driver talks to podman: create, start, wait for the exit, remove. It
// returns each step's duration.
func restRun(conn context.Context, name string) (map[string]time.Duration, error) {
	steps := map[string]time.Duration{}
	step := func(what string, f func() error) error {
		start := time.Now()
		err := f()
		steps[what] = time.Since(start)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	g := specgen.NewSpecGenerator(shared.image, false)
	g.Name = name
	g.Command = []string{"true"}
	if err := step("Create", func() error { _, err := containers.CreateWithSpec(conn, g, nil); return err }); err != nil {
		return nil, err
	}
	defer containers.Remove(conn, name, new(containers.RemoveOptions).WithForce(true).WithIgnore(true)) //nolint:errcheck // after a failure only
	if err := step("Start", func() error { return containers.Start(conn, name, nil) }); err != nil {
		return nil, err
	}
	wait := new(containers.WaitOptions).WithCondition([]define.ContainerStatus{define.ContainerStateExited})
	if err := step("Wait", func() error {
		code, err := containers.Wait(conn, name, wait)
		if err == nil && code != 0 {
			err = fmt.Errorf("exit code %d", code)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := step("Remove", func() error {
		_, err := containers.Remove(conn, name, new(containers.RemoveOptions).WithForce(true))
		return err
	}); err != nil {
		return nil, err
	}
	return steps, nil
}

// addProfile adds one job's trace (then emptied) to prof: per call (stage
// and call name), the job's total time in it.
func addProfile(b *testing.B, trace string, prof map[string][]float64) {
	f, err := os.Open(trace)
	if err != nil {
		b.Fatal(err)
	}
	job := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 {
			continue
		}
		v, err := strconv.ParseFloat(fs[3], 64)
		if err != nil {
			continue
		}
		job[fs[0]+" "+fs[1]] += v
	}
	f.Close()
	if err := os.Truncate(trace, 0); err != nil {
		b.Fatal(err)
	}
	for k, v := range job {
		prof[k] = append(prof[k], v)
	}
}

// formatProfile lists each call's median, in the order stages run.
func formatProfile(prof map[string][]float64) string {
	order := map[string]int{"config": 0, "prepare": 1, "run": 2, "cleanup": 3, "floor": 4}
	keys := slices.Collect(func(yield func(string) bool) {
		for k := range prof {
			if !yield(k) {
				return
			}
		}
	})
	slices.SortFunc(keys, func(a, b string) int {
		sa, _, _ := strings.Cut(strings.Replace(a, ":", " ", 1), " ")
		sb, _, _ := strings.Cut(strings.Replace(b, ":", " ", 1), " ")
		if order[sa] != order[sb] {
			return order[sa] - order[sb]
		}
		return strings.Compare(a, b)
	})
	var sb strings.Builder
	for _, k := range keys {
		v := slices.Clone(prof[k])
		slices.Sort(v)
		fmt.Fprintf(&sb, "  %-28s %7.1f ms (%.1f–%.1f)\n", k, v[len(v)/2], v[0], v[len(v)-1])
	}
	return sb.String()
}

func median(ds []time.Duration) time.Duration { return quantile(ds, 0.5) }

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
