package store

import (
	"context"
	"database/sql"
	"fmt"

	"gitlab.com/depsd/depsd/scan"
)

// keptScans bounds the scan history: a daemon rescans periodically, and
// only recent scans are worth showing.
const keptScans = 100

func insertScan(ctx context.Context, tx *sql.Tx, m scan.Meta) error {
	if m.StartedAt.IsZero() {
		return fmt.Errorf("scan metadata has no start time")
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO scans (started_at, finished_at, project_count, edge_count,
			external_count, warning_count, cycle_count, request_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (started_at) DO UPDATE SET
			finished_at = excluded.finished_at,
			project_count = excluded.project_count,
			edge_count = excluded.edge_count,
			external_count = excluded.external_count,
			warning_count = excluded.warning_count,
			cycle_count = excluded.cycle_count,
			request_count = excluded.request_count`,
		encodeTime(m.StartedAt), encodeTime(m.FinishedAt), m.Projects, m.Edges, m.External, m.Warnings, m.Cycles, m.Requests)
	if err != nil {
		return fmt.Errorf("record scan: %w", err)
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM scans WHERE started_at NOT IN (
		SELECT started_at FROM scans ORDER BY started_at DESC LIMIT $1)`, keptScans)
	if err != nil {
		return fmt.Errorf("prune scan history: %w", err)
	}
	return nil
}

// LastScan returns the most recent scan (by start time); ok is false when
// the store has never been scanned.
func (s *Store) LastScan(ctx context.Context) (m scan.Meta, ok bool, err error) {
	var started, finished sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT started_at, finished_at, project_count, edge_count,
			external_count, warning_count, cycle_count, request_count
		FROM scans ORDER BY started_at DESC LIMIT 1`).
		Scan(&started, &finished, &m.Projects, &m.Edges, &m.External, &m.Warnings, &m.Cycles, &m.Requests)
	if errIsNotFound(err) {
		return scan.Meta{}, false, nil
	}
	if err != nil {
		return scan.Meta{}, false, fmt.Errorf("read last scan: %w", err)
	}
	if m.StartedAt, err = decodeTime(started); err != nil {
		return scan.Meta{}, false, fmt.Errorf("read last scan: %w", err)
	}
	if m.FinishedAt, err = decodeTime(finished); err != nil {
		return scan.Meta{}, false, fmt.Errorf("read last scan: %w", err)
	}
	return m, true, nil
}
