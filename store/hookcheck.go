package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/gitlab"
)

// hookCheckMigration adds the last webhook check (version 8), so that the
// health page of every replica shows what the leader found, not only the
// leader's own.
func hookCheckMigration() migration {
	return migration{
		version: 8,
		name:    "last webhook check",
		stmts: []string{
			// One row (id 1); dry_run is 0 or 1. hooks is the report's
			// entries as JSON (see hookCheckEntry): read and written
			// whole, never queried.
			`CREATE TABLE hook_checks (
				id INTEGER PRIMARY KEY,
				url TEXT NOT NULL,
				checked_at TEXT NOT NULL,
				dry_run INTEGER NOT NULL,
				error TEXT NOT NULL,
				hooks TEXT NOT NULL
			)`,
		},
	}
}

// HookCheck is the last look at the projects' webhooks (the leader's, at
// the start of its term and at each maintenance run).
type HookCheck struct {
	URL       string // the hook URL depsd maintains
	CheckedAt time.Time
	Report    gitlab.HookReport
	Err       string // why the check failed for some projects, if it did
}

// hookCheckEntry is how one gitlab.HookChange is stored: named fields, so
// that a renamed Go field does not silently empty stored checks.
type hookCheckEntry struct {
	Project   string   `json:"project"`
	ProjectID int64    `json:"project_id"`
	HookID    int64    `json:"hook_id"`
	Action    string   `json:"action"`
	Reasons   []string `json:"reasons,omitempty"`
	Unsigned  bool     `json:"unsigned,omitempty"`
	Group     bool     `json:"group,omitempty"`
}

// SaveHookCheck replaces the stored webhook check with c.
func (s *Store) SaveHookCheck(ctx context.Context, c HookCheck) error {
	entries := make([]hookCheckEntry, 0, len(c.Report.Changes))
	for _, h := range c.Report.Changes {
		entries = append(entries, hookCheckEntry{Project: h.Project, ProjectID: h.ProjectID, HookID: h.HookID,
			Action: string(h.Action), Reasons: h.Reasons, Unsigned: h.Unsigned, Group: h.Group})
	}
	hooks, err := json.Marshal(entries)
	if err != nil {
		return fmt.Errorf("save webhook check: %w", err)
	}
	dryRun := 0
	if c.Report.DryRun {
		dryRun = 1
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO hook_checks (id, url, checked_at, dry_run, error, hooks)
			VALUES (1, $1, $2, $3, $4, $5)
			ON CONFLICT (id) DO UPDATE SET url = excluded.url, checked_at = excluded.checked_at,
				dry_run = excluded.dry_run, error = excluded.error, hooks = excluded.hooks`,
			c.URL, encodeTime(c.CheckedAt), dryRun, c.Err, string(hooks))
		return err
	})
	if err != nil {
		return fmt.Errorf("save webhook check: %w", err)
	}
	return nil
}

// HookCheck returns the stored webhook check; ok is false before the
// first.
func (s *Store) HookCheck(ctx context.Context) (c HookCheck, ok bool, err error) {
	var checked sql.NullString
	var hooks string
	var dryRun int
	err = s.read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT url, checked_at, dry_run, error, hooks FROM hook_checks WHERE id = 1`).
			Scan(&c.URL, &checked, &dryRun, &c.Err, &hooks)
	})
	if errIsNotFound(err) {
		return HookCheck{}, false, nil
	}
	if err != nil {
		return HookCheck{}, false, fmt.Errorf("read webhook check: %w", err)
	}
	if c.CheckedAt, err = decodeTime(checked); err != nil {
		return HookCheck{}, false, fmt.Errorf("read webhook check: %w", err)
	}
	c.Report.DryRun = dryRun == 1
	var entries []hookCheckEntry
	if err := json.Unmarshal([]byte(hooks), &entries); err != nil {
		return HookCheck{}, false, fmt.Errorf("read webhook check: hooks: %w", err)
	}
	for _, e := range entries {
		c.Report.Changes = append(c.Report.Changes, gitlab.HookChange{Project: e.Project, ProjectID: e.ProjectID,
			HookID: e.HookID, Action: gitlab.HookAction(e.Action), Reasons: e.Reasons, Unsigned: e.Unsigned, Group: e.Group})
	}
	return c, true, nil
}
