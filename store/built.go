package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/verify"
)

// builtMigration keeps what each project's built stage is FROM
// (scan.Project.Built), written by every scan, so that verification reads
// it instead of parsing every stored Containerfile again after each scan.
// Rows stored before it have none (an empty string) until the next scan rewrites them:
// until then every FROM of theirs counts (verify.Project.Built nil).
func builtMigration() migration {
	return migration{
		version: 16,
		name:    "projects' built stage bases",
		stmts: []string{
			// A JSON array of images (encodeNames), '' for none.
			`ALTER TABLE projects ADD COLUMN built TEXT NOT NULL DEFAULT ''`,
		},
	}
}

// VerifyProjects returns every node of every stored project as deciding
// what it publishes needs it (verify.Published), sorted by key: its key,
// ref, registry prefix and built stage bases, and of its dependencies only
// those that can count there (a reference to a project in scope with a
// tag, or a FROM when the built stage's bases are not known), with the
// fields verify reads. Three queries in one snapshot; no file is read.
func (s *Store) VerifyProjects(ctx context.Context) ([]verify.Project, error) {
	var out []verify.Project
	err := s.read(ctx, func(tx *sql.Tx) error {
		type nodeKey struct {
			id   int64
			node string // empty: the default branch
		}
		index := map[nodeKey]int{}
		prefixes := map[int64]string{}
		rows, err := tx.QueryContext(ctx, `SELECT id, path, registry_prefix, built, default_branch FROM projects ORDER BY path`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var p verify.Project
			var built string
			if err := rows.Scan(&id, &p.Path, &p.RegistryPrefix, &built, &p.Ref); err != nil {
				return err
			}
			if p.Built, err = decodeNames(built); err != nil {
				return fmt.Errorf("project %s: built stage bases: %w", p.Path, err)
			}
			index[nodeKey{id, ""}] = len(out)
			prefixes[id] = p.RegistryPrefix
			out = append(out, p)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()

		rows, err = tx.QueryContext(ctx, `SELECT project_id, node, kind, ref, built FROM project_refs ORDER BY node`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var p verify.Project
			var kind, built string
			if err := rows.Scan(&id, &p.Path, &kind, &p.Ref, &built); err != nil {
				return err
			}
			if p.Kind, err = nodeKind(kind); err != nil {
				return fmt.Errorf("node %s: %w", p.Path, err)
			}
			if p.Built, err = decodeNames(built); err != nil {
				return fmt.Errorf("node %s: built stage bases: %w", p.Path, err)
			}
			p.RegistryPrefix = prefixes[id]
			index[nodeKey{id, p.Path}] = len(out)
			out = append(out, p)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()

		rows, err = tx.QueryContext(ctx, `SELECT d.project_id, d.node, d.kind, d.image, d.repository, d.tag, d.digest, d.upstream, d.upstream_node
			FROM dependencies d
				JOIN projects p ON p.id = d.project_id
				LEFT JOIN project_refs r ON r.project_id = d.project_id AND r.node = d.node
			WHERE (d.upstream <> '' AND d.repository <> '' AND (d.tag <> '' OR d.digest <> ''))
				OR (COALESCE(r.built, p.built) = '' AND d.kind = $1 AND d.image <> '')
			ORDER BY d.project_id, d.seq`, string(deps.KindFrom))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var node string
			var d deps.Dependency
			if err := rows.Scan(&id, &node, &d.Kind, &d.Image, &d.Repository, &d.Tag, &d.Digest, &d.Project, &d.Node); err != nil {
				return err
			}
			d.Pinned = d.Digest != ""
			if i, ok := index[nodeKey{id, node}]; ok {
				out[i].Dependencies = append(out[i].Dependencies, d)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read projects for verification: %w", err)
	}
	slices.SortFunc(out, func(a, b verify.Project) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}
