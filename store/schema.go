package store

// migrations returns the schema, one step per version, oldest first. To
// change the schema, append a step (the chain engine adds its tables as
// version 2); never edit one that has shipped.
//
// The DDL is standard SQL that PostgreSQL also accepts, except BLOB
// (BYTEA there): BIGINT ids (GitLab's own), TEXT elsewhere, times as
// fixed-width UTC text (see timeLayout), no AUTOINCREMENT or other
// SQLite-only syntax.
func migrations() []migration {
	return []migration{
		{
			version: 1,
			name:    "projects, files, dependencies, warnings, scans",
			stmts: []string{
				// id is GitLab's project id, so a renamed or transferred
				// project keeps its row; path is where it is now.
				`CREATE TABLE projects (
					id BIGINT PRIMARY KEY,
					path TEXT NOT NULL UNIQUE,
					default_branch TEXT NOT NULL,
					registry_prefix TEXT NOT NULL,
					web_url TEXT NOT NULL,
					head_commit TEXT NOT NULL,
					last_activity TEXT,
					head_checked_at TEXT,
					searched_files TEXT NOT NULL,
					file TEXT NOT NULL,
					scanned_at TEXT
				)`,
				// The dependency files as read, for re-analysis.
				`CREATE TABLE files (
					project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
					seq INTEGER NOT NULL,
					name TEXT NOT NULL,
					content BLOB NOT NULL,
					PRIMARY KEY (project_id, seq)
				)`,
				// One row per deps.Dependency, in file order (seq).
				// upstream is Dependency.Project: a project path, or ''
				// for an external image.
				`CREATE TABLE dependencies (
					project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
					seq INTEGER NOT NULL,
					kind TEXT NOT NULL,
					line INTEGER NOT NULL,
					ref TEXT NOT NULL,
					image TEXT NOT NULL,
					repository TEXT NOT NULL,
					tag TEXT NOT NULL,
					digest TEXT NOT NULL,
					upstream TEXT NOT NULL,
					PRIMARY KEY (project_id, seq)
				)`,
				`CREATE INDEX dependencies_upstream ON dependencies (upstream)`,
				`CREATE INDEX dependencies_repository ON dependencies (repository)`,
				`CREATE TABLE warnings (
					project_id BIGINT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
					seq INTEGER NOT NULL,
					file TEXT NOT NULL,
					line INTEGER NOT NULL,
					message TEXT NOT NULL,
					PRIMARY KEY (project_id, seq)
				)`,
				`CREATE TABLE scans (
					started_at TEXT PRIMARY KEY,
					finished_at TEXT,
					project_count INTEGER NOT NULL,
					edge_count INTEGER NOT NULL,
					external_count INTEGER NOT NULL,
					warning_count INTEGER NOT NULL,
					cycle_count INTEGER NOT NULL,
					request_count BIGINT NOT NULL
				)`,
			},
		},
	}
}
