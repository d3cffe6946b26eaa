package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/scheduler"
)

// pendingRebuildMigration keeps an image change's rebuilds in the store
// until they have all started, so that a process dying in between loses
// none (see RecordDigest), and indexes the reasons by root so that a
// rebuild asked for twice is found (chain.Tx.ChainWithReason).
func pendingRebuildMigration() migration {
	return migration{
		version: 7,
		name:    "pending image rebuilds",
		stmts: []string{
			`ALTER TABLE image_digests ADD COLUMN pending_detail TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE image_digests ADD COLUMN pending_at TEXT`,
			`ALTER TABLE image_digests ADD COLUMN pending_attempts INTEGER NOT NULL DEFAULT 0`,
			`CREATE INDEX chain_reasons_root ON chain_reasons (project, kind)`,
		},
	}
}

// ImageStates implements scheduler.Store: every image ever checked, by
// name.
func (s *Store) ImageStates(ctx context.Context) ([]scheduler.ImageState, error) {
	var out []scheduler.ImageState
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT image, digest, checked_at, next_check, changed_at, failures,
				error, error_at, rebuild_at, rebuild_outcome, pending_detail, pending_at, pending_attempts
			FROM image_digests ORDER BY image`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st scheduler.ImageState
			var checked, next, changed, errAt, rebuilt, pendingAt sql.NullString
			if err := rows.Scan(&st.Image, &st.Digest, &checked, &next, &changed, &st.Failures,
				&st.Err, &errAt, &rebuilt, &st.RebuildOutcome, &st.Pending.Detail, &pendingAt, &st.Pending.Attempts); err != nil {
				return err
			}
			for _, f := range []struct {
				dst *time.Time
				src sql.NullString
			}{{&st.CheckedAt, checked}, {&st.NextCheck, next}, {&st.ChangedAt, changed},
				{&st.ErrAt, errAt}, {&st.RebuildAt, rebuilt}, {&st.Pending.At, pendingAt}} {
				if *f.dst, err = decodeTime(f.src); err != nil {
					return fmt.Errorf("image %s: %w", st.Image, err)
				}
			}
			out = append(out, st)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read image digests: %w", err)
	}
	return out, nil
}

// ClaimImageCheck implements scheduler.Store: a compare-and-set of
// next_check, or the insert of the image's row when due is zero.
func (s *Store) ClaimImageCheck(ctx context.Context, image string, due, next time.Time) (bool, error) {
	var ok bool
	var err error
	if due.IsZero() {
		ok, err = s.moveSchedule(ctx, `INSERT INTO image_digests (image, digest, next_check, failures, error, rebuild_outcome)
			VALUES ($1, '', $2, 0, '', '') ON CONFLICT (image) DO NOTHING`, image, encodeTime(next))
	} else {
		ok, err = s.moveSchedule(ctx, `UPDATE image_digests SET next_check = $3 WHERE image = $1 AND next_check = $2`,
			image, encodeTime(due), encodeTime(next))
	}
	if err != nil {
		return false, fmt.Errorf("claim check of image %s: %w", image, err)
	}
	return ok, nil
}

// RecordDigest implements scheduler.Store. Reading the old digest and
// writing the new one in one write transaction is what makes exactly one
// caller see a given change; the change's rebuilds are recorded as pending
// in the same transaction, so they outlive the caller.
func (s *Store) RecordDigest(ctx context.Context, image, digest string, at time.Time) (string, error) {
	var prev string
	err := s.write(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT digest FROM image_digests WHERE image = $1`, image).Scan(&prev)
		if errIsNotFound(err) {
			_, err = tx.ExecContext(ctx, `INSERT INTO image_digests (image, digest, checked_at, next_check, changed_at,
					failures, error, rebuild_outcome)
				VALUES ($1, $2, $3, $3, $3, 0, '', '')`, image, digest, encodeTime(at))
			return err
		}
		if err != nil {
			return err
		}
		if prev != "" && prev != digest {
			_, err = tx.ExecContext(ctx, `UPDATE image_digests SET digest = $2, checked_at = $3, failures = 0, error = '',
					changed_at = $3, pending_detail = $4, pending_at = $3, pending_attempts = 0
				WHERE image = $1`, image, digest, encodeTime(at), scheduler.DigestChange(image, prev, digest))
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE image_digests SET digest = $2, checked_at = $3, failures = 0, error = '',
				changed_at = CASE WHEN digest = $2 THEN changed_at ELSE $3 END
			WHERE image = $1`, image, digest, encodeTime(at))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("record digest of image %s: %w", image, err)
	}
	return prev, nil
}

// RecordImageError implements scheduler.Store.
func (s *Store) RecordImageError(ctx context.Context, image, msg string, failures int, at, next time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO image_digests (image, digest, next_check, failures, error, error_at, rebuild_outcome)
			VALUES ($1, '', $5, $3, $2, $4, '')
			ON CONFLICT (image) DO UPDATE SET error = $2, failures = $3, error_at = $4, next_check = $5`,
			image, msg, failures, encodeTime(at), encodeTime(next))
		return err
	})
	if err != nil {
		return fmt.Errorf("record check failure of image %s: %w", image, err)
	}
	return nil
}

// RecordImageRebuild implements scheduler.Store: the outcome, and the
// change's pending rebuilds cleared or their attempts counted, unless a
// newer change replaced them meanwhile.
func (s *Store) RecordImageRebuild(ctx context.Context, image string, change scheduler.PendingRebuild, outcome string, done bool) error {
	pending := change.Detail
	if done {
		pending = ""
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE image_digests SET rebuild_at = $2, rebuild_outcome = $3 WHERE image = $1`,
			image, encodeTime(change.At), outcome)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE image_digests SET pending_detail = $4, pending_attempts = $5
			WHERE image = $1 AND pending_detail = $2 AND pending_at = $3`,
			image, change.Detail, encodeTime(change.At), pending, change.Attempts+1)
		return err
	})
	if err != nil {
		return fmt.Errorf("record rebuilds of image %s: %w", image, err)
	}
	return nil
}

// The scheduler's state lives here; this keeps the two in step.
var _ scheduler.Store = (*Store)(nil)
