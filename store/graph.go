package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gitlab.com/depsd/depsd/deps"
)

// Graph builds the dependency graph of the stored projects: every node of
// every project (its default branch, each followed ref) is a node, and
// every dependency naming another stored node is an edge, pinned when a
// dependency declaring it pins a digest (deps.Graph.AddPinnedEdge). Dependencies
// naming a project outside the store (out of scope, removed) add nothing:
// depsd could never trigger or hear from such a project. Nor does a node
// naming itself (FROM its own image): it would be a cycle of one, and the
// scan reports it as a warning instead (as scan.GraphOf does).
//
// It reads only keys, not whole projects, so the daemon can reload the
// graph after every scan cheaply; scan.GraphOf does the same from
// projects already in memory.
func (s *Store) Graph(ctx context.Context) (*deps.Graph, error) {
	g := deps.NewGraph()
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT path FROM projects UNION SELECT node FROM project_refs ORDER BY 1`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return err
			}
			g.AddProject(p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT
				CASE WHEN d.upstream_node <> '' THEN d.upstream_node ELSE d.upstream END,
				CASE WHEN d.node <> '' THEN d.node ELSE p.path END,
				MAX(CASE WHEN d.digest <> '' THEN 1 ELSE 0 END)
			FROM dependencies d
			JOIN projects p ON p.id = d.project_id
			WHERE d.upstream <> ''
			GROUP BY 1, 2
			ORDER BY 1, 2`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var up, down string
			var pinned int
			if err := rows.Scan(&up, &down, &pinned); err != nil {
				return err
			}
			switch {
			case up == down || !g.Has(up) || !g.Has(down):
			case pinned != 0:
				g.AddPinnedEdge(up, down)
			default:
				g.AddEdge(up, down)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read graph: %w", err)
	}
	return g, nil
}

// ProjectPaths returns the stored projects' paths by id.
func (s *Store) ProjectPaths(ctx context.Context) (map[int64]string, error) {
	paths := map[int64]string{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, path FROM projects`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var path string
			if err := rows.Scan(&id, &path); err != nil {
				return err
			}
			paths[id] = path
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read project paths: %w", err)
	}
	return paths, nil
}

// RegistryHosts are the hosts of the stored projects' registry prefixes
// (host[:port], as GitLab reports them: the instance's registry), each
// once. The prefixes are streamed, not kept.
func (s *Store) RegistryHosts(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT registry_prefix FROM projects WHERE registry_prefix <> ''`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var prefix string
		for rows.Next() {
			if err := rows.Scan(&prefix); err != nil {
				return err
			}
			host, _, _ := strings.Cut(prefix, "/")
			if !seen[host] {
				seen[host] = true
				out = append(out, strings.Clone(host))
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read registry hosts: %w", err)
	}
	return out, nil
}

// ProjectIDs returns the GitLab ids of the stored projects (the scope the
// webhook receiver accepts), without reading the projects themselves.
func (s *Store) ProjectIDs(ctx context.Context) (map[int64]bool, error) {
	ids := map[int64]bool{}
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM projects`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read project ids: %w", err)
	}
	return ids, nil
}
