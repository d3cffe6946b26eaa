package integration

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkTrivialJob measures a whole trivial job as the runner drives
// it (config + prepare + 8 run stages + cleanup, each stage "echo"), with
// podman-executor and with bench/driver.sh (the podman CLI, as in GitLab's
// documented examples), on the same image and podman. It reports
// ms/job; the README quotes the figures.
func BenchmarkTrivialJob(b *testing.B) {
	shell, err := filepath.Abs("../bench/driver.sh")
	if err != nil {
		b.Fatal(err)
	}
	drivers := []struct {
		name string
		bin  string
	}{
		{"podman-executor", ""},
		{"shell-podman-cli", shell},
	}
	for _, d := range drivers {
		b.Run(d.name, func(b *testing.B) {
			r := newRunner(b, "")
			if d.bin != "" {
				r.env.bin = d.bin
			}
			r.extraEnv = []string{"BENCH_CACHE_DIR=" + b.TempDir()}
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := r.newJob(uniqueID(50 + i))
				jr := r.runJob(j)
				if jr.prepare.code != 0 || jr.cleanup.code != 0 || jr.stages["build_script"].code != 0 {
					b.Fatalf("job failed:\n%s", jr.log)
				}
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/job")
		})
	}
}
