package executor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// serviceLogLines is how many of a service's last log lines a readiness
// warning shows.
const serviceLogLines = 20

// servicePoll is how often readiness is checked again.
const servicePoll = 250 * time.Millisecond

// startedService is a service container prepare started.
type startedService struct {
	name  string // container
	image string
}

// waitForServices waits, as GitLab's docker executor does, until each
// service is ready: healthy when its image has a HEALTHCHECK, else
// listening on every TCP port its image EXPOSEs (a service with neither
// is ready once running). All share one deadline,
// wait_for_services_timeout from now. A service that is not ready by then
// gets a warning with its last log lines in the job log; the job goes on.
func (e *Executor) waitForServices(ctx context.Context, network string, services []startedService) error {
	timeout := e.Config.WaitForServicesTimeout
	if timeout < 0 || len(services) == 0 {
		return nil
	}
	e.progress("Waiting for services to be up and running (timeout %d seconds)...", timeout)
	wctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Second)
	defer cancel()
	for _, s := range services {
		err := e.waitForService(wctx, network, s)
		if err == nil {
			continue
		}
		if ctx.Err() != nil { // the stage itself was canceled
			return ctx.Err()
		}
		e.serviceWarning(ctx, s, err)
	}
	return nil
}

// errServiceStopped: the service exited; waiting longer cannot help.
var errServiceStopped = errors.New("the service container is not running")

// waitForService waits for one service until ctx ends; the error says
// what was still missing: the last check's answer, unless that check was
// cut short by the deadline itself (a podman slow to answer then), when
// the check before it says more.
func (e *Executor) waitForService(ctx context.Context, network string, s startedService) error {
	cfg, err := e.Engine.ImageConfig(ctx, s.image)
	if err != nil {
		return err
	}
	var missing error
	for {
		err := e.serviceReady(ctx, network, s.name, cfg)
		if err == nil || errors.Is(err, errServiceStopped) {
			return err
		}
		if missing == nil || ctx.Err() == nil {
			missing = err
		}
		select {
		case <-ctx.Done():
			return missing
		case <-time.After(servicePoll):
		}
	}
}

// serviceReady checks a service once: running, and healthy (HEALTHCHECK)
// or listening on every exposed TCP port.
func (e *Executor) serviceReady(ctx context.Context, network, name string, cfg container.ImageConfig) error {
	info, err := e.Engine.Inspect(ctx, name)
	if err != nil {
		return err
	}
	if !info.Running {
		return errServiceStopped
	}
	if hc := cfg.Healthcheck; len(hc) > 0 && hc[0] != "NONE" {
		status, err := e.Engine.RunHealthCheck(ctx, name)
		if err != nil {
			return err
		}
		if status != "healthy" {
			return fmt.Errorf("health check %q says %s", strings.Join(hc, " "), status)
		}
		return nil
	}
	listen := e.Listening
	if listen == nil {
		listen = listening
	}
	var missing []string
	for _, p := range cfg.ExposedTCP {
		if !listen(ctx, info, network, p, e.Engine.Local()) {
			missing = append(missing, strconv.Itoa(p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("nothing listens on TCP port %s", strings.Join(missing, ", "))
	}
	return nil
}

// listening reports whether the service listens on port. With a local
// podman it reads the service's network namespace through /proc (which
// works rootless too, where the driver cannot reach the job network);
// otherwise it connects to the service's address on the job network.
func listening(ctx context.Context, info container.Info, network string, port int, local bool) bool {
	if local && info.PID > 0 {
		for _, f := range []string{"tcp", "tcp6"} {
			file, err := os.Open("/proc/" + strconv.Itoa(info.PID) + "/net/" + f)
			if err != nil {
				continue
			}
			ports, _ := ListeningPorts(file)
			file.Close()
			if slices.Contains(ports, port) {
				return true
			}
		}
		return false
	}
	ip := info.IPs[network]
	if ip == "" {
		return false
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ListeningPorts reads /proc/PID/net/tcp (or tcp6) and returns the
// local ports of sockets in the LISTEN state.
func ListeningPorts(r io.Reader) ([]int, error) {
	var ports []int
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header line
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			continue
		}
		if !slices.Contains(ports, int(p)) {
			ports = append(ports, int(p))
		}
	}
	return ports, sc.Err()
}

// serviceWarning prints, as GitLab's docker executor does, that a service
// is probably not ready, why, and its last log lines.
func (e *Executor) serviceWarning(ctx context.Context, s startedService, why error) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	lines, err := e.Engine.Logs(lctx, s.name, serviceLogLines)
	var b strings.Builder
	fmt.Fprintf(&b, "*** WARNING: Service %s probably didn't start properly.\n\n", s.image)
	fmt.Fprintf(&b, "Health check error:\n%v\n\n", why)
	fmt.Fprintf(&b, "Service container logs (last %d lines):\n", serviceLogLines)
	for _, l := range lines {
		b.WriteString(strings.TrimRight(l, "\n") + "\n")
	}
	if err != nil {
		fmt.Fprintf(&b, "(logs unavailable: %v)\n", err)
	}
	b.WriteString("*********\n")
	fmt.Fprint(e.Stdout, b.String())
}
