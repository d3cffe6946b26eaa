package container

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"
)

// Fake is an in-memory engine for unit tests of the executor's stages. It
// keeps containers, networks and images in maps, records every call in
// Calls, and runs exec sessions through ExecFunc. It is safe for
// concurrent use.
type Fake struct {
	mu         sync.Mutex
	containers map[string]*fakeContainer
	networks   map[string]Network
	volumes    map[string]Volume
	images     map[string]bool
	// Calls lists the calls made, e.g. "create job-1", "pull img".
	Calls []string
	// Pulls holds the options of the last pull of each image.
	Pulls map[string]PullOptions
	// Fail makes the named method ("Pull", "Create", ...) return an error.
	Fail map[string]error
	// FailNext makes the next calls of the named method return these
	// errors, one per call, in order, before it works again (a transient
	// podman failure); Fail still applies after them.
	FailNext map[string][]error
	// ExecFunc runs an exec; nil reads stdin and exits 0.
	ExecFunc func(ctx context.Context, name string, e Exec) (int, error)
	// Now stamps creation times; nil is time.Now.
	Now func() time.Time
	// StartExits makes Start leave the named containers stopped.
	StartExits map[string]bool
	// IsLocal is what Local reports (false: stages use Exec).
	IsLocal bool
	// IsRootless is what Rootless reports.
	IsRootless bool
	// ImageConfigs are what ImageConfig returns per image (default zero).
	ImageConfigs map[string]ImageConfig
	// Health is what RunHealthCheck returns per container; nil means
	// "healthy". HealthChecks counts the checks run.
	Health       func(name string) string
	HealthChecks int
	// ContainerLogs are what Logs returns per container.
	ContainerLogs map[string][]string
	next          int
}

