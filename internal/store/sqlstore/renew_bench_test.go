package sqlstore

import (
	"fmt"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// BenchmarkRenewLeases renews the leases of N held requests, one renewal
// per op, as the gate does every approvals.lease / 3 while it holds N
// calls: the most of what holding calls idle cost (docs/performance.md,
// "Idle CPU while holding"). On SQLite the time per op is toolgate's CPU;
// on Postgres it includes the cluster's work for the renewal. It also
// reports cpu-ms/op: this process's CPU (user+sys) per renewal, plus, on
// Postgres, that of the backend serving the renewal's reserved connection
// (LeaseConns, /proc/PID/stat; 10 ms ticks).
func BenchmarkRenewLeases(b *testing.B) {
	for _, bk := range backends {
		for _, n := range []int{5000, 10000} {
			b.Run(fmt.Sprintf("%s/N=%d", bk.driver, n), func(b *testing.B) {
				db := openTest(b, bk.fresh(b))
				ids := make([]approval.ID, n)
				for i := range ids {
					r := pendingRequest(testID(i + 1))
					r.Arguments = fmt.Appendf(nil, `{"to":"acct-%d","memo":%q}`, i, fmt.Sprintf("%0600d", i))
					r.Renew("gw-a", t0.Add(time.Minute))
					if err := db.CreateRequest(b.Context(), r); err != nil {
						b.Fatal(err)
					}
					ids[i] = r.ID
				}
				k := 0
				renew := func() {
					k++
					got, err := db.RenewLeases(b.Context(), "gw-a", ids, t0.Add(time.Duration(k+1)*time.Minute))
					if err != nil || len(got) != n {
						b.Fatalf("renewed %d of %d: %v", len(got), n, err)
					}
				}
				renew() // the first renewal after the holds
				backend := 0
				if db.lsql != nil {
					if err := db.lsql.QueryRowContext(b.Context(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
						b.Fatal(err)
					}
				}
				cpu0 := cpuTime(b, backend)
				for b.Loop() {
					renew()
				}
				b.ReportMetric(float64(cpuTime(b, backend)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			})
		}
	}
}
