package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/deps"
)

// premergeMigration adds validations of upstreams' merge requests
// (chain/premerge.go): a chain's kind and what a validation validates
// (JSON); a commit status's name (” is depsd/chain); per merge request
// of an upstream, what depsd keeps of it (mr_validations: the columns its
// sender's look-ups filter on, the rest JSON in data); and the branch
// pipelines that may be a merge request's candidate.
func premergeMigration() migration {
	return migration{
		version: 22,
		name:    "premerge validations: chain kinds, merge requests validated, branch candidates",
		stmts: []string{
			`ALTER TABLE chains ADD COLUMN kind TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE chains ADD COLUMN validation TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE chain_statuses ADD COLUMN name TEXT NOT NULL DEFAULT ''`,
			// note_due_at: when the note's want falls due (NULL when
			// none is), note_claimed_by who claimed its send (a claim
			// of an owner no longer alive is void, as an action's);
			// cleanup: 1 while tags are left to delete.
			`CREATE TABLE mr_validations (
				project_id BIGINT NOT NULL,
				iid BIGINT NOT NULL,
				project TEXT NOT NULL,
				state TEXT NOT NULL,
				start_due INTEGER NOT NULL,
				next_check_at TEXT NOT NULL,
				note_due_at TEXT,
				note_claimed_by TEXT NOT NULL DEFAULT '',
				cleanup INTEGER NOT NULL,
				chain_id BIGINT NOT NULL,
				updated_at TEXT NOT NULL,
				data TEXT NOT NULL,
				PRIMARY KEY (project_id, iid)
			)`,
			`CREATE INDEX mr_validations_updated ON mr_validations (updated_at)`,
			`CREATE TABLE branch_candidates (
				pipeline_id BIGINT PRIMARY KEY,
				project_id BIGINT NOT NULL,
				project TEXT NOT NULL,
				branch TEXT NOT NULL,
				sha TEXT NOT NULL,
				pipeline_url TEXT NOT NULL,
				queued_at TEXT NOT NULL
			)`,
		},
	}
}

// encodeKind is how a chain's kind and validation are stored: ” for a
// release chain (as every chain before validations), JSON for a
// validation.
func encodeKind(c *chain.Chain) (kind, validation string, err error) {
	if c.Kind != chain.KindRelease {
		kind = string(c.Kind)
	}
	if c.Validation != nil {
		b, err := json.Marshal(c.Validation)
		if err != nil {
			return "", "", fmt.Errorf("chain %d validation: %w", c.ID, err)
		}
		validation = string(b)
	}
	return kind, validation, nil
}

// encodeSomeTime is encodeTime for a column that holds a time always: the
// zero time is stored as the Unix epoch (due at once).
func encodeSomeTime(t time.Time) any {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return encodeTime(t)
}

// mrData is the part of a chain.MRValidation kept as JSON.
type mrData struct {
	Title          string             `json:"title,omitempty"`
	URL            string             `json:"url,omitempty"`
	SourceBranch   string             `json:"source_branch,omitempty"`
	TargetBranch   string             `json:"target_branch,omitempty"`
	HeadSHA        string             `json:"head_sha,omitempty"`
	PipelineID     int64              `json:"pipeline_id,omitempty"`
	PipelineURL    string             `json:"pipeline_url,omitempty"`
	PipelineStatus string             `json:"pipeline_status,omitempty"`
	Validated      int64              `json:"validated,omitempty"`
	Chains         []int64            `json:"chains,omitempty"`
	Note           chain.NoteSend     `json:"note"`
	Cleanup        []chain.TagCleanup `json:"cleanup,omitempty"`
	Attempts       int                `json:"attempts,omitempty"`
	LastError      string             `json:"last_error,omitempty"`
	CreatedAt      time.Time          `json:"created_at"`
}

const mrColumns = `project_id, iid, project, state, start_due, next_check_at, chain_id, updated_at, data`

