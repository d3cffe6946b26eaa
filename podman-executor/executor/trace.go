package executor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// Tracer writes one line per podman call of a stage, with how long it
// took: "STAGE CALL ARG DURATION_MS [error]". It is what the overhead
// benchmark profiles (PODMAN_EXECUTOR_TRACE names the file). Safe for
// concurrent use.
type Tracer struct {
	mu    sync.Mutex
	w     io.Writer
	stage string
	now   func() time.Time
}

// NewTracer traces to w the calls of stage, timed by now.
func NewTracer(w io.Writer, stage string, now func() time.Time) *Tracer {
	return &Tracer{w: w, stage: stage, now: now}
}

// Span times one step not made through the Engine (the dial, the wait
// for the stage channel, the whole stage): call the returned func when it
// ends.
func (t *Tracer) Span(call, arg string) func(err error) {
	if t == nil {
		return func(error) {}
	}
	start := t.now()
	return func(err error) { t.record(call, arg, t.now().Sub(start), err) }
}

func (t *Tracer) record(call, arg string, d time.Duration, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if arg = strings.ReplaceAll(arg, " ", "_"); arg == "" {
		arg = "-"
	}
	line := fmt.Sprintf("%s %s %s %.1f", t.stage, call, arg, float64(d.Microseconds())/1000)
	if err != nil {
		line += " error"
	}
	fmt.Fprintln(t.w, line)
}

// Engine returns eng with every call timed.
func (t *Tracer) Engine(eng Engine) Engine { return tracedEngine{eng, t} }

// tracedEngine times each call of the Engine it wraps.
type tracedEngine struct {
	e Engine
	t *Tracer
}

func (te tracedEngine) ImageExists(ctx context.Context, ref string) (bool, error) {
	end := te.t.Span("ImageExists", ref)
	ok, err := te.e.ImageExists(ctx, ref)
	end(err)
	return ok, err
}

func (te tracedEngine) Pull(ctx context.Context, ref string, opts container.PullOptions, progress io.Writer) error {
	end := te.t.Span("Pull", ref)
	err := te.e.Pull(ctx, ref, opts, progress)
	end(err)
	return err
}

func (te tracedEngine) Create(ctx context.Context, s container.Spec) (string, error) {
	end := te.t.Span("Create", s.Name)
	id, err := te.e.Create(ctx, s)
	end(err)
	return id, err
}

func (te tracedEngine) Start(ctx context.Context, name string) error {
	end := te.t.Span("Start", name)
	err := te.e.Start(ctx, name)
	end(err)
	return err
}

func (te tracedEngine) Inspect(ctx context.Context, name string) (container.Info, error) {
	end := te.t.Span("Inspect", name)
	info, err := te.e.Inspect(ctx, name)
	end(err)
	return info, err
}

func (te tracedEngine) List(ctx context.Context, labels map[string]string) ([]container.Info, error) {
	end := te.t.Span("List", "")
	list, err := te.e.List(ctx, labels)
	end(err)
	return list, err
}

func (te tracedEngine) Exec(ctx context.Context, name string, e container.Exec) (int, error) {
	end := te.t.Span("Exec", name)
	code, err := te.e.Exec(ctx, name, e)
	end(err)
	return code, err
}

func (te tracedEngine) Kill(ctx context.Context, name, signal string) error {
	end := te.t.Span("Kill", name)
	err := te.e.Kill(ctx, name, signal)
	end(err)
	return err
}

func (te tracedEngine) Remove(ctx context.Context, name string) error {
	end := te.t.Span("Remove", name)
	err := te.e.Remove(ctx, name)
	end(err)
	return err
}

func (te tracedEngine) CreateNetwork(ctx context.Context, name string, labels map[string]string) error {
	end := te.t.Span("CreateNetwork", name)
	err := te.e.CreateNetwork(ctx, name, labels)
	end(err)
	return err
}

func (te tracedEngine) RemoveNetwork(ctx context.Context, name string) error {
	end := te.t.Span("RemoveNetwork", name)
	err := te.e.RemoveNetwork(ctx, name)
	end(err)
	return err
}

func (te tracedEngine) ListNetworks(ctx context.Context, labels map[string]string) ([]container.Network, error) {
	end := te.t.Span("ListNetworks", "")
	list, err := te.e.ListNetworks(ctx, labels)
	end(err)
	return list, err
}

func (te tracedEngine) ImageConfig(ctx context.Context, ref string) (container.ImageConfig, error) {
	end := te.t.Span("ImageConfig", ref)
	c, err := te.e.ImageConfig(ctx, ref)
	end(err)
	return c, err
}

func (te tracedEngine) RunHealthCheck(ctx context.Context, name string) (string, error) {
	end := te.t.Span("RunHealthCheck", name)
	s, err := te.e.RunHealthCheck(ctx, name)
	end(err)
	return s, err
}

func (te tracedEngine) Logs(ctx context.Context, name string, tail int) ([]string, error) {
	end := te.t.Span("Logs", name)
	l, err := te.e.Logs(ctx, name, tail)
	end(err)
	return l, err
}

func (te tracedEngine) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	end := te.t.Span("CreateVolume", name)
	err := te.e.CreateVolume(ctx, name, labels)
	end(err)
	return err
}

func (te tracedEngine) ListVolumes(ctx context.Context, labels map[string]string) ([]container.Volume, error) {
	end := te.t.Span("ListVolumes", "")
	list, err := te.e.ListVolumes(ctx, labels)
	end(err)
	return list, err
}

func (te tracedEngine) RemoveVolume(ctx context.Context, name string) error {
	end := te.t.Span("RemoveVolume", name)
	err := te.e.RemoveVolume(ctx, name)
	end(err)
	return err
}

func (te tracedEngine) Rootless(ctx context.Context) (bool, error) {
	end := te.t.Span("Rootless", "")
	ok, err := te.e.Rootless(ctx)
	end(err)
	return ok, err
}

func (te tracedEngine) Local() bool { return te.e.Local() }
