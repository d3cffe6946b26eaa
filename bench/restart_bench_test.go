package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"gitlab.com/depsd/depsd/gitlab/gitlabtest"
	"gitlab.com/depsd/depsd/webhook"
)

// BenchmarkRestartAfterSIGKILL: `depsd serve` on an SQLite state is
// killed -9 and started again on it, as a crash-restart does (issue 40,
// item 4). From the new process's start it reports the time to the first
// webhook delivery acknowledged (2xx; GitLab counts every other answer as
// a failure, and disables a hook after 4 in a row), and to the first
// pipeline created: the success of base that the delivery reported, whose
// dependent's pipeline depsd creates. Each is the median of 5 restarts.
// DEPSD_BENCH_BINARY runs another build of depsd (the code before a
// change, to compare in one run).
func BenchmarkRestartAfterSIGKILL(b *testing.B) {
	bin := os.Getenv("DEPSD_BENCH_BINARY")
	if bin == "" {
		bin = buildDepsd(b)
	}
	for b.Loop() {
		b.StopTimer()
		srv := gitlabtest.New(gitlabtest.Options{Token: "bench"})
		for path, cf := range map[string]string{"g/base": "FROM debian\n", "g/ruby": "FROM " + gitlabtest.DefaultRegistryHost + "/g/base:latest\n"} {
			if _, err := srv.AddProject(gitlabtest.Project{Path: path, Files: map[string]string{"Containerfile": cf}}); err != nil {
				b.Fatal(err)
			}
			// Each round's ruby pipeline ends, so that the next round's
			// success starts a chain of its own.
			if err := srv.SetPipelineBehavior(path, gitlabtest.Behavior{Duration: 10 * time.Millisecond}); err != nil {
				b.Fatal(err)
			}
		}
		dir := b.TempDir()
		addr := freeAddr(b)
		// The fake's images are on a registry that is not there: nothing
		// to verify.
		if err := os.WriteFile(filepath.Join(dir, "depsd.yaml"), []byte("images:\n  verify: \"off\"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		env := append(os.Environ(), "GITLAB_URL="+srv.URL, "GITLAB_TOKEN=bench", "DEPSD_WEBHOOK_SECRET="+hookSecret,
			"DEPSD_STATE="+filepath.Join(dir, "depsd.db"), "DEPSD_CONFIG="+filepath.Join(dir, "depsd.yaml"))
		start := func() *exec.Cmd {
			cmd := exec.Command(bin, "serve", "--group", "g", "--listen", addr, "--log-level", "info")
			cmd.Dir, cmd.Env = dir, env
			logs, _ := os.OpenFile(filepath.Join(dir, "serve.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			return cmd
		}
		base, _ := srv.Project("g/base")
		post := func(key string, pipeline int64, status string) int {
			body := fmt.Sprintf(`{"object_kind":"pipeline","object_attributes":{"id":%d,"ref":"main","tag":false,"sha":"%s","source":"push","status":"%s","created_at":"2026-11-01 10:00:00 UTC","variables":[]},"project":{"id":%d,"path_with_namespace":"g/base","default_branch":"main"}}`,
				pipeline, base.HeadCommit, status, base.ID)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/gitlab", bytes.NewReader([]byte(body)))
			req.Header.Set("X-Gitlab-Event", "Pipeline Hook")
			req.Header.Set("X-Gitlab-Token", webhook.ProjectSecret(hookSecret, base.ID))
			req.Header.Set("Idempotency-Key", key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		first := start()
		deadline := time.Now().Add(time.Minute)
		for post("warm", 1, "running") != http.StatusOK {
			if time.Now().After(deadline) {
				b.Fatal("depsd serve never answered")
			}
			time.Sleep(20 * time.Millisecond)
		}
		var acks, creates []time.Duration
		cmd := first
		for round := range 5 {
			// A success depsd has not heard of yet: its delivery, once
			// acknowledged, makes depsd create ruby's pipeline.
			id, err := srv.AddPipeline("g/base", "main", "push", "success")
			if err != nil {
				b.Fatal(err)
			}
			before := len(srv.Pipelines("g/ruby"))
			if err := srv.WaitIdle(context.Background()); err != nil {
				b.Fatal(err)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			started := time.Now()
			cmd = start()
			var acked time.Time
			for try := 0; ; try++ {
				if post("r"+strconv.Itoa(round)+"-"+strconv.Itoa(try), id, "success") == http.StatusOK {
					acked = time.Now()
					break
				}
				if time.Since(started) > time.Minute {
					b.Fatal("no acknowledgement within a minute of the restart")
				}
				time.Sleep(5 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			for len(srv.Pipelines("g/ruby")) == before && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			ps := srv.Pipelines("g/ruby")
			if len(ps) == before {
				logs, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
				b.Fatalf("no pipeline created within a minute of the restart\n%s", logs)
			}
			acks = append(acks, acked.Sub(started))
			creates = append(creates, ps[len(ps)-1].CreatedAt.Sub(started))
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		srv.Close()
		b.ReportMetric(median(acks).Seconds(), "first-2xx-s")
		b.ReportMetric(median(creates).Seconds(), "first-create-s")
		b.Logf("restart after kill -9 on SQLite (median of 5): first webhook acknowledged %.2f s after the start, first pipeline created %.2f s after it (goal: ≤ 1 s to the first 2xx)",
			median(acks).Seconds(), median(creates).Seconds())
		b.StartTimer()
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
