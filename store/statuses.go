package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/chain"
)

// chainStatusMigration adds the commit statuses of chains (one row per
// pipeline that started a chain: what the chain wants it to show, what
// the sender knows GitLab shows; chain/commitstatus.go) and the projects'
// visibility, which decides what a status may name.
func chainStatusMigration() migration {
	return migration{
		version: 20,
		name:    "project visibility, chain commit statuses",
		stmts: []string{
			`ALTER TABLE projects ADD COLUMN visibility TEXT NOT NULL DEFAULT ''`,
			// doubt is 0 or 1; want_* are the chain transactions', the
			// rest the sender's.
			`CREATE TABLE chain_statuses (
				pipeline_id BIGINT PRIMARY KEY,
				project_id BIGINT NOT NULL,
				project TEXT NOT NULL,
				sha TEXT NOT NULL,
				ref TEXT NOT NULL,
				chain_id BIGINT NOT NULL,
				want TEXT NOT NULL,
				want_desc TEXT NOT NULL,
				want_seq BIGINT NOT NULL,
				done_seq BIGINT NOT NULL,
				have TEXT NOT NULL,
				have_desc TEXT NOT NULL,
				doubt INTEGER NOT NULL,
				next_send_at TEXT NOT NULL,
				lease_until TEXT,
				claimed_by TEXT NOT NULL,
				attempts INTEGER NOT NULL,
				last_error TEXT NOT NULL,
				created_at TEXT NOT NULL,
				sent_at TEXT
			)`,
			// The sender's look-up: only the rows with a want not dealt
			// with, so that the history of statuses costs it nothing.
			`CREATE INDEX chain_statuses_due ON chain_statuses (next_send_at) WHERE done_seq < want_seq`,
			`CREATE INDEX chain_statuses_chain ON chain_statuses (chain_id)`,
		},
	}
}

const chainStatusColumns = `pipeline_id, project_id, project, sha, ref, chain_id, want, want_desc, want_seq, done_seq,
	have, have_desc, doubt, next_send_at, lease_until, claimed_by, attempts, last_error, created_at, sent_at, name`

