package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// copiedTables are the tables Copy moves, parents before children. The
// schema bookkeeping (schema_migrations) is the target's own, and leases
// belong to running processes, not to the state; so do sign-in sessions
// and their key (people sign in again after a move).
var copiedTables = []string{
	"projects", "project_refs", "files", "dependencies", "warnings", "scans",
	"chains", "chain_reasons", "chain_members", "outbox", "events",
	"schedules", "image_digests", "job_runs", "catch_up", "hook_checks",
	"upstream_digests", "verifications", "verify_queue", "hook_secrets", "seen_publications",
	"audit_log",
	"chain_statuses",
	"chain_writes",
	"mr_validations", "branch_candidates",
}

// ErrTargetNotEmpty: Copy refuses to write into a store that holds state.
var ErrTargetNotEmpty = errors.New("target store is not empty")

// CopyCount is how many rows of a table Copy moved.
type CopyCount struct {
	Table string
	Rows  int
}

// Copy copies the whole state (projects, chains, outbox, inbox, schedules,
// history, ...) from one store into another, e.g. from an SQLite file to a
// PostgreSQL database (`depsd migrate-state`). Both must be at the same
// schema version (Open brings them there). It refuses, with
// ErrTargetNotEmpty naming the table, a target that holds any row, so a
// second run cannot overwrite or mix state. Values are copied as stored
// (times are the same text on both backends), in one read snapshot of the
// source and one write transaction on the target: a failure leaves the
// target empty. Stop the daemons using the source first, or what they
// write meanwhile is not copied.
func Copy(ctx context.Context, from, to *Store) ([]CopyCount, error) {
	fv, err := from.SchemaVersion(ctx)
	if err != nil {
		return nil, err
	}
	tv, err := to.SchemaVersion(ctx)
	if err != nil {
		return nil, err
	}
	if fv != tv {
		return nil, fmt.Errorf("copy state: schema versions differ (%s: %d, %s: %d)", from.path, fv, to.path, tv)
	}
	var counts []CopyCount
	err = from.read(ctx, func(src *sql.Tx) error {
		return to.write(ctx, func(dst *sql.Tx) error {
			for _, table := range copiedTables {
				var n int
				if err := dst.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
					return fmt.Errorf("count %s in the target: %w", table, err)
				}
				if n > 0 {
					return fmt.Errorf("%w: %s has %d rows in %s", ErrTargetNotEmpty, table, n, to.path)
				}
			}
			for _, table := range copiedTables {
				n, err := copyTable(ctx, src, dst, table)
				if err != nil {
					return fmt.Errorf("copy %s: %w", table, err)
				}
				counts = append(counts, CopyCount{Table: table, Rows: n})
			}
			if to.dialect.kind == KindPostgres {
				_, err := dst.ExecContext(ctx, `SELECT setval('events_seq', (SELECT COALESCE(MAX(seq), 0) + 1 FROM events), false)`)
				if err != nil {
					return fmt.Errorf("move the events sequence past the copied events: %w", err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("copy state from %s to %s: %w", from.path, to.path, err)
	}
	return counts, nil
}

func copyTable(ctx context.Context, src, dst *sql.Tx, table string) (int, error) {
	rows, err := src.QueryContext(ctx, `SELECT * FROM `+table)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	ph := make([]string, len(cols))
	for i := range cols {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	ins, err := dst.PrepareContext(ctx, `INSERT INTO `+table+` (`+strings.Join(cols, ", ")+`) VALUES (`+strings.Join(ph, ", ")+`)`)
	if err != nil {
		return 0, err
	}
	defer ins.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		for i, v := range vals {
			switch b, ok := v.([]byte); {
			case cols[i] == "content" && (v == nil || (ok && b == nil)):
				vals[i] = []byte{} // SQLite reads an empty BLOB as NULL; the column is NOT NULL
			case ok && cols[i] != "content":
				vals[i] = string(b) // a driver may hand TEXT over as bytes
			}
		}
		if _, err := ins.ExecContext(ctx, vals...); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}