// ImageConfig returns ImageConfigs[ref].
func (f *Fake) ImageConfig(_ context.Context, ref string) (ImageConfig, error) {
	if err := f.record("ImageConfig", ref); err != nil {
		return ImageConfig{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.images[ref] {
		return ImageConfig{}, fmt.Errorf("inspect image %s: %w", ref, ErrNotFound)
	}
	return f.ImageConfigs[ref], nil
}

// RunHealthCheck returns Health(name), "healthy" when Health is nil.
func (f *Fake) RunHealthCheck(_ context.Context, name string) (string, error) {
	if err := f.record("RunHealthCheck", name); err != nil {
		return "", err
	}
	f.mu.Lock()
	f.HealthChecks++
	h := f.Health
	f.mu.Unlock()
	if h == nil {
		return "healthy", nil
	}
	return h(name), nil
}

// Logs returns the last tail lines of ContainerLogs[name].
func (f *Fake) Logs(_ context.Context, name string, tail int) ([]string, error) {
	if err := f.record("Logs", name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.ContainerLogs[name]
	return l[max(0, len(l)-tail):], nil
}

// CreateVolume implements the engine.
func (f *Fake) CreateVolume(_ context.Context, name string, labels map[string]string) error {
	if err := f.record("CreateVolume", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.volumes == nil {
		f.volumes = map[string]Volume{}
	}
	if _, ok := f.volumes[name]; !ok {
		f.volumes[name] = Volume{Name: name, Labels: maps.Clone(labels), Created: f.now()}
	}
	return nil
}

// ListVolumes implements the engine.
func (f *Fake) ListVolumes(_ context.Context, labels map[string]string) ([]Volume, error) {
	if err := f.record("ListVolumes", ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Volume
	for _, v := range f.volumes {
		if hasLabels(v.Labels, labels) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveVolume implements the engine: ErrInUse while a container's spec
// names it in Volumes.
func (f *Fake) RemoveVolume(_ context.Context, name string) error {
	if err := f.record("RemoveVolume", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		for _, v := range c.spec.Volumes {
			if strings.HasPrefix(v, name+":") {
				return fmt.Errorf("remove volume %s: %w", name, ErrInUse)
			}
		}
	}
	delete(f.volumes, name)
	return nil
}

// VolumeNames lists the volumes.
func (f *Fake) VolumeNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.volumes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Local reports IsLocal.
func (f *Fake) Local() bool { return f.IsLocal }

type fakeContainer struct {
	info Info
	spec Spec
}

// NewFake returns a Fake holding the given images.
func NewFake(images ...string) *Fake {
	f := &Fake{containers: map[string]*fakeContainer{}, networks: map[string]Network{}, images: map[string]bool{},
		Pulls: map[string]PullOptions{}}
	for _, i := range images {
		f.images[i] = true
	}
	return f
}

func (f *Fake) record(method, arg string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, strings.ToLower(method)+" "+arg)
	if next := f.FailNext[method]; len(next) > 0 {
		f.FailNext[method] = next[1:]
		return next[0]
	}
	return f.Fail[method]
}

func (f *Fake) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// ImageExists implements the engine.
func (f *Fake) ImageExists(_ context.Context, ref string) (bool, error) {
	if err := f.record("ImageExists", ref); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[ref], nil
}

// Pull adds ref to the images unless it names "missing".
func (f *Fake) Pull(_ context.Context, ref string, opts PullOptions, progress io.Writer) error {
	if err := f.record("Pull", ref); err != nil {
		return err
	}
	f.mu.Lock()
	f.Pulls[ref] = opts
	f.mu.Unlock()
	if strings.Contains(ref, "missing") {
		return fmt.Errorf("pull %s: %w: manifest unknown", ref, ErrNotFound)
	}
	fmt.Fprintf(progress, "pulled %s\n", ref)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[ref] = true
	return nil
}

// Create implements the engine; the image must be present.
func (f *Fake) Create(_ context.Context, s Spec) (string, error) {
	if err := f.record("Create", s.Name); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.images[s.Image] {
		return "", fmt.Errorf("create %s: image %s: %w", s.Name, s.Image, ErrNotFound)
	}
	if _, ok := f.containers[s.Name]; ok {
		return "", fmt.Errorf("create %s: name already in use", s.Name)
	}
	for n := range s.Networks {
		if _, ok := f.networks[n]; !ok && n != "podman" {
			return "", fmt.Errorf("create %s: network %s: %w", s.Name, n, ErrNotFound)
		}
	}
	f.next++
	id := fmt.Sprintf("id%d", f.next)
	ips := map[string]string{}
	for n := range s.Networks {
		ips[n] = fmt.Sprintf("10.0.0.%d", f.next)
	}
	f.containers[s.Name] = &fakeContainer{spec: s, info: Info{
		ID: id, Name: s.Name, Image: s.Image, Labels: maps.Clone(s.Labels), Created: f.now(), IPs: ips,
	}}
	return id, nil
}

// lookup finds a container by name or ID; the caller holds mu.
func (f *Fake) lookup(nameOrID string) *fakeContainer {
	if c, ok := f.containers[nameOrID]; ok {
		return c
	}
	for _, c := range f.containers {
		if c.info.ID == nameOrID {
			return c
		}
	}
	return nil
}

// Start implements the engine.
func (f *Fake) Start(_ context.Context, name string) error {
	if err := f.record("Start", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(name)
	if c == nil {
		return fmt.Errorf("start %s: %w", name, ErrNotFound)
	}
	c.info.Running = !f.StartExits[name]
	return nil
}

// Inspect implements the engine.
func (f *Fake) Inspect(_ context.Context, name string) (Info, error) {
	if err := f.record("Inspect", name); err != nil {
		return Info{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(name)
	if c == nil {
		return Info{}, fmt.Errorf("inspect %s: %w", name, ErrNotFound)
	}
	return c.info, nil
}

// Spec returns the spec a container was created with.
func (f *Fake) Spec(name string) (Spec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.lookup(name)
	if c == nil {
		return Spec{}, false
	}
	return c.spec, true
}

// SetExecRunning marks a stage as running in a container (for gc tests).
func (f *Fake) SetExecRunning(name string, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.lookup(name); c != nil {
		c.info.ExecRunning = running
	}
}

// Names lists the containers' names, sorted.
func (f *Fake) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.containers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NetworkNames lists the networks' names, sorted.
func (f *Fake) NetworkNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.networks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// List implements the engine.
func (f *Fake) List(_ context.Context, labels map[string]string) ([]Info, error) {
	if err := f.record("List", ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Info
	for _, c := range f.containers {
		if hasLabels(c.info.Labels, labels) {
			i := c.info
			i.ExecRunning = false
			out = append(out, i)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Exec implements the engine through ExecFunc.
func (f *Fake) Exec(ctx context.Context, name string, e Exec) (int, error) {
	if err := f.record("Exec", name); err != nil {
		return 0, err
	}
	f.mu.Lock()
	c := f.lookup(name)
	running := c != nil && c.info.Running
	fn := f.ExecFunc
	f.mu.Unlock()
	if !running {
		return 0, fmt.Errorf("exec in %s: container not running: %w", name, ErrNotFound)
	}
	if fn != nil {
		return fn(ctx, name, e)
	}
	if e.Stdin != nil {
		if _, err := io.Copy(io.Discard, e.Stdin); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// Kill implements the engine: the container stops.
func (f *Fake) Kill(_ context.Context, name, _ string) error {
	if err := f.record("Kill", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.lookup(name); c != nil {
		c.info.Running = false
		return nil
	}
	return fmt.Errorf("kill %s: %w", name, ErrNotFound)
}

// Remove implements the engine; a missing container is not an error.
func (f *Fake) Remove(_ context.Context, name string) error {
	if err := f.record("Remove", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.lookup(name); c != nil {
		delete(f.containers, c.info.Name)
	}
	return nil
}

// CreateNetwork implements the engine.
func (f *Fake) CreateNetwork(_ context.Context, name string, labels map[string]string) error {
	if err := f.record("CreateNetwork", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.networks[name]; ok {
		return fmt.Errorf("network %s exists", name)
	}
	f.networks[name] = Network{Name: name, Labels: maps.Clone(labels), Created: f.now()}
	return nil
}

// RemoveNetwork implements the engine; it fails while a container uses it.
func (f *Fake) RemoveNetwork(_ context.Context, name string) error {
	if err := f.record("RemoveNetwork", name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if _, ok := c.spec.Networks[name]; ok {
			return fmt.Errorf("network %s is used by %s", name, c.info.Name)
		}
	}
	delete(f.networks, name)
	return nil
}

// ListNetworks implements the engine.
func (f *Fake) ListNetworks(_ context.Context, labels map[string]string) ([]Network, error) {
	if err := f.record("ListNetworks", ""); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Network
	for _, n := range f.networks {
		if hasLabels(n.Labels, labels) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// AddForeign adds a container the executor did not create (no labels).
func (f *Fake) AddForeign(name, image string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.containers[name] = &fakeContainer{info: Info{ID: fmt.Sprintf("id%d", f.next), Name: name, Image: image, Running: true, Created: f.now()}}
}

// Rootless reports IsRootless.
func (f *Fake) Rootless(context.Context) (bool, error) {
	if err := f.record("Rootless", ""); err != nil {
		return false, err
	}
	return f.IsRootless, nil
}
