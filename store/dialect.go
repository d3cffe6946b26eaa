package store

import (
	"database/sql"
	"strings"
)

// dialect is everything that differs between the backends. The queries
// themselves are shared.
//
// | concern                  | SQLite                              | PostgreSQL                                   |
// | ------------------------ | ----------------------------------- | -------------------------------------------- |
// | writers serialise        | BEGIN IMMEDIATE (_txlock=immediate) | BEGIN takes an advisory lock (lockingConn)   |
// | a read sees one snapshot | deferred transaction in WAL mode    | READ ONLY, REPEATABLE READ                   |
// | bytes                    | BLOB                                | BYTEA                                        |
// | text order               | binary                              | COLLATE "C" on every TEXT column (binary)    |
// | times                    | fixed-width UTC text (timeLayout)   | the same text, so copies are exact           |
//
// Why an advisory lock rather than SERIALIZABLE with retries: the chain
// engine's UpdateChains transactions (chain.Store) read every active chain
// and rewrite what changed, so any two of them conflict, and SERIALIZABLE
// would abort all but one and make every caller loop; the callbacks also
// log and notify after commit, which a blind retry would repeat. One
// transaction-scoped lock taken as the first statement makes each writer
// wait for the one before, exactly as SQLite's write lock does, and since
// the lock is taken before anything is read, every statement after it (READ
// COMMITTED) sees all earlier writers' commits. The lock ends with the
// transaction, also when a replica dies (its connection closes). Reads take
// no lock and never wait for writers.
type dialect struct {
	kind Kind
	// readIsolation is the isolation of read-only transactions.
	readIsolation sql.IsolationLevel
	// ddl rewrites a shared DDL statement for this backend.
	ddl func(string) string
}

var sqliteDialect = dialect{
	kind:          KindSQLite,
	readIsolation: sql.LevelDefault,
	ddl:           func(s string) string { return s },
}

var postgresDialect = dialect{
	kind:          KindPostgres,
	readIsolation: sql.LevelRepeatableRead,
	ddl:           postgresDDL,
}

// txOptions are the options of a read-only or read-write transaction.
func (d dialect) txOptions(readOnly bool) *sql.TxOptions {
	if !readOnly {
		return nil
	}
	return &sql.TxOptions{ReadOnly: true, Isolation: d.readIsolation}
}

// postgresDDL turns the shared DDL into PostgreSQL's: BLOB is BYTEA, and
// TEXT columns compare bytewise as in SQLite (paths sort the same on both,
// whatever the database's locale).
func postgresDDL(stmt string) string {
	r := strings.NewReplacer(" BLOB ", " BYTEA ", " TEXT NOT NULL", ` TEXT COLLATE "C" NOT NULL`,
		" TEXT PRIMARY KEY", ` TEXT COLLATE "C" PRIMARY KEY`, " TEXT,", ` TEXT COLLATE "C",`, " TEXT\n", " TEXT COLLATE \"C\"\n")
	return r.Replace(stmt)
}