// SaveMRValidation implements chain.Tx.
func (t chainTx) SaveMRValidation(ctx context.Context, v chain.MRValidation) error {
	b, err := json.Marshal(mrData{
		Title: v.Title, URL: v.URL, SourceBranch: v.SourceBranch, TargetBranch: v.TargetBranch,
		HeadSHA: v.HeadSHA, PipelineID: v.PipelineID, PipelineURL: v.PipelineURL, PipelineStatus: v.PipelineStatus,
		Validated: v.Validated, Chains: v.Chains, Note: v.Note, Cleanup: v.Cleanup, Attempts: v.Attempts, LastError: v.LastError,
		CreatedAt: v.CreatedAt,
	})
	if err != nil {
		return fmt.Errorf("encode merge request !%d of project %d: %w", v.IID, v.ProjectID, err)
	}
	var noteDue any
	claimedBy := ""
	if v.Note.DoneSeq < v.Note.WantSeq {
		at := v.Note.NextSendAt
		if v.Note.LeaseUntil.After(at) {
			at, claimedBy = v.Note.LeaseUntil, v.Note.ClaimedBy
		}
		noteDue = encodeSomeTime(at)
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO mr_validations (`+mrColumns+`, note_due_at, note_claimed_by, cleanup)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (project_id, iid) DO UPDATE SET project = excluded.project, state = excluded.state,
			start_due = excluded.start_due, next_check_at = excluded.next_check_at, chain_id = excluded.chain_id,
			updated_at = excluded.updated_at, data = excluded.data, note_due_at = excluded.note_due_at,
			note_claimed_by = excluded.note_claimed_by, cleanup = excluded.cleanup`,
		v.ProjectID, v.IID, v.Project, string(v.State), boolInt(v.StartDue), encodeSomeTime(v.NextCheckAt), v.ChainID,
		encodeSomeTime(v.UpdatedAt), string(b), noteDue, claimedBy, boolInt(v.CleanupPending()))
	if err != nil {
		return fmt.Errorf("save merge request !%d of project %d: %w", v.IID, v.ProjectID, err)
	}
	return nil
}

// OwnerAlive implements chain.Tx.
func (t chainTx) OwnerAlive(ctx context.Context, owner string, now time.Time) (bool, error) {
	var n int
	err := t.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM leases WHERE name = $1 AND expires_at > $2`,
		"alive:"+owner, encodeTime(now)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read whether %s is alive: %w", owner, err)
	}
	return n > 0, nil
}

// MRValidation implements chain.Tx.
func (t chainTx) MRValidation(ctx context.Context, projectID, iid int64) (chain.MRValidation, bool, error) {
	list, err := t.queryMRs(ctx, `SELECT `+mrColumns+` FROM mr_validations WHERE project_id = $1 AND iid = $2`, projectID, iid)
	if err != nil || len(list) == 0 {
		return chain.MRValidation{}, false, err
	}
	return list[0], true, nil
}

// MRValidations implements chain.Tx.
func (t chainTx) MRValidations(ctx context.Context, f chain.MRFilter) ([]chain.MRValidation, error) {
	var where []string
	var args []any
	if f.Due {
		args = append(args, encodeTime(f.Now))
		where = append(where, `((next_check_at <= $1 AND (start_due = 1 OR state = 'opened' OR cleanup = 1))
			OR note_due_at <= $1
			OR (note_due_at IS NOT NULL AND note_claimed_by <> '' AND NOT EXISTS (SELECT 1 FROM leases l
				WHERE l.name = 'alive:' || mr_validations.note_claimed_by AND l.expires_at > $1)))`)
	}
	if f.ProjectID != 0 {
		args = append(args, f.ProjectID)
		where = append(where, fmt.Sprintf("project_id = $%d", len(args)))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT ` + mrColumns + ` FROM mr_validations`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY updated_at DESC, project_id, iid LIMIT $%d`, len(args))
	return t.queryMRs(ctx, q, args...)
}

// NextMRValidationDue implements chain.Tx.
func (t chainTx) NextMRValidationDue(ctx context.Context) (time.Time, bool, error) {
	var check, note sql.NullString
	err := t.tx.QueryRowContext(ctx, `SELECT
		(SELECT MIN(next_check_at) FROM mr_validations WHERE start_due = 1 OR state = 'opened' OR cleanup = 1),
		(SELECT MIN(note_due_at) FROM mr_validations)`).Scan(&check, &note)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the next merge request work due: %w", err)
	}
	var out time.Time
	found := false
	for _, col := range []sql.NullString{check, note} {
		if !col.Valid {
			continue
		}
		at, err := decodeTime(col)
		if err != nil {
			return time.Time{}, false, err
		}
		if !found || at.Before(out) {
			out, found = at, true
		}
	}
	return out, found, nil
}

