package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// hookSecretsMigration records what hooks sync last installed on every
// hook (webhook.SecretsInstalled): until it says the current secrets
// are, hooks installed before may carry the shared secret, which the
// webhook handler then still accepts.
func hookSecretsMigration() migration {
	return migration{
		version: 17,
		name:    "hook secrets installed",
		stmts: []string{
			// One row (id 1).
			`CREATE TABLE hook_secrets (
				id INTEGER PRIMARY KEY,
				installed TEXT NOT NULL,
				installed_at TEXT NOT NULL
			)`,
		},
	}
}

// HookSecretsInstalled returns what hooks sync last recorded as
// installed on every hook (SaveHookSecretsInstalled); "" when nothing
// was.
func (s *Store) HookSecretsInstalled(ctx context.Context) (string, error) {
	var installed string
	err := s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT installed FROM hook_secrets WHERE id = 1`).Scan(&installed)
	})
	if errIsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the installed hook secrets: %w", err)
	}
	return installed, nil
}

// SaveHookSecretsInstalled records that a hooks sync gave every hook in
// scope the secrets named installed, at at.
func (s *Store) SaveHookSecretsInstalled(ctx context.Context, installed string, at time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO hook_secrets (id, installed, installed_at) VALUES (1, $1, $2)
			ON CONFLICT (id) DO UPDATE SET installed = excluded.installed, installed_at = excluded.installed_at`, installed, at.UTC().Format(timeLayout))
		return err
	})
	if err != nil {
		return fmt.Errorf("record the installed hook secrets: %w", err)
	}
	return nil
}
