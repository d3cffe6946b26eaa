package main

import (
	"context"
	"io"
	"os"
	"time"

	"gitlab.com/depsd/depsd/demo"
)

// runDemo implements `depsd demo`: depsd end to end against a simulated
// GitLab, with no setup.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("demo", "demo [--pipeline-time D]", stderr, false)
	pipelineTime := c.fs.Duration("pipeline-time", time.Second, "how long each simulated pipeline runs")
	c.logLevel = "error"
	if code, ok := c.parse(args); !ok {
		return code
	}
	dir, err := os.MkdirTemp("", "depsd-demo-")
	if err != nil {
		return fail(stderr, "demo", err)
	}
	defer os.RemoveAll(dir)
	if err := demo.Run(ctx, stdout, demo.Options{PipelineTime: *pipelineTime, StateDir: dir, Logger: c.logger(stderr)}); err != nil {
		return fail(stderr, "demo", err)
	}
	return exitOK
}
