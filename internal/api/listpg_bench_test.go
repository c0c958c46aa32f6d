package api

import (
	"testing"

	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
)

// BenchmarkListApprovalsPostgres is BenchmarkListApprovals on Postgres
// (list28): GET /v1/approvals?limit=1000 over 1,000 requests with small
// arguments; B/op divided by 1,000 is what a listed request allocates.
func BenchmarkListApprovalsPostgres(b *testing.B) {
	db, err := sqlstore.Open(b.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: pgtest.Fresh(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	benchList(b, db)
}
