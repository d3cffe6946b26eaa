package store

// chainStatusMigration adds the projects' visibility, which decides what
// a chain's commit status may name.
func chainStatusMigration() migration {
	return migration{
		version: 19,
		name:    "project visibility",
		stmts: []string{
			`ALTER TABLE projects ADD COLUMN visibility TEXT NOT NULL DEFAULT ''`,
		},
	}
}
