package store

// rowScanner is what the scans of events and actions read from: an
// *sql.Rows, or the pgx rows of a statement sent with the BEGIN
// (readAhead.then).
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}
