package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/deps"
)

// ValidationView is a merge request's validation as the HTTP API, the
// CLI and the dashboard show it: the merge request, what depsd showed on
// it, and the validation (its members with their pipelines).
type ValidationView struct {
	ProjectID    int64   `json:"project_id"`
	Project      string  `json:"project"` // the upstream's node
	IID          int64   `json:"iid"`
	Title        string  `json:"title,omitempty"`
	URL          string  `json:"url,omitempty"`
	SourceBranch string  `json:"source_branch,omitempty"`
	TargetBranch string  `json:"target_branch,omitempty"`
	State        MRState `json:"state"` // the merge request's: opened, merged, closed
	HeadSHA      string  `json:"head_sha,omitempty"`
	// PipelineID is the newest merge request pipeline, PipelineStatus
	// its status (the validation's own status counted).
	PipelineID     int64  `json:"pipeline_id,omitempty"`
	PipelineURL    string `json:"pipeline_url,omitempty"`
	PipelineStatus string `json:"pipeline_status,omitempty"`
	// Result is the commit status depsd/dependents of the validation
	// (pending, running, success, failed, canceled; "" before one
	// started), Summary its description.
	Result  CommitState `json:"result,omitempty"`
	Summary string      `json:"summary,omitempty"`
	// Chains are the merge request's validations, oldest first; Chain the
	// newest (nil when none started), with its members.
	Chains []int64    `json:"chains"`
	Chain  *ChainView `json:"validation,omitempty"`
	// NoteID is depsd's note on the merge request (0 until written).
	NoteID  int64        `json:"note_id,omitempty"`
	Cleanup []TagCleanup `json:"cleanup,omitempty"`
	// Error says why the last step failed or nothing was validated.
	Error   string    `json:"error,omitempty"`
	Updated time.Time `json:"updated"`
}

// view renders v with its newest validation c (nil: none).
func (v MRValidation) view(c *Chain) ValidationView {
	out := ValidationView{
		ProjectID: v.ProjectID, Project: v.Project, IID: v.IID, Title: v.Title, URL: v.URL, SourceBranch: v.SourceBranch,
		TargetBranch: v.TargetBranch, State: v.State, HeadSHA: v.HeadSHA, PipelineID: v.PipelineID, PipelineURL: v.PipelineURL,
		PipelineStatus: v.PipelineStatus, Chains: nonNilIDs(v.Chains), NoteID: v.Note.ID, Cleanup: v.Cleanup,
		Error: v.LastError, Updated: v.UpdatedAt,
	}
	if c != nil && c.Validation != nil {
		cv := c.View()
		out.Chain = &cv
		n := countValidation(c)
		out.Result = validationCommitState(c, n)
		out.Summary = validationDescription(c, n, func(m *Member) (string, bool) { return m.Project, true })
	}
	return out
}

func nonNilIDs(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// MRValidations returns what is kept of the merge requests f selects, the
// most recently changed first.
func (e *Engine) MRValidations(ctx context.Context, f MRFilter) ([]MRValidation, error) {
	var out []MRValidation
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		var err error
		out, err = tx.MRValidations(ctx, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list merge requests validated: %w", err)
	}
	return out, nil
}

// Validations returns the merge requests f selects with their newest
// validation, the most recently changed first.
func (e *Engine) Validations(ctx context.Context, f MRFilter) ([]ValidationView, error) {
	var out []ValidationView
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		list, err := tx.MRValidations(ctx, f)
		if err != nil {
			return err
		}
		for _, v := range list {
			var c *Chain
			if v.ChainID != 0 {
				if c, err = tx.Chain(ctx, v.ChainID); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
			}
			out = append(out, v.view(c))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list validations: %w", err)
	}
	return out, nil
}

// Validation returns validation chainID with its merge request; an
// unknown id, or one of a chain that is no validation, is an error
// wrapping ErrNotFound.
func (e *Engine) Validation(ctx context.Context, chainID int64) (ValidationView, error) {
	var out ValidationView
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		c, err := tx.Chain(ctx, chainID)
		if err != nil {
			return err
		}
		if c.Validation == nil {
			return fmt.Errorf("chain %d is no validation: %w", chainID, ErrNotFound)
		}
		v, ok, err := tx.MRValidation(ctx, c.Validation.ProjectID, c.Validation.IID)
		if err != nil {
			return err
		}
		if !ok {
			v = MRValidation{ProjectID: c.Validation.ProjectID, IID: c.Validation.IID, Project: c.Roots[0], State: MROpened}
		}
		out = v.view(c)
		return nil
	})
	if err != nil {
		return ValidationView{}, fmt.Errorf("validation %d: %w", chainID, err)
	}
	return out, nil
}

// MergeRequestValidation returns the newest validation of merge request
// iid of project (a path); one never validated is ErrNotFound.
func (e *Engine) MergeRequestValidation(ctx context.Context, project string, iid int64) (ValidationView, error) {
	var out ValidationView
	err := e.cfg.Store.ViewChains(ctx, func(tx Tx) error {
		p, ok, err := tx.Project(ctx, deps.NodeProject(project))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("project %s: %w", project, ErrNotFound)
		}
		v, ok, err := tx.MRValidation(ctx, p.ID, iid)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("merge request !%d of %s: %w", iid, project, ErrNotFound)
		}
		var c *Chain
		if v.ChainID != 0 {
			if c, err = tx.Chain(ctx, v.ChainID); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		out = v.view(c)
		return nil
	})
	if err != nil {
		return ValidationView{}, fmt.Errorf("validation of merge request !%d of %s: %w", iid, project, err)
	}
	return out, nil
}
