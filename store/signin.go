package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/chain"
	"gitlab.com/depsd/depsd/signin"
)

// signinMigration adds what sign-in with GitLab and the people's actions
// keep: the key signing session cookies (one row, shared by replicas),
// the sessions, and the audit log of actions.
func signinMigration() migration {
	return migration{
		version: 19,
		name:    "sign-in sessions, audit log",
		stmts: []string{
			`CREATE TABLE ui_session_key (
				id INTEGER PRIMARY KEY,
				key BLOB NOT NULL
			)`,
			// id is the SHA-256 of the cookie's session id; token is
			// sealed (signin.Session.Token).
			`CREATE TABLE ui_sessions (
				id TEXT PRIMARY KEY,
				user_id BIGINT NOT NULL,
				username TEXT NOT NULL,
				token BLOB NOT NULL,
				created_at TEXT NOT NULL,
				expires_at TEXT NOT NULL
			)`,
			`CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at)`,
			// One row per action a person took or was refused
			// (chain.AuditEntry).
			`CREATE TABLE audit_log (
				id BIGINT PRIMARY KEY,
				at TEXT NOT NULL,
				actor TEXT NOT NULL,
				actor_id BIGINT NOT NULL,
				address TEXT NOT NULL,
				action TEXT NOT NULL,
				chain_id BIGINT NOT NULL,
				target TEXT NOT NULL,
				reason TEXT NOT NULL,
				outcome TEXT NOT NULL
			)`,
			`CREATE INDEX audit_log_chain ON audit_log (chain_id, id)`,
		},
	}
}

// SessionKey implements signin.Store.
func (s *Store) SessionKey(ctx context.Context, generate func() ([]byte, error)) ([]byte, error) {
	var key []byte
	err := s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT key FROM ui_session_key WHERE id = 1`).Scan(&key)
	})
	if err == nil {
		return key, nil
	}
	if !errIsNotFound(err) {
		return nil, fmt.Errorf("read the session key: %w", err)
	}
	fresh, err := generate()
	if err != nil {
		return nil, fmt.Errorf("generate a session key: %w", err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ui_session_key (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, fresh); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT key FROM ui_session_key WHERE id = 1`).Scan(&key)
	})
	if err != nil {
		return nil, fmt.Errorf("store the session key: %w", err)
	}
	return key, nil
}

// SaveSession implements signin.Store.
func (s *Store) SaveSession(ctx context.Context, se signin.Session) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO ui_sessions (id, user_id, username, token, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, username = excluded.username,
				token = excluded.token, created_at = excluded.created_at, expires_at = excluded.expires_at`,
			se.ID, se.UserID, se.Username, se.Token, encodeTime(se.CreatedAt), encodeTime(se.ExpiresAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("save session of %s: %w", se.Username, err)
	}
	return nil
}

// Session implements signin.Store.
func (s *Store) Session(ctx context.Context, id string) (signin.Session, bool, error) {
	var se signin.Session
	var created, expires sql.NullString
	err := s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT id, user_id, username, token, created_at, expires_at FROM ui_sessions WHERE id = $1`, id).
			Scan(&se.ID, &se.UserID, &se.Username, &se.Token, &created, &expires)
	})
	if errIsNotFound(err) {
		return signin.Session{}, false, nil
	}
	if err == nil {
		se.CreatedAt, err = decodeTime(created)
	}
	if err == nil {
		se.ExpiresAt, err = decodeTime(expires)
	}
	if err != nil {
		return signin.Session{}, false, fmt.Errorf("read session: %w", err)
	}
	return se, true, nil
}

// DeleteSession implements signin.Store.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM ui_sessions WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// PruneSessions implements signin.Store.
func (s *Store) PruneSessions(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ui_sessions WHERE expires_at < $1`, encodeTime(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune sessions: %w", err)
	}
	return int(n), nil
}

// AddAudit implements chain.Tx.
func (t chainTx) AddAudit(ctx context.Context, e chain.AuditEntry) error {
	err := t.tx.execLater(ctx, `INSERT INTO audit_log (id, at, actor, actor_id, address, action, chain_id, target, reason, outcome)
		VALUES ((SELECT COALESCE(MAX(id), 0) + 1 FROM audit_log), $1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		encodeTime(e.At), e.Actor, e.ActorID, e.Address, string(e.Action), e.ChainID, e.Target, e.Reason, e.Outcome)
	if err != nil {
		return fmt.Errorf("write audit entry: %w", err)
	}
	return nil
}

// Audit implements chain.Tx.
func (t chainTx) Audit(ctx context.Context, f chain.AuditFilter) ([]chain.AuditEntry, error) {
	q := `SELECT id, at, actor, actor_id, address, action, chain_id, target, reason, outcome FROM audit_log`
	args := []any{}
	if f.ChainID != 0 {
		q += ` WHERE chain_id = $1`
		args = append(args, f.ChainID)
	}
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args)+1)
	args = append(args, f.Limit)
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	defer rows.Close()
	var out []chain.AuditEntry
	for rows.Next() {
		var e chain.AuditEntry
		var at sql.NullString
		var action string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.ActorID, &e.Address, &action, &e.ChainID, &e.Target, &e.Reason, &e.Outcome); err != nil {
			return nil, fmt.Errorf("read the audit log: %w", err)
		}
		e.Action = chain.AuditAction(action)
		if e.At, err = decodeTime(at); err != nil {
			return nil, fmt.Errorf("read the audit log: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the audit log: %w", err)
	}
	return out, nil
}
