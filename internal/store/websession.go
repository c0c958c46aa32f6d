package store

import (
	"context"
	"time"
)

// A WebSession is a signed-in browser session of the approver inbox
// (internal/web). The cookie value is a secret the store never sees: ID is
// the lowercase hex SHA-256 of it. TokenHash is the lowercase hex SHA-256
// of the bearer token the approver signed in with, so every request is
// authenticated against the approver's current configuration (a token
// removed from the config ends its sessions).
type WebSession struct {
	ID        string
	TokenHash string
	// Principal is the approver's id at sign-in, for display and logs.
	Principal string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// WebSessionStore persists inbox sessions, so that any gateway instance
// sharing the database accepts a session another one created. Every backend
// implements it as part of Store. Methods are safe for concurrent use;
// times come from the caller and are stored in UTC with millisecond
// precision.
type WebSessionStore interface {
	// CreateWebSession inserts s (ID, TokenHash, CreatedAt and ExpiresAt
	// are required); ErrAlreadyExists if the id is taken.
	CreateWebSession(ctx context.Context, s WebSession) error
	// GetWebSession returns the session with id if it has not expired at
	// now (ExpiresAt > now), else ErrNotFound.
	GetWebSession(ctx context.Context, id string, now time.Time) (WebSession, error)
	// DeleteWebSession removes the session (sign-out); an unknown id is not
	// an error.
	DeleteWebSession(ctx context.Context, id string) error
	// DeleteExpiredWebSessions removes the sessions expired at now and
	// returns how many it removed.
	DeleteExpiredWebSessions(ctx context.Context, now time.Time) (int, error)
}
