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
	c := newCommand("demo", "demo [--pipeline-time D] [--stay [--listen ADDR]]", stderr, false)
	pipelineTime := c.fs.Duration("pipeline-time", time.Second, "how long each simulated pipeline runs")
	stay := c.fs.Bool("stay", false, "keep serving the dashboard after the demo, until Ctrl-C")
	listen := c.fs.String("listen", "127.0.0.1:0", "depsd's address (dashboard, webhook); port 0 picks a free one")
	c.logLevel = "error"
	if code, ok := c.parse(args); !ok {
		return code
	}
	dir, err := os.MkdirTemp("", "depsd-demo-")
	if err != nil {
		return fail(stderr, "demo", err)
	}
	defer os.RemoveAll(dir)
	if err := demo.Run(ctx, stdout, demo.Options{PipelineTime: *pipelineTime, StateDir: dir, Stay: *stay, Listen: *listen, Logger: c.logger(stderr)}); err != nil {
		return fail(stderr, "demo", err)
	}
	return exitOK
}
