package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"gitlab.com/depsd/depsd/chain"
)

// pinsMigration adds what moving digest pins keeps (chain/pins.go): per
// member, the upstreams it pins, the digests its verified build published,
// the merge request moving its pins and the merge's commit; per outbox
// action, its kind and what a pins action moves and did (JSON); and what
// depsd wrote to GitLab for each chain.
func pinsMigration() migration {
	return migration{
		version: 21,
		name:    "digest pins: members waiting for a merge request, pins actions, writes",
		stmts: []string{
			`ALTER TABLE chain_members ADD COLUMN pinned TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE chain_members ADD COLUMN images TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE chain_members ADD COLUMN merge_request TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE chain_members ADD COLUMN merge_request_iid BIGINT NOT NULL DEFAULT 0`,
			`ALTER TABLE chain_members ADD COLUMN merge_sha TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE outbox ADD COLUMN kind TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE outbox ADD COLUMN payload TEXT NOT NULL DEFAULT ''`,
			`CREATE TABLE chain_writes (
				chain_id BIGINT NOT NULL,
				seq INTEGER NOT NULL,
				at TEXT NOT NULL,
				project TEXT NOT NULL,
				kind TEXT NOT NULL,
				ref TEXT NOT NULL,
				detail TEXT NOT NULL,
				url TEXT NOT NULL,
				PRIMARY KEY (chain_id, seq)
			)`,
		},
	}
}

// AddWrite implements chain.Tx: the write goes last among its chain's.
func (t chainTx) AddWrite(ctx context.Context, w chain.Write) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO chain_writes (chain_id, seq, at, project, kind, ref, detail, url)
		SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4, $5, $6, $7 FROM chain_writes WHERE chain_id = $1`,
		w.ChainID, encodeTime(w.At), w.Project, w.Kind, w.Ref, w.Detail, w.URL)
	if err != nil {
		return fmt.Errorf("record a write of chain %d: %w", w.ChainID, err)
	}
	return nil
}

// Writes implements chain.Tx.
func (t chainTx) Writes(ctx context.Context, chainID int64) ([]chain.Write, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT at, project, kind, ref, detail, url FROM chain_writes
		WHERE chain_id = $1 ORDER BY seq`, chainID)
	if err != nil {
		return nil, fmt.Errorf("read writes of chain %d: %w", chainID, err)
	}
	defer rows.Close()
	var out []chain.Write
	for rows.Next() {
		w := chain.Write{ChainID: chainID}
		var at sql.NullString
		if err := rows.Scan(&at, &w.Project, &w.Kind, &w.Ref, &w.Detail, &w.URL); err != nil {
			return nil, fmt.Errorf("read writes of chain %d: %w", chainID, err)
		}
		if w.At, err = decodeTime(at); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// encodeImages stores a member's image digests as JSON (” for none).
func encodeImages(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode images: %w", err)
	}
	return string(b), nil
}

func decodeImages(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode images %q: %w", s, err)
	}
	return m, nil
}

// encodePayload stores what a pins action moves, or what a validation
// builds on, as JSON (” for other actions).
func encodePayload(a chain.Action) string {
	var v any
	switch {
	case a.Pins != nil:
		v = a.Pins
	case a.Validate != nil:
		v = a.Validate
	default:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "" // plain strings and maps: it does not fail
	}
	return string(b)
}

// decodePayload reads an action's payload by its kind.
func decodePayload(a *chain.Action, s string) error {
	if s == "" {
		return nil
	}
	if a.Kind == chain.ActionValidate {
		a.Validate = new(chain.ValidateRequest)
		if err := json.Unmarshal([]byte(s), a.Validate); err != nil {
			return fmt.Errorf("decode validation %q: %w", s, err)
		}
		return nil
	}
	a.Pins = new(chain.PinsRequest)
	if err := json.Unmarshal([]byte(s), a.Pins); err != nil {
		return fmt.Errorf("decode pins %q: %w", s, err)
	}
	return nil
}
