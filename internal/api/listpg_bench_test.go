package api

import (
	"net/http"
	"testing"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
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
	fillListed(b, db, 1000, 0)
	s := New(gate.New(db, &policy.Policy{Default: policy.Allow}, nil), listAuth, nil)
	w := &countingWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		listOnce(b, s, w)
	}
	b.StopTimer()
	b.ReportMetric(float64(w.n)/1000, "body-B/row")
}
