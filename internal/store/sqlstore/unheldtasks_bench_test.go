package sqlstore

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// BenchmarkOrphanSweepList is one round of the orphaned-task sweep's read
// on each dialect, with approved requests waiting (approved calls that
// are no task, nobody holding them: held calls whose holder died) and
// approved tasks nobody holds behind them: "list" is tasks48's
// UnheldApprovedTasks (one statement, the tasks only), "get-each" the
// read it replaced (tasks47: a page of 100 approved requests, then a
// GetTask for each one nobody holds). approved=0 is an idle instance's
// round. Each sub-benchmark reports the tasks it found per round.
func BenchmarkOrphanSweepList(b *testing.B) {
	for _, be := range backends {
		for _, approved := range []int{0, 200} {
			b.Run(be.driver+"/approved="+strconv.Itoa(approved), func(b *testing.B) {
				db := openTest(b, be.fresh(b))
				ctx := b.Context()
				now := t0.Add(5 * time.Minute)
				make := func(n int, task bool) {
					r := pendingRequest(testID(n))
					r.ArgumentsHash = "sha256:" + strconv.Itoa(n)
					if err := db.CreateRequest(ctx, r); err != nil {
						b.Fatal(err)
					}
					if task {
						if err := db.CreateTask(ctx, store.Task{RequestID: r.ID, Principal: approval.Principal{ID: "desktop"},
							Arguments: []byte{1}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := db.UpdateRequest(ctx, r.ID, "carol", func(r *approval.Request) error {
						return r.Review(approval.Reviewer{ID: "carol"}, approval.VerdictApprove, "", "", t0.Add(time.Minute))
					}); err != nil {
						b.Fatal(err)
					}
				}
				for n := 1; n <= approved; n++ {
					make(n, false)
				}
				if approved > 0 {
					for n := approved + 1; n <= approved+5; n++ {
						make(n, true)
					}
				}
				b.Run("list", func(b *testing.B) {
					found := 0
					for b.Loop() {
						ts, err := db.UnheldApprovedTasks(ctx, now, "", 100)
						if err != nil {
							b.Fatal(err)
						}
						found = len(ts)
					}
					b.ReportMetric(float64(found), "tasks/round")
				})
				b.Run("get-each", func(b *testing.B) {
					found := 0
					for b.Loop() {
						rs, _, err := db.ListRequests(ctx, store.Filter{State: approval.StateApproved, Limit: 100})
						if err != nil {
							b.Fatal(err)
						}
						found = 0
						for _, r := range rs {
							if !r.LeaseLapsed(now) {
								continue
							}
							t, err := db.GetTask(ctx, r.ID)
							if errors.Is(err, store.ErrNotFound) {
								continue
							}
							if err != nil {
								b.Fatal(err)
							}
							if t.State == "" && t.Arguments != nil {
								found++
							}
						}
					}
					b.ReportMetric(float64(found), "tasks/round")
				})
			})
		}
	}
}
