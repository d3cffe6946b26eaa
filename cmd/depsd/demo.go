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
	)
	cmd := &cobra.Command{
		Use:   "demo [--pipeline-time D]",
		Short: "Run depsd end to end against a simulated GitLab",
		Long: `demo needs no setup: it starts a simulated GitLab in-process with a few
projects whose images depend on each other, lets depsd serve scan it and
install its webhooks, starts a rebuild of the base image and shows the
chain building in dependency order, each image exactly once. The state
lives in a temporary directory that is removed at the end.`,
		Example: `  depsd demo
  depsd demo --pipeline-time 100ms`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "depsd-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			return demo.Run(cmd.Context(), a.stdout, demo.Options{PipelineTime: pipelineTime, StateDir: dir, Logger: s.logger(a.stderr)})
		},
	}
	s.addCommon(cmd.Flags(), "error")
	cmd.Flags().DurationVar(&pipelineTime, "pipeline-time", time.Second, "how long each simulated pipeline runs")
	return cmd
}
