package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gitlab.com/depsd/depsd/verify"
)

// verificationMigration adds what image verification keeps: each upstream
// image's digests (its history, to tell a stale image from an unknown
// one) and the latest verification of each project's image and platform.
func verificationMigration() migration {
	return migration{
		version: 14,
		name:    "image verification",
		stmts: []string{
			`CREATE TABLE upstream_digests (
				image TEXT NOT NULL,
				digest TEXT NOT NULL,
				first_seen TEXT NOT NULL,
				last_seen TEXT NOT NULL,
				PRIMARY KEY (image, digest)
			)`,
			// result is the verify.Result as JSON; state and the keys are
			// columns for the views that filter on them.
			`CREATE TABLE verifications (
				project TEXT NOT NULL,
				image TEXT NOT NULL,
				platform TEXT NOT NULL,
				state TEXT NOT NULL,
				result TEXT NOT NULL,
				verified_at TEXT NOT NULL,
				PRIMARY KEY (project, image, platform)
			)`,
		},
	}
}

// RecordUpstreamDigest implements verify.Store.
func (s *Store) RecordUpstreamDigest(ctx context.Context, image, digest string, at time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO upstream_digests (image, digest, first_seen, last_seen)
			VALUES ($1, $2, $3, $3)
			ON CONFLICT (image, digest) DO UPDATE SET last_seen = $3`, image, digest, encodeTime(at))
		return err
	})
	if err != nil {
		return fmt.Errorf("record digest %s of %s: %w", digest, image, err)
	}
	return nil
}

// UpstreamHistory implements verify.Store.
func (s *Store) UpstreamHistory(ctx context.Context, image string) ([]verify.Seen, error) {
	var out []verify.Seen
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT digest, first_seen FROM upstream_digests
			WHERE image = $1 ORDER BY first_seen DESC, digest`, image)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var seen verify.Seen
			var first sql.NullString
			if err := rows.Scan(&seen.Digest, &first); err != nil {
				return err
			}
			if seen.FirstSeen, err = decodeTime(first); err != nil {
				return err
			}
			out = append(out, seen)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read digests of %s: %w", image, err)
	}
	return out, nil
}

// UpstreamHistories returns the digest history of every recorded upstream
// image, newest first, in one read: what freshness needs for every image
// at once (UpstreamHistory per upstream would be a read each).
func (s *Store) UpstreamHistories(ctx context.Context) (map[string][]verify.Seen, error) {
	out := map[string][]verify.Seen{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT image, digest, first_seen FROM upstream_digests
			ORDER BY image, first_seen DESC, digest`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var image string
			var seen verify.Seen
			var first sql.NullString
			if err := rows.Scan(&image, &seen.Digest, &first); err != nil {
				return err
			}
			if seen.FirstSeen, err = decodeTime(first); err != nil {
				return err
			}
			out[image] = append(out[image], seen)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read upstream digests: %w", err)
	}
	return out, nil
}

// SaveVerification implements verify.Store.
func (s *Store) SaveVerification(ctx context.Context, r verify.Record) error {
	b, err := json.Marshal(r.Result)
	if err != nil {
		return fmt.Errorf("save verification of %s: %w", r.Result.Image, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO verifications (project, image, platform, state, result, verified_at)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (project, image, platform) DO UPDATE SET state = $4, result = $5, verified_at = $6`,
			r.Project, r.Result.Image, r.Result.Platform.String(), string(r.Result.State), string(b), encodeTime(r.VerifiedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("save verification of %s (%s): %w", r.Result.Image, r.Project, err)
	}
	return nil
}

// Verifications implements verify.Store.
func (s *Store) Verifications(ctx context.Context, projects ...string) ([]verify.Record, error) {
	var out []verify.Record
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT project, result, verified_at FROM verifications`)
		if err != nil {
			return err
		}
		defer rows.Close()
		want := map[string]bool{}
		for _, p := range projects {
			want[p] = true
		}
		for rows.Next() {
			var r verify.Record
			var result string
			var at sql.NullString
			if err := rows.Scan(&r.Project, &result, &at); err != nil {
				return err
			}
			if len(want) > 0 && !want[r.Project] {
				continue
			}
			if err := json.Unmarshal([]byte(result), &r.Result); err != nil {
				return fmt.Errorf("verification of %s: %w", r.Project, err)
			}
			if r.VerifiedAt, err = decodeTime(at); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read verifications: %w", err)
	}
	return out, nil
}

// Image verification keeps its state here.
var _ verify.Store = (*Store)(nil)
