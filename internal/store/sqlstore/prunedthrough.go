package sqlstore

import (
	"context"

	"toolgate/internal/store"
)

// PrunedThrough returns the position of the last event retention deleted
// (the end of the pruned prefix of the change feed), or the zero cursor
// when none was. A reader resuming at or before it has lost only pruned
// events (the event API accepts such a cursor; api.Server.resumeCursor).
func (db *DB) PrunedThrough(ctx context.Context) (store.Cursor, error) {
	c, _, err := db.prunedThrough(ctx)
	if err != nil {
		return store.Cursor{}, db.wrap("read the pruned prefix of the change feed", err)
	}
	return c, nil
}
