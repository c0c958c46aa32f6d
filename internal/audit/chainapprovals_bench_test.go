package audit_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/audit"
)

// BenchmarkChainApprovals measures the trail's work per approved call as
// approve-all's chain does it (branch sqlapprove33): 100 held requests
// created and chained, then approved, consumed and dispatched through the
// store (none of it timed), then their four events each (reviewed,
// approved, consumed, dispatched) chained by one Flush, timed; ns/op and
// allocs/op are per batch of 100 approvals.
//
//	go test -run '^$' -bench ChainApprovals ./internal/audit/
func BenchmarkChainApprovals(b *testing.B) {
	db := openSQLite(b, filepath.Join(b.TempDir(), "tg.db"))
	tr := audit.New(db, nil)
	ctx := b.Context()
	flush := func() {
		if err := tr.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		b.StopTimer()
		now := time.Now().UTC()
		ids := make([]approval.ID, 100)
		hashes := make([]string, 100)
		for k := range ids {
			n++
			id, err := approval.NewID()
			if err != nil {
				b.Fatal(err)
			}
			args := json.RawMessage(fmt.Sprintf(`{"i":%d,"tag":"scale"}`, n))
			hash, _ := approval.Hash(args)
			r := approval.Request{ID: id, State: approval.StatePending, Server: "fs", Tool: "write_file", Arguments: args, ArgumentsHash: hash,
				Rule: "default", Mode: "hold", RequestedBy: agent.ID, Tenant: agent.Tenant, RequiredApprovals: 1, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
			if err := db.CreateRequest(ctx, r); err != nil {
				b.Fatal(err)
			}
			ids[k], hashes[k] = id, hash
		}
		flush() // the requested events, chained at admission in approve-all
		for k, id := range ids {
			if _, err := db.UpdateRequest(ctx, id, "alice", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "alice"}, approval.VerdictApprove, "", "", now)
			}); err != nil {
				b.Fatal(err)
			}
			if _, err := db.UpdateRequest(ctx, id, "gw", func(r *approval.Request) error {
				if err := r.Consume(approval.Binding{Principal: agent.ID, Server: "fs", Tool: "write_file", ArgumentsHash: hashes[k]}, "", now); err != nil {
					return err
				}
				return r.RecordOutcome(approval.OutcomeOK)
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		flush()
	}
}
