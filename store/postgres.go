package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// openPostgres connects to the database at dsn (a postgres:// URL, with any
// of libpq's parameters) and checks that it answers.
func openPostgres(ctx context.Context, dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the URL: say only what is wrong.
		return nil, fmt.Errorf("bad PostgreSQL URL (postgres://user:password@host:port/database?options)")
	}
	if cfg.ConnectTimeout == 0 {
		// Inside GitLab's 10 s webhook timeout: an unreachable server
		// makes the webhook answer 503, not time out.
		cfg.ConnectTimeout = 5 * time.Second
	}
	db := sql.OpenDB(lockingConnector{stdlib.GetConnector(*cfg)})
	// Writers serialise on the advisory lock; readers (the API, the
	// dashboard) and the lock waiters need a few connections each.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(8)
	// A server restart leaves dead connections in the pool: recycle them
	// now and then so they do not linger after the first failed query.
	db.SetConnMaxLifetime(30 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	return db, nil
}

// Redact is a state as messages may name it: an SQLite path as it is, a
// postgres:// URL without its password (in the user info or the query).
func Redact(state string) string {
	if KindOf(state) != KindPostgres {
		return state
	}
	return redactURL(state)
}

// redactURL is dsn without its password, for messages and Path.
func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}
