package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/audit"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// fullRequests is a store whose ChainAudit also builds every batch from
// the requests read whole (GetRequest) and fails the test unless both
// builds give the same links, byte for byte.
type fullRequests struct {
	*sqlstore.DB
	t        *testing.T
	compared atomic.Int64 // request events compared
	narrow   atomic.Int64 // of them, with a request the store did not read whole
}

func (f *fullRequests) ChainAudit(ctx context.Context, limit, calls int, build func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error)) (int, bool, error) {
	return f.DB.ChainAudit(ctx, limit, calls, func(head store.AuditHead, src []store.AuditSource) ([]store.AuditEntry, error) {
		got, err := build(head, src)
		if err != nil {
			return nil, err
		}
		full := slices.Clone(src)
		for i, s := range full {
			if s.Request == nil {
				continue
			}
			r, err := f.GetRequest(ctx, s.Request.ID)
			if err != nil {
				return nil, err
			}
			full[i].Request = &r
			f.compared.Add(1)
			if s.Request.CreatedAt.IsZero() {
				f.narrow.Add(1)
			}
		}
		want, err := build(head, full)
		if err != nil {
			return nil, err
		}
		if len(got) != len(want) {
			f.t.Errorf("%d links from the store's sources, %d from whole requests", len(got), len(want))
			return got, nil
		}
		for i := range got {
			if !bytes.Equal(got[i].Record, want[i].Record) || got[i].Hash != want[i].Hash {
				f.t.Errorf("link %d:\n got %s\nwant %s", got[i].Seq, got[i].Record, want[i].Record)
			}
		}
		return got, nil
	})
}

// TestAuditRecordsFromTheNarrowRequestRead: the chain's read of the
// events' requests (only the columns a record uses; the arguments only in
// a batch with a requested event) gives the same records as the requests
// read whole, for every kind of request event and for batches with and
// without a requested event, on both stores.
func TestAuditRecordsFromTheNarrowRequestRead(t *testing.T) {
	for _, driver := range []string{sqlstore.DriverSQLite, sqlstore.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			db := &fullRequests{DB: openBackend(t, driver), t: t}
			tr := audit.New(db, nil)
			ctx := t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			create := func(i int) approval.ID {
				t.Helper()
				id, err := approval.NewID()
				if err != nil {
					t.Fatal(err)
				}
				args := json.RawMessage(fmt.Sprintf(`{"path":"/tmp/%d","note":"x"}`, i))
				hash, _ := approval.Hash(args)
				r := approval.Request{ID: id, State: approval.StatePending, Server: "fs", Tool: "write_file", Arguments: args,
					ArgumentsHash: hash, DisplayWarnings: []string{fmt.Sprintf("warning %d", i)}, Rule: "rule-" + fmt.Sprint(i),
					Mode: "hold", RequestedBy: agent.ID, OnBehalfOf: "bob", Tenant: agent.Tenant, RequiredApprovals: 2,
					Approvers: []string{"alice", "carol"}, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
				if err := db.CreateRequest(ctx, r); err != nil {
					t.Fatal(err)
				}
				return id
			}
			update := func(id approval.ID, actor string, fn func(*approval.Request) error) {
				t.Helper()
				if _, err := db.UpdateRequest(ctx, id, actor, fn); err != nil {
					t.Fatal(err)
				}
			}
			review := func(id approval.ID, by string, v approval.Verdict, reason string, at time.Time) {
				t.Helper()
				update(id, by, func(r *approval.Request) error {
					return r.Review(approval.Reviewer{ID: by}, v, reason, "", at)
				})
			}
			// flush chains until the chain has links links (on Postgres a
			// Flush may not see an event at once: flushUntil).
			flush := func(links int) {
				t.Helper()
				flushUntil(t, tr, db, func(l []store.AuditEntry) bool { return len(l) >= links })
			}
			a, d, c := create(1), create(2), create(3)
			flush(3) // requested events only
			review(a, "alice", approval.VerdictApprove, "looks fine", now.Add(time.Second))
			review(a, "carol", approval.VerdictApprove, "", now.Add(2*time.Second))
			review(d, "alice", approval.VerdictDeny, "not this path", now.Add(time.Second))
			update(c, "gw", func(r *approval.Request) error { return r.Cancel(now.Add(time.Second)) })
			flush(9) // no requested event: the arguments are not read
			e := create(4)
			update(a, "gw", func(r *approval.Request) error {
				cur, _ := db.GetRequest(ctx, a)
				if err := r.Consume(cur.Binding(), "", now.Add(3*time.Second)); err != nil {
					return err
				}
				return r.RecordOutcome(approval.OutcomeOK)
			})
			update(e, "gw", func(r *approval.Request) error { return r.Expire(now.Add(2 * time.Hour)) })
			flush(13) // a requested event with others
			if n := db.compared.Load(); n < 13 {
				t.Fatalf("%d request events compared, want every one (13)", n)
			}
			if db.narrow.Load() == 0 {
				t.Fatal("every request was read whole: the narrow read was not exercised")
			}
			recs := records(t, db, "")
			var types []string
			for _, r := range recs {
				types = append(types, r.Type)
			}
			for _, want := range []string{"requested", "reviewed", "approved", "denied", "cancelled", "consumed", "dispatched", "expired"} {
				if !slices.Contains(types, want) {
					t.Errorf("no %s record among %v", want, types)
				}
			}
			if res, err := audit.Verify(ctx, db); err != nil || !res.OK {
				t.Fatalf("Verify = %+v, %v", res, err)
			}
		})
	}
}
