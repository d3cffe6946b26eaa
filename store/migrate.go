package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// migration is one numbered step of the schema. Steps are only ever
// appended: a released step is never edited, because stores in the field
// have already applied it.
type migration struct {
	version int
	name    string
	stmts   []string
	// postgres are run after stmts on PostgreSQL only (objects SQLite
	// has no use for, such as sequences).
	postgres []string
}

// migrate applies, in order, the migrations the file has not seen, each in
// its own transaction together with its schema_migrations row, so a crash or
// a concurrent Open leaves the schema at some whole version. Two processes
// opening a fresh file at once serialise on the write lock; the second finds
// the work done.
func (s *Store) migrate(ctx context.Context) error {
	all := migrations()
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.dialect.ddl(`CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY,
			name TEXT NOT NULL,
			applied_at TEXT NOT NULL
		)`))
		return err
	})
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", describeOpenError(err))
	}
	for i, m := range all {
		if m.version != i+1 {
			return fmt.Errorf("migration %q has version %d, want %d", m.name, m.version, i+1)
		}
		err := s.write(ctx, func(tx *sql.Tx) error {
			var n int
			err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.version).Scan(&n)
			if err != nil || n > 0 {
				return err
			}
			stmts := m.stmts
			if s.dialect.kind == KindPostgres {
				stmts = append(slices.Clone(stmts), m.postgres...)
			}
			for _, stmt := range stmts {
				if _, err := tx.ExecContext(ctx, s.dialect.ddl(stmt)); err != nil {
					return err
				}
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.version, m.name, encodeTime(time.Now()))
			return err
		})
		if err != nil {
			return fmt.Errorf("apply migration %d (%s): %w", m.version, m.name, err)
		}
	}
	var newest int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if newest > len(all) {
		return fmt.Errorf("schema version %d is newer than this depsd knows (%d): upgrade depsd", newest, len(all))
	}
	return nil
}

// SchemaVersion returns the newest migration applied to the file.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
