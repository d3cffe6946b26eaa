package chain

import (
	"context"
	"fmt"
	"time"
)

// ChainView is a chain as the HTTP API and the CLI show it.
type ChainView struct {
	ID   int64 `json:"id"`
	Mode Mode  `json:"mode"`
	// Kind is release or validation; Validation what a validation
	// validates (premerge.go).
	Kind       ChainKind    `json:"kind"`
	Validation *Validation  `json:"validation,omitempty"`
	State      State        `json:"state"`
	Roots      []string     `json:"roots"`
	Reasons    []Reason     `json:"reasons"`
	Skipped    []Skip       `json:"skipped,omitempty"`
	MergedInto int64        `json:"merged_into,omitempty"`
	Started    time.Time    `json:"started"`
	Updated    time.Time    `json:"updated"`
	Ended      *time.Time   `json:"ended,omitempty"`
	Members    []MemberView `json:"members"`
	// Writes are what depsd wrote to GitLab for the chain (commits,
	// merge requests, notes moving pins), oldest first; only for one
	// chain (Engine.Chain), not in lists.
	Writes []Write `json:"writes,omitempty"`
}

// MemberView is one project of a ChainView.
type MemberView struct {
	Project string `json:"project"`
	// Hidden: the person asking may not see the member's project; Project
	// is then a label ("hidden-1") and only its state is shown
	// (visible.Scope).
	Hidden      bool        `json:"hidden,omitempty"`
	State       MemberState `json:"state"`
	PipelineID  int64       `json:"pipeline_id,omitempty"`
	PipelineURL string      `json:"pipeline_url,omitempty"`
	Upstreams   []string    `json:"upstreams"`
	// Pinned are the upstreams it pins by digest; MergeRequest the merge
	// request moving its pins (while waiting-merge, and after), MergeSHA
	// its merge's commit once merged.
	Pinned       []string `json:"pinned,omitempty"`
	MergeRequest string   `json:"merge_request,omitempty"`
	MergeSHA     string   `json:"merge_sha,omitempty"`
	Why          string   `json:"why,omitempty"`
	Requeued     bool     `json:"requeued"`
	Builds       int      `json:"builds"`
	// NoCache: the current build was asked without cache (its previous
	// images were stale); Verified and VerifyDetail are the verdict on
	// the last build's images.
	NoCache      bool       `json:"no_cache,omitempty"`
	Verified     ImageState `json:"verified,omitempty"`
	VerifyDetail string     `json:"verify_detail,omitempty"`
	TriggeredAt  *time.Time `json:"triggered_at,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	// Built is, in a validation, the image the member's validation
	// pipeline built (its digest; the reference it pushed to at depth
	// all): what the next level built on.
	Built string `json:"built,omitempty"`
}

// View returns the chain as shown to users.
func (c *Chain) View() ChainView {
	kind := c.Kind
	if kind == "" {
		kind = KindRelease
	}
	v := ChainView{
		ID: c.ID, Mode: c.Mode, Kind: kind, Validation: c.Validation, State: c.State, Roots: nonNil(c.Roots), Reasons: c.Reasons,
		Skipped: c.Skipped, MergedInto: c.MergedInto, Started: c.StartedAt, Updated: c.UpdatedAt,
		Ended: timePtr(c.EndedAt), Members: make([]MemberView, 0, len(c.Members)),
	}
	if v.Reasons == nil {
		v.Reasons = []Reason{}
	}
	for _, m := range c.Members {
		v.Members = append(v.Members, MemberView{
			Project: m.Project, State: m.State, PipelineID: m.PipelineID, PipelineURL: m.PipelineURL,
			Upstreams: nonNil(m.Upstreams), Pinned: m.Pinned, MergeRequest: m.MergeRequest, MergeSHA: m.MergeSHA,
			Why: m.Why, Requeued: m.Requeued, Builds: m.Builds,
			NoCache: m.NoCache, Verified: m.Verified, VerifyDetail: m.VerifyDetail,
			TriggeredAt: timePtr(m.TriggeredAt), FinishedAt: timePtr(m.FinishedAt),
		})
		if c.IsValidation() {
			if image, d := onlyImage(m.Images); d != "" {
				v.Members[len(v.Members)-1].Built = image + "@" + d
			}
		}
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Chains returns the chains matching f, newest first.
func (e *Engine) Chains(ctx context.Context, f Filter) ([]ChainView, error) {
	var out []ChainView
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		cs, err := tx.Chains(ctx, f)
		for _, c := range cs {
			out = append(out, c.View())
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", err)
	}
	return out, nil
}

// Chain returns one chain; an unknown id is an error wrapping ErrNotFound.
func (e *Engine) Chain(ctx context.Context, id int64) (ChainView, error) {
	var out ChainView
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		c, err := tx.Chain(ctx, id)
		if err != nil {
			return err
		}
		out = c.View()
		out.Writes, err = tx.Writes(ctx, id)
		return err
	})
	if err != nil {
		return ChainView{}, fmt.Errorf("chain %d: %w", id, err)
	}
	return out, nil
}

// Stats are gauges for the daemon's metrics.
type Stats struct {
	// ActiveChains counts the release chains running or blocked (a
	// validation is no rebuild: ActiveValidations counts those running).
	ActiveChains      int `json:"active_chains"`
	ActiveValidations int `json:"active_validations"`
	// BlockedChains are the active chains in state Blocked; BlockedSince
	// is when the one among them that has not moved for the longest last
	// changed (zero when none is blocked): how long it has waited for
	// someone to act.
	BlockedChains int `json:"blocked_chains"`
	// Members counts the active chains' members by state.
	Members         map[MemberState]int `json:"members,omitempty"`
	BlockedSince    time.Time           `json:"blocked_since,omitzero"`
	PendingActions  int                 `json:"pending_actions"`
	UnprocessedEvts int                 `json:"unprocessed_events"`
	// VerifyQueued counts the successful builds whose images wait to be
	// verified.
	VerifyQueued int `json:"verify_queued"`
}

// Stats counts the active chains, pending actions, unprocessed events and
// queued verifications.
func (e *Engine) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		cs, err := tx.ActiveChains(ctx)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if c.IsValidation() {
				s.ActiveValidations++
				continue
			}
			s.ActiveChains++
			for _, m := range c.Members {
				if s.Members == nil {
					s.Members = map[MemberState]int{}
				}
				s.Members[m.State]++
			}
			if c.State != Blocked {
				continue
			}
			s.BlockedChains++
			if s.BlockedSince.IsZero() || c.UpdatedAt.Before(s.BlockedSince) {
				s.BlockedSince = c.UpdatedAt
			}
		}
		if s.PendingActions, err = tx.CountActions(ctx, ActionPending); err != nil {
			return err
		}
		if s.UnprocessedEvts, err = tx.CountEvents(ctx); err != nil {
			return err
		}
		s.VerifyQueued, err = tx.CountVerifyTasks(ctx)
		return err
	})
	if err != nil {
		return Stats{}, fmt.Errorf("chain stats: %w", err)
	}
	return s, nil
}