// AddChainStatus implements chain.Tx.
func (t chainTx) AddChainStatus(ctx context.Context, s chain.ChainStatus) error {
	err := t.tx.execLater(ctx, `INSERT INTO chain_statuses (`+chainStatusColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
		ON CONFLICT (pipeline_id) DO NOTHING`,
		s.PipelineID, s.ProjectID, s.Project, s.SHA, s.Ref, s.ChainID, string(s.Want), s.WantDesc, s.WantSeq, s.DoneSeq,
		string(s.Have), s.HaveDesc, boolInt(s.Doubt), encodeTime(s.NextSendAt), encodeTime(s.LeaseUntil), s.ClaimedBy,
		s.Attempts, s.LastError, encodeTime(s.CreatedAt), encodeTime(s.SentAt), statusName(s.Name))
	if err != nil {
		return fmt.Errorf("record the commit status of pipeline %d: %w", s.PipelineID, err)
	}
	return nil
}

// WantChainStatus implements chain.Tx: one statement, which changes
// nothing when nothing changed.
func (t chainTx) WantChainStatus(ctx context.Context, pipelineID, chainID int64, want chain.CommitState, desc string) error {
	err := t.tx.execLater(ctx, `UPDATE chain_statuses SET chain_id = $2, want = $3, want_desc = $4, want_seq = want_seq + 1
		WHERE pipeline_id = $1 AND (chain_id <> $2 OR want <> $3 OR want_desc <> $4)`,
		pipelineID, chainID, string(want), desc)
	if err != nil {
		return fmt.Errorf("set the commit status of pipeline %d: %w", pipelineID, err)
	}
	return nil
}

// ChainStatus implements chain.Tx.
func (t chainTx) ChainStatus(ctx context.Context, pipelineID int64) (chain.ChainStatus, bool, error) {
	list, err := t.queryChainStatuses(ctx, `SELECT `+chainStatusColumns+` FROM chain_statuses WHERE pipeline_id = $1`, pipelineID)
	if err != nil || len(list) == 0 {
		return chain.ChainStatus{}, false, err
	}
	return list[0], true, nil
}

// ChainStatuses implements chain.Tx.
func (t chainTx) ChainStatuses(ctx context.Context, chainID int64) ([]chain.ChainStatus, error) {
	return t.queryChainStatuses(ctx, `SELECT `+chainStatusColumns+` FROM chain_statuses WHERE chain_id = $1
		ORDER BY pipeline_id`, chainID)
}

// DueChainStatus implements chain.Tx.
func (t chainTx) DueChainStatus(ctx context.Context, now time.Time) (chain.ChainStatus, bool, error) {
	n := encodeTime(now)
	list, err := t.queryChainStatuses(ctx, `SELECT `+chainStatusColumns+` FROM chain_statuses
		WHERE done_seq < want_seq AND next_send_at <= $1 AND (lease_until IS NULL OR lease_until <= $1
			OR (claimed_by <> '' AND NOT EXISTS (SELECT 1 FROM leases l
				WHERE l.name = 'alive:' || chain_statuses.claimed_by AND l.expires_at > $1)))
		ORDER BY next_send_at, pipeline_id LIMIT 1`, n)
	if err != nil || len(list) == 0 {
		return chain.ChainStatus{}, false, err
	}
	return list[0], true, nil
}

// NextChainStatusDue implements chain.Tx.
func (t chainTx) NextChainStatusDue(ctx context.Context) (time.Time, bool, error) {
	var next sql.NullString
	err := t.tx.QueryRowContext(ctx, `SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until > next_send_at
		THEN lease_until ELSE next_send_at END) FROM chain_statuses WHERE done_seq < want_seq`).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the next commit status due: %w", err)
	}
	at, err := decodeTime(next)
	return at, next.Valid, err
}

// SaveChainStatusSend implements chain.Tx.
func (t chainTx) SaveChainStatusSend(ctx context.Context, s chain.ChainStatus) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE chain_statuses SET done_seq = $2, have = $3, have_desc = $4, doubt = $5,
		next_send_at = $6, lease_until = $7, claimed_by = $8, attempts = $9, last_error = $10, sent_at = $11
		WHERE pipeline_id = $1`,
		s.PipelineID, s.DoneSeq, string(s.Have), s.HaveDesc, boolInt(s.Doubt), encodeTime(s.NextSendAt),
		encodeTime(s.LeaseUntil), s.ClaimedBy, s.Attempts, s.LastError, encodeTime(s.SentAt))
	if err != nil {
		return fmt.Errorf("save the commit status of pipeline %d: %w", s.PipelineID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("save the commit status of pipeline %d: %w", s.PipelineID, chain.ErrNotFound)
	}
	return nil
}

func (t chainTx) queryChainStatuses(ctx context.Context, q string, args ...any) ([]chain.ChainStatus, error) {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read commit statuses: %w", err)
	}
	defer rows.Close()
	var out []chain.ChainStatus
	for rows.Next() {
		var s chain.ChainStatus
		var want, have string
		var doubt int
		var next, lease, created, sent sql.NullString
		if err := rows.Scan(&s.PipelineID, &s.ProjectID, &s.Project, &s.SHA, &s.Ref, &s.ChainID, &want, &s.WantDesc,
			&s.WantSeq, &s.DoneSeq, &have, &s.HaveDesc, &doubt, &next, &lease, &s.ClaimedBy, &s.Attempts, &s.LastError,
			&created, &sent, &s.Name); err != nil {
			return nil, fmt.Errorf("read commit statuses: %w", err)
		}
		if s.Name == "" {
			s.Name = chain.StatusName
		}
		s.Want, s.Have, s.Doubt = chain.CommitState(want), chain.CommitState(have), doubt != 0
		for _, f := range []struct {
			dst *time.Time
			col sql.NullString
		}{{&s.NextSendAt, next}, {&s.LeaseUntil, lease}, {&s.CreatedAt, created}, {&s.SentAt, sent}} {
			if err := decodeTimeInto(f.dst, f.col); err != nil {
				return nil, fmt.Errorf("commit status of pipeline %d: %w", s.PipelineID, err)
			}
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// statusName is how a status's name is stored: ” for depsd/chain (every
// status before validations).
func statusName(name string) string {
	if name == chain.StatusName {
		return ""
	}
	return name
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
