package policystore_test

import (
	"testing"

	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/eachstore"
)

// eachStore runs fn on SQLite and on a fresh Postgres database
// (eachstore.Run).
func eachStore(t *testing.T, fn func(t *testing.T, db *sqlstore.DB)) {
	t.Helper()
	eachstore.Run(t, fn)
}
