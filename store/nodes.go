package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"gitlab.com/depsd/depsd/deps"
	"gitlab.com/depsd/depsd/scan"
)

// nodesMigration stores the nodes of a project besides its default branch
// (scan.Ref, docs/design/nodes.md): one project_refs row each, and their
// files, dependencies and warnings in the tables of the default branch's,
// told apart by a node column (empty for the default branch, whose rows
// a state from before nodes holds). A dependency keeps the node it names
// (upstream_node, empty for the upstream's default branch) and how that was
// decided (via).
func nodesMigration() migration {
	return migration{
		version: 18,
		name:    "nodes: projects at refs",
		stmts: []string{
			`CREATE TABLE project_refs (
				project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
				node TEXT NOT NULL,
				kind TEXT NOT NULL,
				ref TEXT NOT NULL,
				head_commit TEXT NOT NULL,
				file TEXT NOT NULL,
				built TEXT NOT NULL,
				PRIMARY KEY (project_id, node)
			)`,
			// The rule the refs were read by (scan.Project.RefsRule).
			`ALTER TABLE projects ADD COLUMN refs_rule TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE files ADD COLUMN node TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE warnings ADD COLUMN node TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE dependencies ADD COLUMN node TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE dependencies ADD COLUMN upstream_node TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE dependencies ADD COLUMN via TEXT NOT NULL DEFAULT ''`,
			`ALTER TABLE dependencies ADD COLUMN seen_in BIGINT NOT NULL DEFAULT 0`,
			// The tags downstreams name that a node's pipeline was seen
			// pushing (RecordSeen).
			`CREATE TABLE seen_publications (
				image TEXT PRIMARY KEY,
				node TEXT NOT NULL,
				pipeline_id BIGINT NOT NULL,
				seen_at TEXT NOT NULL
			)`,
		},
	}
}

// nodeKinds are how project_refs.kind names a scan.Ref's kind.
var nodeKinds = map[deps.NodeKind]string{deps.NodeBranch: "branch", deps.NodeTags: "tags"}

func nodeKind(s string) (deps.NodeKind, error) {
	for k, v := range nodeKinds {
		if v == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown node kind %q", s)
}

// loadRefs fills the Refs of the projects in index from project_refs,
// reading the rows selected by where (with args).
func loadRefs(ctx context.Context, tx *sql.Tx, index map[int64]*scan.Project, where string, args ...any) error {
	rows, err := tx.QueryContext(ctx, `SELECT project_id, node, kind, ref, head_commit, file, built
		FROM project_refs`+where+` ORDER BY project_id, node`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r scan.Ref
		var kind, built string
		if err := rows.Scan(&id, &r.Node, &kind, &r.Ref, &r.HeadCommit, &r.File, &built); err != nil {
			return err
		}
		if r.Kind, err = nodeKind(kind); err != nil {
			return fmt.Errorf("node %s: %w", r.Node, err)
		}
		if r.Built, err = decodeNames(built); err != nil {
			return fmt.Errorf("node %s: built stage bases: %w", r.Node, err)
		}
		if p := index[id]; p != nil {
			p.Refs = append(p.Refs, r)
		}
	}
	return rows.Err()
}

// nodeOf returns where the rows of node go in p: p's own fields for its
// default branch (""), else the Ref with that key; ok is false for a node
// p does not have (any more).
type nodeFields struct {
	files    *[]scan.File
	deps     *[]deps.Dependency
	warnings *[]deps.Warning
}

func nodeOf(p *scan.Project, node string) (nodeFields, bool) {
	if node == "" {
		return nodeFields{&p.Files, &p.Dependencies, &p.Warnings}, true
	}
	for i := range p.Refs {
		if r := &p.Refs[i]; r.Node == node {
			return nodeFields{&r.Files, &r.Dependencies, &r.Warnings}, true
		}
	}
	return nodeFields{}, false
}

// A project's rows of the files, dependencies and warnings tables, every
// node's in order: its default branch's, then each Ref's.
type (
	fileRow struct {
		node string
		f    scan.File
	}
	dependencyRow struct {
		node string
		d    deps.Dependency
	}
	warningRow struct {
		node string
		w    deps.Warning
	}
)

func fileRows(p *scan.Project) []fileRow {
	var out []fileRow
	for _, f := range p.Files {
		out = append(out, fileRow{"", f})
	}
	for _, r := range p.Refs {
		for _, f := range r.Files {
			out = append(out, fileRow{r.Node, f})
		}
	}
	return out
}

func dependencyRows(p *scan.Project) []dependencyRow {
	var out []dependencyRow
	for _, d := range p.Dependencies {
		out = append(out, dependencyRow{"", d})
	}
	for _, r := range p.Refs {
		for _, d := range r.Dependencies {
			out = append(out, dependencyRow{r.Node, d})
		}
	}
	return out
}

func warningRows(p *scan.Project) []warningRow {
	var out []warningRow
	for _, w := range p.Warnings {
		out = append(out, warningRow{"", w})
	}
	for _, r := range p.Refs {
		for _, w := range r.Warnings {
			out = append(out, warningRow{r.Node, w})
		}
	}
	return out
}

// sameRefRows reports whether a's project_refs rows would be stored
// unchanged as b's.
func sameRefRows(a, b []scan.Ref) bool {
	return slices.EqualFunc(a, b, func(x, y scan.Ref) bool {
		return x.Node == y.Node && x.Kind == y.Kind && x.Ref == y.Ref && x.HeadCommit == y.HeadCommit &&
			x.File == y.File && slices.Equal(x.Built, y.Built)
	})
}

// replaceRefs writes p's project_refs rows.
func replaceRefs(ctx context.Context, tx *sql.Tx, p scan.Project, existed bool) error {
	if existed {
		if _, err := tx.ExecContext(ctx, `DELETE FROM project_refs WHERE project_id = $1`, p.ID); err != nil {
			return err
		}
	}
	for _, r := range p.Refs {
		built, err := encodeNames(r.Built)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO project_refs (project_id, node, kind, ref, head_commit, file, built)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, p.ID, r.Node, nodeKinds[r.Kind], r.Ref, r.HeadCommit, r.File, built); err != nil {
			return err
		}
	}
	return nil
}

// projectRefs are the refs of a project's nodes besides its default
// branch, by node key (chain.Project.Refs); nil when it has none.
func projectRefs(ctx context.Context, tx interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, projectID int64) (refs, files map[string]string, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT node, ref, file FROM project_refs WHERE project_id = $1`, projectID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var node, ref, file string
		if err := rows.Scan(&node, &ref, &file); err != nil {
			return nil, nil, err
		}
		if refs == nil {
			refs = map[string]string{}
		}
		refs[node] = ref
		if file != "" {
			if files == nil {
				files = map[string]string{}
			}
			files[node] = file
		}
	}
	return refs, files, rows.Err()
}
