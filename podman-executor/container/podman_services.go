package container

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/containers/podman/v4/pkg/bindings/containers"
	"github.com/containers/podman/v4/pkg/bindings/images"
)

// ImageConfig inspects a local image for what a service readiness check
// needs: its exposed TCP ports and its HEALTHCHECK.
func (p *Podman) ImageConfig(ctx context.Context, ref string) (ImageConfig, error) {
	d, err := images.GetImage(p.ctx(ctx), ref, nil)
	if err != nil {
		return ImageConfig{}, fmt.Errorf("inspect image %s: %w", ref, notFound(err))
	}
	var c ImageConfig
	if d.ImageData != nil && d.ImageData.Config != nil {
		c.ExposedTCP = tcpPorts(d.ImageData.Config.ExposedPorts)
	}
	if d.ImageData != nil && d.ImageData.HealthCheck != nil {
		c.Healthcheck = d.ImageData.HealthCheck.Test
	}
	return c, nil
}

// tcpPorts reads the TCP ports of an image's ExposedPorts ("80/tcp",
// "53/udp", "8080"), sorted.
func tcpPorts(exposed map[string]struct{}) []int {
	var out []int
	for k := range exposed {
		port, proto, _ := strings.Cut(k, "/")
		if proto != "" && proto != "tcp" {
			continue
		}
		if n, err := strconv.Atoi(port); err == nil && n > 0 && n < 65536 {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// RunHealthCheck runs a container's HEALTHCHECK once and returns its
// status ("healthy", "unhealthy", "starting").
func (p *Podman) RunHealthCheck(ctx context.Context, name string) (string, error) {
	r, err := containers.RunHealthCheck(p.ctx(ctx), name, nil)
	if err != nil {
		return "", fmt.Errorf("health check of %s: %w", name, notFound(err))
	}
	return r.Status, nil
}

// Logs returns the last tail lines a container wrote (stdout and stderr).
func (p *Podman) Logs(ctx context.Context, name string, tail int) ([]string, error) {
	stdout, stderr := make(chan string), make(chan string)
	var lines []string
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case l := <-stdout:
				lines = append(lines, l)
			case l := <-stderr:
				lines = append(lines, l)
			case <-stop:
				return
			}
		}
	}()
	opts := new(containers.LogOptions).WithStdout(true).WithStderr(true).WithTail(strconv.Itoa(tail))
	err := containers.Logs(p.ctx(ctx), name, opts, stdout, stderr)
	close(stop) // the channels are unbuffered: every line was received
	<-collected
	if err != nil {
		return lines, fmt.Errorf("logs of %s: %w", name, notFound(err))
	}
	return lines, nil
}
