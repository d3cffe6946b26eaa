package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	sel := map[string]string{LabelManaged: "true", LabelGroup: group}
	list, err := e.Engine.List(ctx, sel)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range list {
		if err := e.Engine.Remove(ctx, c.ID); err != nil {
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