func (t chainTx) queryMRs(ctx context.Context, q string, args ...any) ([]chain.MRValidation, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read merge requests validated: %w", err)
	}
	defer rows.Close()
	var out []chain.MRValidation
	for rows.Next() {
		var v chain.MRValidation
		var state, data string
		var startDue int
		var check, updated sql.NullString
		if err := rows.Scan(&v.ProjectID, &v.IID, &v.Project, &state, &startDue, &check, &v.ChainID, &updated, &data); err != nil {
			return nil, fmt.Errorf("read merge requests validated: %w", err)
		}
		var d mrData
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			return nil, fmt.Errorf("merge request !%d of project %d: %w", v.IID, v.ProjectID, err)
		}
		v.State, v.StartDue = chain.MRState(state), startDue != 0
		if v.NextCheckAt, err = decodeTime(check); err != nil {
			return nil, err
		}
		if v.UpdatedAt, err = decodeTime(updated); err != nil {
			return nil, err
		}
		v.Title, v.URL, v.SourceBranch, v.TargetBranch = d.Title, d.URL, d.SourceBranch, d.TargetBranch
		v.HeadSHA, v.PipelineID, v.PipelineURL, v.PipelineStatus = d.HeadSHA, d.PipelineID, d.PipelineURL, d.PipelineStatus
		v.Validated, v.Chains, v.Note, v.Cleanup, v.Attempts, v.LastError, v.CreatedAt = d.Validated, d.Chains, d.Note, d.Cleanup, d.Attempts, d.LastError, d.CreatedAt
		out = append(out, v)
	}
	return out, rows.Err()
}

// QueueBranchCandidate implements chain.Tx.
func (t chainTx) QueueBranchCandidate(ctx context.Context, c chain.BranchCandidate) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO branch_candidates (pipeline_id, project_id, project, branch, sha,
		pipeline_url, queued_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (pipeline_id) DO NOTHING`,
		c.PipelineID, c.ProjectID, c.Project, c.Branch, c.SHA, c.PipelineURL, encodeTime(c.QueuedAt))
	if err != nil {
		return fmt.Errorf("queue pipeline %d of %s as a candidate: %w", c.PipelineID, c.Project, err)
	}
	return nil
}

// BranchCandidates implements chain.Tx.
func (t chainTx) BranchCandidates(ctx context.Context, limit int) ([]chain.BranchCandidate, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT pipeline_id, project_id, project, branch, sha, pipeline_url, queued_at
		FROM branch_candidates ORDER BY queued_at, pipeline_id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("read branch candidates: %w", err)
	}
	defer rows.Close()
	var out []chain.BranchCandidate
	for rows.Next() {
		var c chain.BranchCandidate
		var at sql.NullString
		if err := rows.Scan(&c.PipelineID, &c.ProjectID, &c.Project, &c.Branch, &c.SHA, &c.PipelineURL, &at); err != nil {
			return nil, fmt.Errorf("read branch candidates: %w", err)
		}
		if c.QueuedAt, err = decodeTime(at); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DoneBranchCandidate implements chain.Tx.
func (t chainTx) DoneBranchCandidate(ctx context.Context, pipelineID int64) error {
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM branch_candidates WHERE pipeline_id = $1`, pipelineID); err != nil {
		return fmt.Errorf("remove branch candidate %d: %w", pipelineID, err)
	}
	return nil
}

// UpstreamRefs implements chain.Tx: node's dependencies (its project's
// default branch, or a followed ref's) that name the node upstream.
func (t chainTx) UpstreamRefs(ctx context.Context, node, upstream string) ([]deps.Dependency, error) {
	project := deps.NodeProject(node)
	nodeCol := ""
	if node != project {
		nodeCol = node
	}
	rows, err := t.tx.QueryContext(ctx, `SELECT d.kind, d.line, d.ref, d.image, d.repository, d.tag, d.digest, d.upstream,
			d.upstream_node
		FROM dependencies d JOIN projects p ON p.id = d.project_id
		WHERE p.path = $1 AND d.node = $2
			AND ((d.upstream_node <> '' AND d.upstream_node = $3) OR (d.upstream_node = '' AND d.upstream = $3))
		ORDER BY d.seq`, project, nodeCol, upstream)
	if err != nil {
		return nil, fmt.Errorf("read the dependencies of %s on %s: %w", node, upstream, err)
	}
	defer rows.Close()
	var out []deps.Dependency
	for rows.Next() {
		var d deps.Dependency
		var kind string
		if err := rows.Scan(&kind, &d.Line, &d.Ref, &d.Image, &d.Repository, &d.Tag, &d.Digest, &d.Project, &d.Node); err != nil {
			return nil, fmt.Errorf("read the dependencies of %s on %s: %w", node, upstream, err)
		}
		d.Kind, d.Pinned = deps.Kind(kind), d.Digest != ""
		out = append(out, d)
	}
	return out, rows.Err()
}
