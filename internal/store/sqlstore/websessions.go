package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"toolgate/internal/store"
)

// CreateWebSession inserts s; an error wrapping store.ErrAlreadyExists if
// its id is taken.
func (db *DB) CreateWebSession(ctx context.Context, s store.WebSession) error {
	if s.ID == "" || s.TokenHash == "" || s.CreatedAt.IsZero() || s.ExpiresAt.IsZero() {
		return errors.New("create web session: id, token hash, created_at and expires_at are required")
	}
	err := db.inTx(ctx, func(t *tx) error {
		res, err := t.exec(ctx, `INSERT INTO web_sessions (id, token_hash, principal, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			s.ID, s.TokenHash, s.Principal, store.Millis(s.CreatedAt).UnixMilli(), store.Millis(s.ExpiresAt).UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrAlreadyExists
		}
		return nil
	})
	if err != nil {
		return db.wrap("create web session", err)
	}
	return nil
}

// GetWebSession returns the session with id unless it expired at now; an
// error wrapping store.ErrNotFound otherwise.
func (db *DB) GetWebSession(ctx context.Context, id string, now time.Time) (store.WebSession, error) {
	var (
		s                  store.WebSession
		created, expiresAt int64
	)
	err := db.queryRow(ctx, `SELECT id, token_hash, principal, created_at, expires_at FROM web_sessions
		WHERE id = ? AND expires_at > ?`, id, store.Millis(now).UnixMilli()).Scan(&s.ID, &s.TokenHash, &s.Principal, &created, &expiresAt)
	if errors.Is(err, sql.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.WebSession{}, db.wrap("get web session", err)
	}
	s.CreatedAt = time.UnixMilli(created).UTC()
	s.ExpiresAt = time.UnixMilli(expiresAt).UTC()
	return s, nil
}

// DeleteWebSession removes the session with id, if any.
func (db *DB) DeleteWebSession(ctx context.Context, id string) error {
	err := db.inTx(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `DELETE FROM web_sessions WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return db.wrap("delete web session", err)
	}
	return nil
}

// DeleteExpiredWebSessions removes the sessions expired at now.
func (db *DB) DeleteExpiredWebSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := db.inTx(ctx, func(t *tx) error {
		res, err := t.exec(ctx, `DELETE FROM web_sessions WHERE expires_at <= ?`, store.Millis(now).UnixMilli())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, db.wrap("delete expired web sessions", err)
	}
	return int(n), nil
}
