package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// CleanupStage removes the job's container, its services and its network.
// It is idempotent and works after a failed or partial prepare. It touches
// only things with the executor's labels for this job; the cache stays.
func (e *Executor) CleanupStage(ctx context.Context) error {
	if err := e.connect(ctx); err != nil {
		return err
	}
	return e.removeGroup(ctx, e.Job.Identity().JobName())
}

// removeGroup removes every labelled container and network of one job
// (group = the job container's name). Errors are collected, not fatal on
// the first, so one stuck service does not keep the rest around.
func (e *Executor) removeGroup(ctx context.Context, group string) error {
	return e.removeListed(ctx, group, e.listGroup(ctx, group))
}

// groupList is what a job left in podman, as three concurrent list calls
// found it.
type groupList struct {
	containers []container.Info
	networks   []container.Network
	volumes    []container.Volume
	errs       [3]error
}

// listGroup lists a job's labelled containers, networks and volumes,
// the three calls at once (they are independent, and each is a round
// trip to podman).
func (e *Executor) listGroup(ctx context.Context, group string) *groupList {
	sel := map[string]string{LabelManaged: "true", LabelGroup: group}
	var l groupList
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); l.containers, l.errs[0] = e.Engine.List(ctx, sel) }()
	go func() { defer wg.Done(); l.networks, l.errs[1] = e.Engine.ListNetworks(ctx, sel) }()
	go func() { defer wg.Done(); l.volumes, l.errs[2] = e.Engine.ListVolumes(ctx, sel) }()
	wg.Wait()
	return &l
}

// removeListed removes what listGroup found: the containers first (a
// network or volume in use cannot go), then the networks and volumes,
// then the job's state directory.
func (e *Executor) removeListed(ctx context.Context, group string, l *groupList) error {
	if l.errs[0] != nil {
		return l.errs[0]
	}
	var errs []error
	for _, c := range l.containers {
		if err := e.Engine.Remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, l.errs[1], l.errs[2])
	for _, n := range l.networks {
		if err := e.Engine.RemoveNetwork(ctx, n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range l.volumes {
		if err := e.Engine.RemoveVolume(ctx, v.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Config.StateDir != "" {
		if err := os.RemoveAll(e.jobStateDir(group)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean up job %s: %w", group, err)
	}
	return nil
}
