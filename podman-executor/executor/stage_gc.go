package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/channel"
	"gitlab.com/depsd/depsd/podman-executor/container"
)

// GCOptions says what gc removes.
type GCOptions struct {
	// MaxAge: job containers, services and networks older than this whose
	// job is over. Set it above the longest job timeout.
	MaxAge time.Duration
	// CacheMaxAge: cache directories not used by a job for this long.
	CacheMaxAge time.Duration
	// DryRun lists what would be removed and removes nothing.
	DryRun bool
}

// group is one job as gc sees it: its container, services and network.
type group struct {
	youngest time.Duration
	busy     bool
	members  []string
	// loops are its running job and helper containers, whose stage loops
	// may still run a stage that no exec session shows.
	loops []string
}

// GCStage removes what crashed or killed jobs left behind: groups of
// labelled containers and networks older than MaxAge whose job is over (no
// stage is running in the job container), and cache directories unused for
// CacheMaxAge. It lists every item on out. Nothing without the executor's
// labels is touched, and nothing host-wide is pruned.
func (e *Executor) GCStage(ctx context.Context, o GCOptions, out io.Writer) error {
	if err := e.connect(ctx); err != nil {
		return err
	}
	now := e.now()
	sel := map[string]string{LabelManaged: "true"}
	list, err := e.Engine.List(ctx, sel)
	if err != nil {
		return err
	}
	nets, err := e.Engine.ListNetworks(ctx, sel)
	if err != nil {
		return err
	}
	groups := map[string]*group{}
	get := func(name string, age time.Duration) *group {
		g := groups[name]
		if g == nil {
			g = &group{youngest: age}
			groups[name] = g
		}
		g.youngest = min(g.youngest, age)
		return g
	}
	for _, c := range list {
		g := get(c.Labels[LabelGroup], sinceLabel(c.Labels, c.Created, now))
		g.members = append(g.members, c.Name)
		if role := c.Labels[LabelRole]; (role == "job" || role == "helper") && c.Running {
			info, err := e.Engine.Inspect(ctx, c.ID)
			if err == nil && info.ExecRunning {
				g.busy = true
			}
			g.loops = append(g.loops, c.ID)
		}
	}
	for _, n := range nets {
		get(n.Labels[LabelGroup], sinceLabel(n.Labels, n.Created, now))
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		g := groups[name]
		if g.youngest < o.MaxAge || g.busy || e.loopBusy(ctx, g.loops) {
			continue
		}
		verb := "removed"
		if o.DryRun {
			verb = "would remove"
		}
		fmt.Fprintf(out, "%s job %s (age %s, containers %v)\n", verb, name, g.youngest.Round(time.Second), g.members)
		if !o.DryRun && name != "" {
			if err := e.removeGroup(ctx, name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := e.gcStateDirs(o, now, groups, out); err != nil {
		errs = append(errs, err)
	}
	if err := e.gcCaches(o, now, out); err != nil {
		errs = append(errs, err)
	}
	if err := e.gcBuildsVolumes(ctx, o, now, out); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// gcBuildsVolumes removes builds volumes and build storage volumes
// unused for CacheMaxAge (by their marker, else their creation) that no
// container uses.
func (e *Executor) gcBuildsVolumes(ctx context.Context, o GCOptions, now time.Time, out io.Writer) error {
	if o.CacheMaxAge <= 0 {
		return nil
	}
	var errs []error
	for _, kind := range []struct{ role, what string }{{roleBuilds, "builds volume"}, {roleBuildStorage, "build storage volume"}} {
		vols, err := e.Engine.ListVolumes(ctx, map[string]string{LabelManaged: "true", LabelRole: kind.role})
		if err != nil {
			return err
		}
		for _, v := range vols {
			marker := e.volumeMarker(kind.role, v.Name)
			last := v.Created
			if st, err := os.Stat(marker); err == nil {
				last = st.ModTime()
			}
			age := now.Sub(last)
			if age < o.CacheMaxAge {
				continue
			}
			if o.DryRun {
				fmt.Fprintf(out, "would remove %s %s (unused for %s)\n", kind.what, v.Name, age.Round(time.Second))
				continue
			}
			err := e.Engine.RemoveVolume(ctx, v.Name)
			switch {
			case errors.Is(err, container.ErrInUse):
				fmt.Fprintf(out, "kept %s %s: in use\n", kind.what, v.Name)
			case err != nil:
				errs = append(errs, err)
			default:
				fmt.Fprintf(out, "removed %s %s (unused for %s)\n", kind.what, v.Name, age.Round(time.Second))
				_ = os.Remove(marker)
			}
		}
	}
	return errors.Join(errs...)
}

// gcStateDirs removes job state directories older than MaxAge whose job
// has no container left (removed by hand, or a prepare that crashed
// before creating it).
func (e *Executor) gcStateDirs(o GCOptions, now time.Time, groups map[string]*group, out io.Writer) error {
	if e.Config.StateDir == "" {
		return nil
	}
	dirs, err := filepath.Glob(filepath.Join(e.Config.StateDir, Name+"-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		st, err := os.Stat(dir)
		if err != nil || groups[filepath.Base(dir)] != nil || now.Sub(st.ModTime()) < o.MaxAge {
			continue
		}
		if o.DryRun {
			fmt.Fprintf(out, "would remove state directory %s\n", dir)
			continue
		}
		fmt.Fprintf(out, "removed state directory %s\n", dir)
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gcCaches removes per-project cache directories (cache_host_dir/runner-*/
// project-*) whose marker is older than CacheMaxAge.
func (e *Executor) gcCaches(o GCOptions, now time.Time, out io.Writer) error {
	if o.CacheMaxAge <= 0 {
		return nil
	}
	dirs, err := filepath.Glob(filepath.Join(e.Config.CacheHostDir, "runner-*", "project-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		st, err := os.Stat(filepath.Join(dir, cacheMarker))
		if err != nil {
			if st, err = os.Stat(dir); err != nil {
				continue
			}
		}
		age := now.Sub(st.ModTime())
		if age < o.CacheMaxAge {
			continue
		}
		if o.DryRun {
			fmt.Fprintf(out, "would remove cache %s (unused for %s)\n", dir, age.Round(time.Second))
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove cache %s: %w", dir, err))
			continue
		}
		fmt.Fprintf(out, "removed cache %s (unused for %s)\n", dir, age.Round(time.Second))
	}
	return errors.Join(errs...)
}

// loopBusy reports whether the stage loop of one of the containers still
// runs a stage (its driver may be gone: a crashed runner), asking each
// container (channel.BusyCommand): the loop's record of its stages is in
// the container, not on the host. A container that cannot answer is taken
// as idle: it has no loop, or is gone.
func (e *Executor) loopBusy(ctx context.Context, containers []string) bool {
	for _, c := range containers {
		var out strings.Builder
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := e.Engine.Exec(cctx, c, container.Exec{Cmd: channel.BusyCommand(channel.MountPoint, channel.JobMountPoint), Stdout: &out, Stderr: io.Discard})
		cancel()
		if err == nil && strings.TrimSpace(out.String()) == "busy" {
			return true
		}
	}
	return false
}
