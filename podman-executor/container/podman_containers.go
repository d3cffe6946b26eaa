package container

import (
	"context"
	"fmt"
	"maps"
	"sort"

	"github.com/containers/common/libnetwork/types"
	"github.com/containers/podman/v4/pkg/bindings/containers"
	"github.com/containers/podman/v4/pkg/specgen"
	spec "github.com/opencontainers/runtime-spec/specs-go"
)

// cpuPeriod is the CFS period used to express a CPU limit as a quota.
const cpuPeriod = 100000

// Create creates (but does not start) a container from s and returns its ID.
func (p *Podman) Create(ctx context.Context, s Spec) (string, error) {
	g := specgen.NewSpecGenerator(s.Image, false)
	g.Name = s.Name
	g.Entrypoint = s.Entrypoint
	g.Command = s.Command
	g.Env = maps.Clone(s.Env)
	g.Labels = maps.Clone(s.Labels)
	g.Hostname = s.Hostname
	g.WorkDir = s.WorkDir
	g.Privileged = s.Privileged
	g.HostAdd = s.HostAdd
	g.User = s.User
	if s.Platform != "" {
		g.ImageOS, g.ImageArch, g.ImageVariant = splitPlatform(s.Platform)
	}
	var zero uint
	g.StopTimeout = &zero
	for _, m := range s.Mounts {
		opts := []string{"rbind"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		if m.Chown {
			opts = append(opts, "U")
		}
		g.Mounts = append(g.Mounts, spec.Mount{Type: "bind", Source: m.Source, Destination: m.Destination, Options: opts})
	}
	if len(s.Volumes) > 0 {
		mounts, named, overlays, err := specgen.GenVolumeMounts(s.Volumes)
		if err != nil {
			return "", fmt.Errorf("create container %s: volumes: %w", s.Name, err)
		}
		for _, m := range mounts {
			g.Mounts = append(g.Mounts, m)
		}
		for _, v := range named {
			g.Volumes = append(g.Volumes, v)
		}
		for _, v := range overlays {
			g.OverlayVolumes = append(g.OverlayVolumes, v)
		}
	}
	if s.HostNetwork {
		g.NetNS = specgen.Namespace{NSMode: specgen.Host}
	}
	if len(s.Networks) > 0 {
		g.NetNS = specgen.Namespace{NSMode: specgen.Bridge}
		g.Networks = make(map[string]types.PerNetworkOptions, len(s.Networks))
		for name, aliases := range s.Networks {
			g.Networks[name] = types.PerNetworkOptions{Aliases: aliases}
		}
	}
	if s.Memory > 0 || s.CPUs > 0 || s.PidsLimit > 0 {
		r := &spec.LinuxResources{}
		if s.Memory > 0 {
			r.Memory = &spec.LinuxMemory{Limit: &s.Memory}
		}
		if s.CPUs > 0 {
			period := uint64(cpuPeriod)
			quota := int64(s.CPUs * cpuPeriod)
			r.CPU = &spec.LinuxCPU{Period: &period, Quota: &quota}
		}
		if s.PidsLimit > 0 {
			r.Pids = &spec.LinuxPids{Limit: s.PidsLimit}
		}
		g.ResourceLimits = r
	}
	if err := s.Options.apply(g); err != nil {
		return "", fmt.Errorf("create container %s: %w", s.Name, err)
	}
	resp, err := containers.CreateWithSpec(p.ctx(ctx), g, nil)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", s.Name, notFound(err))
	}
	return resp.ID, nil
}

// ValidateVolume checks a volume spec as podman's -v does
// ("[host-dir|volume-name:]ctr-dir[:options]", options checked by
// containers/common: ro, rw, z, Z, U, O, shared, slave, private, ...).
func ValidateVolume(v string) error {
	if _, _, _, err := specgen.GenVolumeMounts([]string{v}); err != nil {
		return fmt.Errorf("volume %q: %w", v, err)
	}
	return nil
}

// Inspect returns what is known about one container, including whether an
// exec session runs in it and its address on each network.
func (p *Podman) Inspect(ctx context.Context, name string) (Info, error) {
	c := p.ctx(ctx)
	d, err := containers.Inspect(c, name, nil)
	if err != nil {
		return Info{}, fmt.Errorf("inspect container %s: %w", name, notFound(err))
	}
	info := Info{ID: d.ID, Name: d.Name, Image: d.ImageName, Created: d.Created, IPs: map[string]string{}}
	if d.Config != nil {
		info.Labels = d.Config.Labels
	}
	if d.State != nil {
		info.Running = d.State.Running
		info.PID = d.State.Pid
	}
	if d.NetworkSettings != nil {
		for net, n := range d.NetworkSettings.Networks {
			if n != nil && n.IPAddress != "" {
				info.IPs[net] = n.IPAddress
			}
		}
	}
	for _, id := range d.ExecIDs {
		e, err := containers.ExecInspect(c, id, nil)
		if err != nil {
			continue // a session that ended between the two calls
		}
		if e.Running {
			info.ExecRunning = true
			break
		}
	}
	return info, nil
}

// List returns the containers (running or not) carrying all the given
// labels, sorted by name. ExecRunning and IPs are not filled in.
func (p *Podman) List(ctx context.Context, labels map[string]string) ([]Info, error) {
	opts := new(containers.ListOptions).WithAll(true).WithFilters(labelFilter(labels))
	list, err := containers.List(p.ctx(ctx), opts)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]Info, 0, len(list))
	for _, c := range list {
		name := c.ID
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		out = append(out, Info{ID: c.ID, Name: name, Image: c.Image, Labels: c.Labels, Created: c.Created, Running: c.State == "running"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// labelFilter turns labels into podman's list filter.
func labelFilter(labels map[string]string) map[string][]string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	f := map[string][]string{}
	for _, k := range keys {
		f["label"] = append(f["label"], k+"="+labels[k])
	}
	return f
}
