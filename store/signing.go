package store

import (
	"context"
	"database/sql"
	"fmt"
)

// signingTokenMigration adds the webhook signing token depsd generated
// (version 12), so that every replica and every restart installs and
// verifies the same one.
func signingTokenMigration() migration {
	return migration{
		version: 13,
		name:    "webhook signing token",
		stmts: []string{
			// One row (id 1): the token as GitLab takes it (whsec_...).
			`CREATE TABLE webhook_signing (
				id INTEGER PRIMARY KEY,
				token TEXT NOT NULL
			)`,
		},
	}
}

// SigningToken returns the webhook signing token kept in the state. When
// there is none yet, it stores the one generate makes; of replicas racing
// to do so, the first wins and all return its token. The token is a
// secret: the state must be protected like the configuration's secrets.
func (s *Store) SigningToken(ctx context.Context, generate func() (string, error)) (string, error) {
	var token string
	err := s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT token FROM webhook_signing WHERE id = 1`).Scan(&token)
	})
	if err == nil {
		return token, nil
	}
	if !errIsNotFound(err) {
		return "", fmt.Errorf("read the webhook signing token: %w", err)
	}
	fresh, err := generate()
	if err != nil {
		return "", fmt.Errorf("generate a webhook signing token: %w", err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_signing (id, token) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, fresh); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT token FROM webhook_signing WHERE id = 1`).Scan(&token)
	})
	if err != nil {
		return "", fmt.Errorf("store the webhook signing token: %w", err)
	}
	return token, nil
}
