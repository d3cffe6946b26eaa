// Package executor implements GitLab Runner's custom executor contract for
// podman: the config, prepare, run, cleanup and gc stages, the driver's
// TOML configuration, the CUSTOM_ENV_* job environment, and the mapping of
// outcomes to the runner's build-failure and system-failure exit codes.
// It reaches podman only through the Engine interface.
package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// Name and Version identify the driver in the config stage's JSON.
const (
	Name    = "podman-executor"
	Version = "0.1.0"
)

// Engine is podman as the stages need it. One stage uses it from one
// goroutine, except that run may call Exec (to stop a canceled script)
// while another Exec is attached. Methods return container.ErrNotFound
// (wrapped) for a missing container, network or image, except Remove and
// RemoveNetwork, for which "already gone" is success.
type Engine interface {
	ImageExists(ctx context.Context, ref string) (bool, error)
	// Pull pulls ref; progress lines go to progress.
	Pull(ctx context.Context, ref string, opts container.PullOptions, progress io.Writer) error
	// Create creates a container and returns its ID; Start starts it.
	Create(ctx context.Context, s container.Spec) (string, error)
	Start(ctx context.Context, name string) error
	Inspect(ctx context.Context, name string) (container.Info, error)
	// List returns containers carrying all labels (ExecRunning, IPs unset).
	List(ctx context.Context, labels map[string]string) ([]container.Info, error)
	// Exec runs a process in a running container and returns its exit
	// code; err is non-nil only when podman failed.
	Exec(ctx context.Context, name string, e container.Exec) (int, error)
	// Kill signals a container's main process.
	Kill(ctx context.Context, name, signal string) error
	// Remove removes a container with a zero stop timeout.
	Remove(ctx context.Context, name string) error
	CreateNetwork(ctx context.Context, name string, labels map[string]string) error
	RemoveNetwork(ctx context.Context, name string) error
	ListNetworks(ctx context.Context, labels map[string]string) ([]container.Network, error)
	// ImageConfig reads a local image's exposed ports and HEALTHCHECK.
	ImageConfig(ctx context.Context, ref string) (container.ImageConfig, error)
	// RunHealthCheck runs a container's HEALTHCHECK once: "healthy",
	// "unhealthy" or "starting".
	RunHealthCheck(ctx context.Context, name string) (string, error)
	// Logs returns a container's last tail log lines.
	Logs(ctx context.Context, name string, tail int) ([]string, error)
	// CreateVolume creates a labelled named volume unless it exists;
	// RemoveVolume returns container.ErrInUse (wrapped) while a container
	// uses it.
	CreateVolume(ctx context.Context, name string, labels map[string]string) error
	ListVolumes(ctx context.Context, labels map[string]string) ([]container.Volume, error)
	RemoveVolume(ctx context.Context, name string) error
	// Rootless reports whether the podman service runs rootless.
	Rootless(ctx context.Context) (bool, error)
	// Local reports whether the service shares this host's filesystem
	// (a local unix socket), so host directories can be bind-mounted and
	// stages can reach the job container through package channel.
	Local() bool
}

// Executor runs one stage for one job. Stdout and Stderr go to the job log
// (the runner shows both there, except in the config stage, whose stdout
// must be JSON only); Log is for diagnostics on stderr.
type Executor struct {
	// Engine is podman; when nil, the stages that need it call Dial once.
	// run does not, unless a stage must be stopped: it reaches the job
	// container through the stage channel.
	Engine Engine
	Dial   func(ctx context.Context) (Engine, error)
	Config Config
	Job    Job
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
	Now    func() time.Time
	// Sleep waits d or until ctx ends (nil: a timer); tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Trace, when set, times the steps that are not Engine calls (the
	// Engine from Dial is then traced too).
	Trace *Tracer
	// Listening reports whether a service listens on a TCP port (nil:
	// through /proc with a local podman, else by connecting); tests
	// replace it.
	Listening func(ctx context.Context, info container.Info, network string, port int, local bool) bool
}

// connect makes sure e.Engine is set, dialing podman if needed.
func (e *Executor) connect(ctx context.Context) error {
	if e.Engine != nil {
		return nil
	}
	if e.Dial == nil {
		return errors.New("no podman connection")
	}
	eng, err := e.Dial(ctx)
	if err != nil {
		return err
	}
	e.Engine = eng
	return nil
}

// channelDir is the host directory of a job's stage channel; its parent
// (one per job, 0700) keeps other host users out.
func (e *Executor) channelDir(name string) string {
	return filepath.Join(e.jobStateDir(name), "channel")
}

// helperChannelDir is the stage channel of the job's helper container.
func (e *Executor) helperChannelDir(name string) string {
	return filepath.Join(e.jobStateDir(name), "helper-channel")
}

// jobStateDir is the per-job directory under state_dir.
func (e *Executor) jobStateDir(name string) string {
	return filepath.Join(e.Config.StateDir, clean(name))
}

// now is the injected clock, defaulting to time.Now.
func (e *Executor) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// sleep waits d or until ctx ends, through Sleep when set.
func (e *Executor) sleep(ctx context.Context, d time.Duration) error {
	if e.Sleep != nil {
		return e.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// identity is the job's identity, once the job passed CheckIdentity, on
// the runner the driver config names.
func (e *Executor) identity() (Identity, error) {
	if err := e.Job.CheckIdentity(); err != nil {
		return Identity{}, err
	}
	id := e.Job.Identity(e.Config.RunnerName)
	id.Protected = e.Config.SplitProtectedRefs && e.Job.Protected()
	return id, nil
}
