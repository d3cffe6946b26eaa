package chain

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"
)

// Run processes the inbox, sends the outbox and reconciles every
// ReconcileInterval until ctx ends, then returns once all three stopped.
// It is what `depsd serve` runs; callers that want their own schedule call
// RunInbox, RunOutbox and Reconcile themselves.
func (e *Engine) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return e.RunInbox(ctx) })
	g.Go(func() error { return e.RunOutbox(ctx) })
	g.Go(func() error { return e.runReconciler(ctx) })
	return g.Wait()
}

func (e *Engine) runReconciler(ctx context.Context) error {
	tick := time.NewTicker(e.cfg.ReconcileInterval)
	defer tick.Stop()
	for {
		if _, err := e.Reconcile(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("reconcile failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
