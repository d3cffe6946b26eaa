package signin

import (
	"context"
	"time"
)

// Session is a person signed in, as the store keeps it. The cookie
// carries the session's random id and its signature; the store knows only
// the id's SHA-256 (ID), so that a copy of the state opens no session.
type Session struct {
	// ID is the hex SHA-256 of the id the cookie carries.
	ID       string
	UserID   int64
	Username string
	// Token is the person's OAuth token (access and refresh token, expiry)
	// sealed with AES-256-GCM under a key derived from the OAuth client
	// secret (sealer): a copy of the state alone does not give it.
	Token     []byte
	CreatedAt time.Time
	// ExpiresAt ends the session whatever the token says (ui.session_lifetime).
	ExpiresAt time.Time
}

// Store keeps the sessions and the key that signs their cookies, shared by
// every replica; *store.Store implements it. Calls may be concurrent.
type Store interface {
	// SessionKey returns the key that signs session cookies. When there is
	// none yet, it stores the one generate makes; of replicas racing to
	// do so the first wins and all return its key.
	SessionKey(ctx context.Context, generate func() ([]byte, error)) ([]byte, error)
	// SaveSession inserts or replaces the session with s.ID.
	SaveSession(ctx context.Context, s Session) error
	// Session returns the session with this ID; ok is false when there is
	// none (never made, signed out, or pruned).
	Session(ctx context.Context, id string) (s Session, ok bool, err error)
	// DeleteSession removes a session; none is not an error.
	DeleteSession(ctx context.Context, id string) error
	// PruneSessions removes the sessions that expired before before and
	// returns how many.
	PruneSessions(ctx context.Context, before time.Time) (int, error)
}
