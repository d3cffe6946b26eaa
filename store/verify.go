package store

import (
	"context"
	"database/sql"
	"fmt"

	"gitlab.com/depsd/depsd/chain"
)

// verifyMigration adds what the chain engine keeps of verification: the
// chain members' and actions' verification fields and the queue of builds
// to verify (chain.VerifyTask). The results and the upstreams' digests are
// verificationMigration's.
func verifyMigration() migration {
	return migration{
		version: 15,
		name:    "chain members verified, the verification queue",
		stmts: []string{
			`ALTER TABLE chain_members ADD COLUMN no_cache INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE chain_members ADD COLUMN verified TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE chain_members ADD COLUMN verify_detail TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE outbox ADD COLUMN no_cache INTEGER NOT NULL DEFAULT 0`,
			// Written with the success, removed with the verdict's
			// effects: a crash in between loses nothing.
			`CREATE TABLE verify_queue (
				project TEXT NOT NULL,
				pipeline_id BIGINT NOT NULL,
				project_id BIGINT NOT NULL,
				chain_id BIGINT NOT NULL,
				queued_at TEXT NOT NULL,
				PRIMARY KEY (project, pipeline_id)
			)`,
			`CREATE INDEX verify_queue_order ON verify_queue (queued_at, project, pipeline_id)`,
		},
	}
}

// QueueVerify implements chain.Tx.
func (t chainTx) QueueVerify(ctx context.Context, task chain.VerifyTask) error {
	err := t.tx.execLater(ctx, `INSERT INTO verify_queue (project, pipeline_id, project_id, chain_id, queued_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, pipeline_id) DO NOTHING`,
		task.Project, task.PipelineID, task.ProjectID, task.ChainID, encodeTime(task.QueuedAt))
	if err == nil && t.tx.pipe != nil {
		// PostgreSQL: wake the leader's verifier when this commits
		// (WatchVerifyQueue), wherever it runs.
		err = t.tx.execLater(ctx, `SELECT pg_notify($1, '')`, verifyChannel)
	}
	if err != nil {
		return fmt.Errorf("queue verification of %s pipeline %d: %w", task.Project, task.PipelineID, err)
	}
	return nil
}

// VerifyTasks implements chain.Tx.
func (t chainTx) VerifyTasks(ctx context.Context, limit int) ([]chain.VerifyTask, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT project, pipeline_id, project_id, chain_id, queued_at
		FROM verify_queue ORDER BY queued_at, project, pipeline_id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("read verification queue: %w", err)
	}
	defer rows.Close()
	var out []chain.VerifyTask
	for rows.Next() {
		var task chain.VerifyTask
		var at sql.NullString
		if err := rows.Scan(&task.Project, &task.PipelineID, &task.ProjectID, &task.ChainID, &at); err != nil {
			return nil, fmt.Errorf("read verification queue: %w", err)
		}
		if task.QueuedAt, err = decodeTime(at); err != nil {
			return nil, fmt.Errorf("read verification queue: %w", err)
		}
		out = append(out, task)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read verification queue: %w", err)
	}
	return out, nil
}

// CountVerifyTasks implements chain.Tx.
func (t chainTx) CountVerifyTasks(ctx context.Context) (int, error) {
	var n int
	if err := t.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM verify_queue`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued verifications: %w", err)
	}
	return n, nil
}

// DoneVerify implements chain.Tx.
func (t chainTx) DoneVerify(ctx context.Context, project string, pipelineID int64) error {
	if err := t.tx.execLater(ctx, `DELETE FROM verify_queue WHERE project = $1 AND pipeline_id = $2`, project, pipelineID); err != nil {
		return fmt.Errorf("unqueue verification of %s pipeline %d: %w", project, pipelineID, err)
	}
	return nil
}
