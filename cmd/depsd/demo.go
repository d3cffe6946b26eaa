package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"gitlab.com/depsd/depsd/demo"
)

func newDemoCmd(a *app) *cobra.Command {
	var (
		s            settings
		pipelineTime time.Duration
		stay         bool
		listen       string
		real         bool
		ro           demo.RealOptions
		registry     string
	)
	cmd := &cobra.Command{
		Use:   "demo [--pipeline-time D] [--stay [--listen ADDR]] [--registry HOST:PORT] | demo --real",
		Short: "Run depsd end to end against a simulated GitLab",
		Long: `demo needs no setup: it starts a simulated GitLab in-process with a few
projects whose images depend on each other, lets depsd serve scan it and
install its webhooks, starts a rebuild of the base image and shows the
chain building in dependency order, each image exactly once. It prints the
dashboard's URL; with --stay depsd keeps serving it (and the simulated
GitLab) after the story, until Ctrl-C. The state lives in a temporary
directory that is removed at the end.

With --real the chain is built for real on this machine: a docker-registry
and a GitLab Runner with podman-executor are started for the demo, each
image is built by buildah in a job and pushed, and each member's image
digest and verification are printed as it succeeds; all of it is stopped
and removed at the end. Without podman, docker-registry, gitlab-runner,
podman-executor or the job images it says what is missing and how to get
it (docs/real-chain.md).

With --registry, the simulated pipelines push their images to that
registry (one on 127.0.0.1 or localhost taking anonymous pushes, such as
Debian's docker-registry), and the live view shows each member's
verification after it succeeds: fresh, or stale for the member the demo
builds on the base's previous image (see docs/verification.md). Without a
registry there is nothing to verify and the column is left out.`,
		Example: `  depsd demo
  depsd demo --pipeline-time 100ms
  depsd demo --stay --listen 127.0.0.1:8080
  depsd demo --registry 127.0.0.1:5000
  depsd demo --real --podman-url unix:///run/podman/podman.sock`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "depsd-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			if real {
				ro.StateDir, ro.Logger = dir, s.logger(a.stderr)
				return demo.RunReal(cmd.Context(), a.stdout, ro)
			}
			return demo.Run(cmd.Context(), a.stdout, demo.Options{PipelineTime: pipelineTime, StateDir: dir, Stay: stay, Listen: listen, Registry: registry, Logger: s.logger(a.stderr)})
		},
	}
	s.addLogging(cmd.Flags(), "error")
	cmd.Flags().DurationVar(&pipelineTime, "pipeline-time", time.Second, "how long each simulated pipeline runs")
	cmd.Flags().BoolVar(&stay, "stay", false, "keep serving the dashboard after the demo, until Ctrl-C")
	cmd.Flags().StringVar(&registry, "registry", "", "a registry (host:port, plain HTTP, anonymous pushes) the simulated pipelines push their images to; the demo then shows each member's verification")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "depsd's address (dashboard, webhook); port 0 picks a free one")
	cmd.Flags().BoolVar(&real, "real", false, "build the chain for real with podman, docker-registry and gitlab-runner with podman-executor")
	cmd.Flags().StringVar(&ro.PodmanURL, "podman-url", "", "--real: the podman API service the jobs run on (default: $CONTAINER_HOST)")
	cmd.Flags().StringVar(&ro.Runner, "runner", "", "--real: the gitlab-runner binary (default: on PATH)")
	cmd.Flags().StringVar(&ro.JobImage, "job-image", demo.DefaultJobImage, "--real: the jobs' image, with buildah and git (.ci/buildah-image.sh)")
	cmd.Flags().StringVar(&ro.Executor, "executor", "", "--real: the podman-executor binary (default: on PATH, or beside depsd)")
	return cmd
}
