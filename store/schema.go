package store

// migrations returns the schema, one step per version, oldest first. To
// change the schema, append a step (the chain engine adds its tables as
// version 2); never edit one that has shipped.
//
// The DDL is standard SQL that PostgreSQL also accepts, once
// dialect.ddl has rewritten BLOB and TEXT (see dialect.go): BIGINT ids
// (GitLab's own), TEXT elsewhere, times as fixed-width UTC text (see
// timeLayout), no AUTOINCREMENT or other SQLite-only syntax.
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
		{
			version: 2,
			name:    "chains, members, outbox, event inbox",
			stmts: []string{
				// One row per chain, kept after it ended for history.
				// roots and skipped are JSON arrays.
				`CREATE TABLE chains (
					id BIGINT PRIMARY KEY,
					mode TEXT NOT NULL,
					state TEXT NOT NULL,
					roots TEXT NOT NULL,
					skipped TEXT NOT NULL,
					merged_into BIGINT,
					started_at TEXT NOT NULL,
					updated_at TEXT NOT NULL,
					ended_at TEXT
				)`,
				// Active chains (running, blocked) are loaded by every
				// transaction of the engine.
				`CREATE INDEX chains_state ON chains (state)`,
				`CREATE TABLE chain_reasons (
					chain_id BIGINT NOT NULL REFERENCES chains (id) ON DELETE CASCADE,
					seq INTEGER NOT NULL,
					kind TEXT NOT NULL,
					project TEXT NOT NULL,
					detail TEXT NOT NULL,
					pipeline_id BIGINT,
					at TEXT NOT NULL,
					PRIMARY KEY (chain_id, seq)
				)`,
				// "Did this pipeline already start a chain?"
				`CREATE INDEX chain_reasons_pipeline ON chain_reasons (pipeline_id)`,
				// upstreams is a JSON array; requeued is 0 or 1.
				`CREATE TABLE chain_members (
					chain_id BIGINT NOT NULL REFERENCES chains (id) ON DELETE CASCADE,
					project TEXT NOT NULL,
					project_id BIGINT NOT NULL,
					state TEXT NOT NULL,
					upstreams TEXT NOT NULL,
					why TEXT NOT NULL,
					requeued INTEGER NOT NULL,
					builds INTEGER NOT NULL,
					action_id TEXT NOT NULL,
					pipeline_id BIGINT,
					pipeline_url TEXT NOT NULL,
					triggered_at TEXT,
					finished_at TEXT,
					PRIMARY KEY (chain_id, project)
				)`,
				`CREATE INDEX chain_members_project ON chain_members (project)`,
				// The outbox: one row per pipeline to create, written with
				// the member that needs it. id is the DEPSD_ACTION_ID.
				`CREATE TABLE outbox (
					id TEXT PRIMARY KEY,
					chain_id BIGINT NOT NULL,
					project TEXT NOT NULL,
					project_id BIGINT NOT NULL,
					ref TEXT NOT NULL,
					upstreams TEXT NOT NULL,
					state TEXT NOT NULL,
					attempts INTEGER NOT NULL,
					next_attempt_at TEXT NOT NULL,
					lease_until TEXT,
					last_error TEXT NOT NULL,
					pipeline_id BIGINT,
					pipeline_url TEXT NOT NULL,
					created_at TEXT NOT NULL,
					sent_at TEXT
				)`,
				`CREATE INDEX outbox_due ON outbox (state, next_attempt_at)`,
				`CREATE INDEX outbox_pipeline ON outbox (pipeline_id)`,
				// The event inbox: webhook deliveries recorded before they
				// are acknowledged, applied in seq order. key is the
				// Idempotency-Key (deduplicated while the row is kept);
				// payload is the chain.Event as JSON.
				`CREATE TABLE events (
					seq BIGINT PRIMARY KEY,
					key TEXT NOT NULL UNIQUE,
					kind TEXT NOT NULL,
					payload TEXT NOT NULL,
					received_at TEXT NOT NULL,
					processed_at TEXT,
					result TEXT NOT NULL
				)`,
				`CREATE INDEX events_unprocessed ON events (processed_at, seq)`,
				`CREATE INDEX events_received ON events (received_at)`,
			},
		},
		scheduleMigration(),
		{
			version: 4,
			name:    "chain members by pipeline",
			stmts: []string{
				// A success seen twice (webhook and reconciler) is found by
				// its pipeline id (chain.Tx.PipelineSeen).
				`CREATE INDEX chain_members_pipeline ON chain_members (pipeline_id)`,
			},
		},
		replicaMigration(),
		{
			version: 6,
			name:    "chain versions",
			stmts: []string{
				// Incremented by every save of a chain, so that each
				// process's cache of the active chains knows when another
				// wrote one (chaincache.go).
				`ALTER TABLE chains ADD COLUMN version BIGINT NOT NULL DEFAULT 0`,
			},
		},
		pendingRebuildMigration(),
		hookCheckMigration(),
		{
			version: 9,
			name:    "chain versions start at 1",
			stmts: []string{
				// Chains saved before version 6 have version 0. SaveChain
				// takes version 1 after its upsert to mean "just inserted:
				// no reasons or members to replace", which holds once no
				// row is at 0.
				`UPDATE chains SET version = 1 WHERE version = 0`,
			},
		},
		{
			version: 10,
			name:    "outbox due order in its index",
			stmts: []string{
				// DueAction's whole order, so that the first due action is
				// the index's first match: with the order's tail missing,
				// every pending action (thousands in a rebuild) was read
				// and sorted for each claim.
				`DROP INDEX outbox_due`,
				`CREATE INDEX outbox_due ON outbox (state, next_attempt_at, created_at, id)`,
			},
		},
		{
			version: 11,
			name:    "generations",
			stmts: []string{
				// Counters that every change of a table bumps, for the
				// caches of every process: "projects" counts the scans
				// applied (ApplyScan), and each process keeps the projects
				// the engine looks up until it changes (chaincache.go).
				`CREATE TABLE generations (
					name TEXT PRIMARY KEY,
					n BIGINT NOT NULL
				)`,
				`INSERT INTO generations (name, n) VALUES ('projects', 1)`,
			},
		},
		{
			version: 12,
			name:    "pipeline identification per project, claim times",
			stmts: []string{
				// How the project's pipelines carry their action's id
				// (chain.PipelineIdent): '' (not yet known: variables),
				// variables, inputs or none. Learned from GitLab's
				// refusals and from scans.
				`ALTER TABLE projects ADD COLUMN pipeline_ident TEXT NOT NULL DEFAULT ''`,
				// When the action was first claimed: a resend in a project
				// without variables adopts only pipelines created since.
				`ALTER TABLE outbox ADD COLUMN claimed_at TEXT`,
			},
		},
		signingTokenMigration(),
		verificationMigration(),
		verifyMigration(),
		builtMigration(),
		hookSecretsMigration(),
		nodesMigration(),
		signinMigration(),
		chainStatusMigration(),
		pinsMigration(),
		premergeMigration(),
		{
			version: 23,
			name:    "chains generation",
			stmts: []string{
				// Counts the transactions that wrote chains (SaveChain):
				// while it stays, the active chains' ids and versions a
				// process read stay true, and SQLite's engine skips
				// reading them again (chaincache.go).
				`INSERT INTO generations (name, n) VALUES ('chains', 1)`,
			},
		},
	}
}
