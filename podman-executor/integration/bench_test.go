package integration

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkTrivialJob measures a whole trivial job as the runner drives
// it (config + prepare + 8 run stages + cleanup, each stage "echo"), with
// podman-executor and with bench/driver.sh (the podman CLI, as in GitLab's
// documented examples), on the same image and podman. The two drivers
// alternate job by job, so that both see the same machine load (this
// machine is shared); it reports ms/job for each and their ratio, which
// the README quotes.
func BenchmarkTrivialJob(b *testing.B) {
	shell, err := filepath.Abs("../bench/driver.sh")
	if err != nil {
		b.Fatal(err)
	}
	exe := newRunner(b, "")
	cli := newRunner(b, "")
	cli.env.bin = shell
	exe.extraEnv = []string{"BENCH_CACHE_DIR=" + b.TempDir()}
	cli.extraEnv = exe.extraEnv
	job := func(r *runner, id int) time.Duration {
		start := time.Now()
		jr := r.runJob(r.newJob(id))
		if jr.prepare.code != 0 || jr.cleanup.code != 0 || jr.stages["build_script"].code != 0 {
			b.Fatalf("job failed:\n%s", jr.log)
		}
		return time.Since(start)
	}
	var tExe, tCLI time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := uniqueID(50 + i%50)
		if i%2 == 0 {
			tExe += job(exe, id)
			tCLI += job(cli, id)
		} else {
			tCLI += job(cli, id)
			tExe += job(exe, id)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(tExe.Milliseconds())/n, "executor-ms/job")
	b.ReportMetric(float64(tCLI.Milliseconds())/n, "shell-ms/job")
	b.ReportMetric(float64(tExe)/float64(tCLI), "ratio")
}
