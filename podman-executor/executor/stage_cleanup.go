package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"gitlab.com/depsd/depsd/podman-executor/container"
)

// CleanupStage removes the job's container, its services and its network.
// It is idempotent and works after a failed or partial prepare. It touches
// only things with the executor's labels for this job; the cache stays.
func (e *Executor) CleanupStage(ctx context.Context) error {
	id, err := e.identity()
	var je *JobError
	if errors.As(err, &je) {
		// config and prepare refused the job the same way: nothing was
		// created for it.
		fmt.Fprintf(e.Stdout, "Nothing to clean up: %s\n", je.Msg)
		return nil
	}
	if err != nil {
		return err
	}
	if err := e.connect(ctx); err != nil {
		return err
	}
	return e.removeGroup(ctx, id.JobName())
}

// removeGroup removes every labelled container and network of one job
// (group = the job container's name). Errors are collected, not fatal on
// the first, so one stuck service does not keep the rest around.
func (e *Executor) removeGroup(ctx context.Context, group string) error {
	sel := map[string]string{LabelManaged: "true", LabelGroup: group}
	list, err := e.Engine.List(ctx, sel)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range list {
		if err := e.removeContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	nets, err := e.Engine.ListNetworks(ctx, sel)
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range nets {
		if err := e.Engine.RemoveNetwork(ctx, n.Name); err != nil {
			errs = append(errs, err)
		}
	}
	vols, err := e.Engine.ListVolumes(ctx, sel)
	if err != nil {
		errs = append(errs, err)
	}
	for _, v := range vols {
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

// Retries of a removal podman answered with container.ErrBusy: the first
// wait, the longest, and how long to keep trying in all (well within the
// runner's cleanup timeout, one hour by default).
const (
	removeRetryFirst = 100 * time.Millisecond
	removeRetryMax   = 2 * time.Second
	removeRetryFor   = 30 * time.Second
)

// removeContainer removes a container, retrying while podman reports a
// busy mount (a transient "unlinkat .../userdata/shm: device or resource
// busy" after a container that ran beside others), for up to
// removeRetryFor or until ctx ends.
func (e *Executor) removeContainer(ctx context.Context, id string) error {
	wait, waited := removeRetryFirst, time.Duration(0)
	for {
		err := e.Engine.Remove(ctx, id)
		if !errors.Is(err, container.ErrBusy) || waited >= removeRetryFor {
			return err
		}
		e.Log.Info("container removal busy, retrying", "container", id, "wait", wait, "err", err)
		if serr := e.sleep(ctx, wait); serr != nil {
			return err
		}
		waited += wait
		wait = min(2*wait, removeRetryMax)
	}
}
