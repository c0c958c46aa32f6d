package audit_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	_ "modernc.org/sqlite"

	"toolgate/internal/approval"
	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
	"toolgate/internal/store/sqlstore/pgtest"
)

var agent = approval.Principal{ID: "agent-1", Kind: "agent", Tenant: "acme"}

func testPolicy() *policy.Policy {
	return &policy.Policy{
		Default:  policy.Approve,
		Approval: policy.Approval{Timeout: time.Minute, Mode: "hold", Approvals: 1},
		Rules: []policy.Rule{
			{Name: "reads", Server: "fs", Tools: []string{"read_*"}, Effect: policy.Allow},
			{Name: "no deletes", Tools: []string{"*delete*"}, Effect: policy.Deny},
		},
	}
}

func openSQLite(tb testing.TB, path string) *sqlstore.DB {
	tb.Helper()
	db, err := sqlstore.Open(tb.Context(), sqlstore.Config{Driver: sqlstore.DriverSQLite, Path: path})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// call returns a call of tool on fs with a secret among its arguments.
func call(tool string) gate.Call {
	return gate.Call{Principal: agent, Server: "fs", Tool: tool, Arguments: json.RawMessage(`{"path":"/etc/x","password":"hunter2"}`)}
}

// approveOne makes a pending request, approves, consumes and finishes it
// through the store (the events the gate would write).
func approveOne(t *testing.T, s store.Store, i int) approval.ID {
	t.Helper()
	ctx := t.Context()
	id, err := approval.NewID()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	args := json.RawMessage(fmt.Sprintf(`{"path":"/tmp/%d"}`, i))
	hash, _ := approval.Hash(args)
	r := approval.Request{ID: id, State: approval.StatePending, Server: "fs", Tool: "write_file", Arguments: args, ArgumentsHash: hash,
		Rule: "default", Mode: "hold", RequestedBy: agent.ID, Tenant: agent.Tenant, RequiredApprovals: 1, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := s.CreateRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateRequest(ctx, id, "alice", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "alice"}, approval.VerdictApprove, "fine", hash, now)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateRequest(ctx, id, "gw", func(r *approval.Request) error {
		if err := r.Consume(approval.Binding{Principal: agent.ID, Server: "fs", Tool: "write_file", ArgumentsHash: hash}, "", now); err != nil {
			return err
		}
		return r.RecordOutcome(approval.OutcomeOK)
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

func records(t *testing.T, r audit.Reader, tenant string) []audit.Record {
	t.Helper()
	links, err := r.AuditLog(t.Context(), store.AuditFilter{Tenant: tenant, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]audit.Record, len(links))
	for i, l := range links {
		if err := json.Unmarshal(l.Record, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestTrailChainsCallsAndEvents(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
	tr := audit.New(db, nil)
	yes := true
	pol := testPolicy()
	pol.Rules = append(pol.Rules, policy.Rule{Name: "watch lists", Tools: []string{"list_*"}, Effect: policy.Deny, Monitor: &yes})
	pol.Default = policy.Allow
	g := gate.New(db, pol, &gate.Options{Recorder: tr})
	ctx := t.Context()
	if adm := g.Admit(ctx, call("read_file")); !adm.Allowed {
		t.Fatalf("read_file refused: %s", adm.Message)
	}
	if adm := g.Admit(ctx, call("delete_file")); adm.Allowed {
		t.Fatal("delete_file allowed")
	}
	if adm := g.Admit(ctx, call("list_dir")); !adm.Allowed {
		t.Fatalf("list_dir refused: %s", adm.Message)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	id := approveOne(t, db, 1)
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs := records(t, db, "")
	var types []string
	for i, r := range recs {
		types = append(types, r.Type)
		if r.Seq != int64(i+1) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
	}
	got := strings.Join(types, " ")
	if want := "allowed refused allowed requested reviewed approved consumed dispatched"; got != want {
		t.Fatalf("types = %q, want %q", got, want)
	}
	allowed, refused, monitored := recs[0], recs[1], recs[2]
	if allowed.Rule != "reads" || allowed.Server != "fs" || allowed.Tool != "read_file" || allowed.Principal != "agent-1" || allowed.Tenant != "acme" {
		t.Errorf("allowed record = %+v", allowed)
	}
	if refused.Rule != "no deletes" || !strings.Contains(refused.Reason, "no deletes") {
		t.Errorf("refused record = %+v", refused)
	}
	if monitored.Monitor == nil || monitored.Monitor.Verdict != policy.WouldDeny || monitored.Monitor.Rule != "watch lists" {
		t.Errorf("monitor verdict not recorded: %+v", monitored)
	}
	if recs[3].ApprovalID != string(id) || recs[4].Verdict != "approve" || recs[4].Actor != "alice" || recs[7].Outcome != "ok" || recs[3].Tenant != "acme" {
		t.Errorf("approval records = %+v", recs[3:])
	}
	wantHash, _ := approval.Hash(call("x").Arguments)
	for _, l := range mustLinks(t, db) {
		if strings.Contains(string(l.Record), "hunter2") {
			t.Errorf("link %d keeps a raw argument: %s", l.Seq, l.Record)
		}
	}
	if allowed.ArgumentsHash != wantHash || !strings.Contains(string(allowed.Arguments), "redacted") {
		t.Errorf("allowed record hash %s (want %s), display %s", allowed.ArgumentsHash, wantHash, allowed.Arguments)
	}
	res, err := audit.Verify(ctx, db)
	if err != nil || !res.OK || res.Links != 8 || res.Head != 8 {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
	if other := records(t, db, "other"); len(other) != 0 {
		t.Errorf("tenant filter: %d records of another tenant", len(other))
	}
}

func mustLinks(t *testing.T, r audit.Reader) []store.AuditEntry {
	t.Helper()
	links, err := r.AuditLog(t.Context(), store.AuditFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return links
}

// chained returns a SQLite store with n approved calls chained (5 links
// each), and the path of its file.
func chained(t *testing.T, n int) (*sqlstore.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tg.db")
	db := openSQLite(t, path)
	for i := range n {
		approveOne(t, db, i)
	}
	if err := audit.New(db, nil).Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db, path
}

// tamper runs stmt on the SQLite file with the driver directly, as someone
// with write access to the file would.
func tamper(t *testing.T, path, stmt string, args ...any) {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	res, err := raw.Exec(stmt, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s changed %d rows", stmt, n)
	}
}

func TestVerifyNamesTheFirstBrokenLink(t *testing.T) {
	cases := []struct {
		name   string
		stmt   string
		args   []any
		broken int64
		says   string
	}{
		{"edited record", `UPDATE audit_log SET record = replace(record, '"alice"', '"mallory"') WHERE seq = 7`, nil, 7, "is not the hash of its prev_hash and record"},
		{"edited record with its hash recomputed", "", nil, 8, "link 7 was edited and its hash recomputed"},
		{"deleted link", `DELETE FROM audit_log WHERE seq = 5`, nil, 5, "missing"},
		{"edited time column", `UPDATE audit_log SET at = at + 1000 WHERE seq = 3`, nil, 3, "at"},
		{"truncated tail", `DELETE FROM audit_log WHERE seq = 15`, nil, 15, "head"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, path := chained(t, 3) // 15 links
			if res, err := audit.Verify(t.Context(), db); err != nil || !res.OK {
				t.Fatalf("before tampering: %+v, %v", res, err)
			}
			if tc.stmt == "" {
				// A forger who recomputes the edited link's hash breaks
				// the next link instead.
				l := mustLinks(t, db)[6]
				rec := strings.Replace(string(l.Record), `"alice"`, `"mallory"`, 1)
				tamper(t, path, `UPDATE audit_log SET record = ?, hash = ? WHERE seq = 7`, rec, audit.LinkHash(l.PrevHash, []byte(rec)))
			} else {
				tamper(t, path, tc.stmt, tc.args...)
			}
			res, err := audit.Verify(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.BrokenSeq != tc.broken || !strings.Contains(res.Problem, tc.says) {
				t.Fatalf("Verify = %+v, want broken at %d (%q)", res, tc.broken, tc.says)
			}
		})
	}
}

func TestPruneKeepsTheChainVerifiable(t *testing.T) {
	db, path := chained(t, 3)
	cutoff := time.Now().Add(time.Hour) // everything is older: all but the head go
	n, err := db.PruneAudit(t.Context(), cutoff)
	if err != nil || n != 14 {
		t.Fatalf("PruneAudit = %d, %v; want 14", n, err)
	}
	res, err := audit.Verify(t.Context(), db)
	if err != nil || !res.OK || res.Anchor != 14 || res.Links != 1 {
		t.Fatalf("after pruning: %+v, %v", res, err)
	}
	// The anchor carries the chain on: new links verify from it, and an
	// edit is still found.
	approveOne(t, db, 9)
	if err := audit.New(db, nil).Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res, err := audit.Verify(t.Context(), db); err != nil || !res.OK || res.Head != 20 {
		t.Fatalf("after more links: %+v, %v", res, err)
	}
	tamper(t, path, `UPDATE audit_chain SET anchor_hash = 'sha256:00' WHERE id = 1`)
	if res, _ := audit.Verify(t.Context(), db); res.OK || res.BrokenSeq != 15 {
		t.Fatalf("edited anchor: %+v", res)
	}
}

func TestFullQueueDropsAndCounts(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
	reg := prometheus.NewRegistry()
	m := newAuditMetrics(reg)
	tr := audit.New(db, &audit.Options{QueueSize: 2, Metrics: m})
	for range 5 {
		tr.Decided(t.Context(), gate.Decided{At: time.Now(), Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{}`), Allowed: true})
	}
	if got := dropped(t, reg); got != 3 {
		t.Fatalf("dropped = %v, want 3", got)
	}
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if recs := records(t, db, ""); len(recs) != 2 {
		t.Fatalf("%d records, want the 2 queued", len(recs))
	}
}

// TestInstancesShareOneChain runs two trails, each on its own handle of one
// database (two processes' worth of connections), appending calls and
// events concurrently: every event and call is chained exactly once and
// the chain verifies.
func TestInstancesShareOneChain(t *testing.T) {
	for _, b := range []string{sqlstore.DriverSQLite, sqlstore.DriverPostgres} {
		t.Run(b, func(t *testing.T) {
			var open func() *sqlstore.DB
			if b == sqlstore.DriverSQLite {
				path := filepath.Join(t.TempDir(), "tg.db")
				open = func() *sqlstore.DB { return openSQLite(t, path) }
			} else {
				dsn := pgtest.Fresh(t)
				open = func() *sqlstore.DB {
					db, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: dsn})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = db.Close() })
					return db
				}
			}
			dbs := []*sqlstore.DB{open(), open()}
			const calls, approvals = 60, 10
			var wg sync.WaitGroup
			for i, db := range dbs {
				tr := audit.New(db, &audit.Options{Batch: 7})
				g := gate.New(db, testPolicy(), &gate.Options{Recorder: tr})
				wg.Go(func() {
					for j := range calls {
						g.Admit(t.Context(), call("read_file"))
						if j%(calls/approvals) == 0 {
							approveOne(t, db, i*1000+j)
						}
						if j%5 == 0 {
							if err := tr.Flush(t.Context()); err != nil {
								t.Error(err)
							}
						}
					}
					if err := tr.Flush(t.Context()); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			want := 2*calls + 2*approvals*5
			flushUntil(t, audit.New(dbs[0], nil), dbs[1], func(links []store.AuditEntry) bool { return len(links) >= want })
			recs := records(t, dbs[1], "")
			seen := map[int64]bool{}
			allowed := 0
			for _, r := range recs {
				if r.EventSeq != 0 {
					if seen[r.EventSeq] {
						t.Errorf("event %d chained twice", r.EventSeq)
					}
					seen[r.EventSeq] = true
				}
				if r.Type == audit.TypeAllowed {
					allowed++
				}
			}
			if len(recs) != want || allowed != 2*calls || len(seen) != 2*approvals*5 {
				t.Fatalf("%d links (%d allowed, %d events), want %d (%d, %d)", len(recs), allowed, len(seen), want, 2*calls, 2*approvals*5)
			}
			res, err := audit.Verify(t.Context(), dbs[0])
			if err != nil || !res.OK || res.Links != int64(want) {
				t.Fatalf("Verify = %+v, %v", res, err)
			}
		})
	}
}

func dropped(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, "toolgate_audit_dropped_total")
	if err != nil || n != 1 {
		t.Fatalf("gather: %d, %v", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "toolgate_audit_dropped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// flaky is the store with ChainAudit failing while down is set, as in an
// outage.
type flaky struct {
	*sqlstore.DB
	down bool
}

func (f *flaky) ChainAudit(ctx context.Context, limit, calls int, build func(store.AuditHead, []store.AuditSource) ([]store.AuditEntry, error)) (int, bool, error) {
	if f.down {
		return 0, false, fmt.Errorf("chain audit events: %w", store.ErrUnavailable)
	}
	return f.DB.ChainAudit(ctx, limit, calls, build)
}

// TestOutageKeepsQueuedCalls: calls queued while the store fails stay
// queued and are chained, once, when it answers again.
func TestOutageKeepsQueuedCalls(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
	f := &flaky{DB: db, down: true}
	tr := audit.New(f, nil)
	for range 3 {
		tr.Decided(t.Context(), gate.Decided{At: time.Now(), Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{}`), Allowed: true})
	}
	if err := tr.Flush(t.Context()); err == nil {
		t.Fatal("Flush during the outage succeeded")
	}
	tr.Decided(t.Context(), gate.Decided{At: time.Now(), Principal: agent, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{}`), Allowed: true})
	f.down = false
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if recs := records(t, db, ""); len(recs) != 4 {
		t.Fatalf("%d records after the outage, want 4", len(recs))
	}
	if res, err := audit.Verify(t.Context(), db); err != nil || !res.OK {
		t.Fatalf("Verify = %+v, %v", res, err)
	}
}

// TestTrailChainsGrantsAndPolicyRevisions: grant events carry their grant
// and its tenant (so a tenant's export has them), a call a grant allowed
// names the grant, and a policy_changed event its revision (read beside
// the change feed, which does not carry it).
func TestTrailChainsGrantsAndPolicyRevisions(t *testing.T) {
	for _, b := range []string{sqlstore.DriverSQLite, sqlstore.DriverPostgres} {
		t.Run(b, func(t *testing.T) {
			db := openBackend(t, b)
			tr := audit.New(db, nil)
			pol := testPolicy()
			pol.Approval.Mode = "retry"
			g := gate.New(db, pol, &gate.Options{Recorder: tr, RetryWait: time.Nanosecond})
			ctx := t.Context()
			write := func(path string) gate.Call {
				return gate.Call{Principal: agent, Server: "fs", Tool: "write_file", Arguments: json.RawMessage(`{"path":"` + path + `"}`)}
			}
			first := g.Admit(ctx, write("/tmp/a"))
			if first.Allowed || first.ApprovalID == "" {
				t.Fatalf("first write: %+v, want approval required", first)
			}
			_, gr, err := g.ApproveWithGrant(ctx, first.ApprovalID, approval.Principal{ID: "alice", Kind: "human"}, "routine", "",
				approval.GrantTerms{When: `args.path.startsWith("/tmp/")`, TTL: time.Hour})
			if err != nil || gr == nil {
				t.Fatalf("ApproveWithGrant = %v, %v", gr, err)
			}
			if a := g.Admit(ctx, write("/tmp/b")); !a.Allowed || a.Grant != gr.ID {
				t.Fatalf("call within the grant: %+v", a)
			}
			rev, err := db.AppendPolicy(ctx, 0, store.PolicyRevision{Policy: "default: deny\n", Digest: "sha256:" + strings.Repeat("0", 64), CreatedAt: time.Now()}, "admin")
			if err != nil {
				t.Fatal(err)
			}
			// The revision committed last: once it is chained, so is the
			// rest.
			flushUntil(t, tr, db, func(links []store.AuditEntry) bool {
				return slices.ContainsFunc(links, func(l store.AuditEntry) bool { return strings.Contains(string(l.Record), `"policy_changed"`) })
			})
			var created, used, allowed, changed *audit.Record
			recs := records(t, db, "")
			for i, r := range recs {
				switch r.Type {
				case "grant_created":
					created = &recs[i]
				case "grant_used":
					used = &recs[i]
				case audit.TypeAllowed:
					allowed = &recs[i]
				case "policy_changed":
					changed = &recs[i]
				}
			}
			for name, r := range map[string]*audit.Record{"grant_created": created, "grant_used": used, "allowed": allowed} {
				if r == nil || r.GrantID != gr.ID || r.Tenant != "acme" {
					t.Errorf("%s record = %+v; want grant %s of tenant acme", name, r, gr.ID)
				}
			}
			if changed == nil || changed.PolicyRevision != rev.Revision || changed.Actor != "admin" {
				t.Errorf("policy_changed record = %+v; want revision %d by admin", changed, rev.Revision)
			}
			if res, err := audit.Verify(ctx, db); err != nil || !res.OK {
				t.Fatalf("Verify = %+v, %v", res, err)
			}
		})
	}
}

// openBackend opens a fresh store of driver (Postgres: pgtest.Fresh).
func openBackend(t *testing.T, driver string) *sqlstore.DB {
	t.Helper()
	if driver == sqlstore.DriverSQLite {
		return openSQLite(t, filepath.Join(t.TempDir(), "tg.db"))
	}
	db, err := sqlstore.Open(t.Context(), sqlstore.Config{Driver: sqlstore.DriverPostgres, DSN: pgtest.Fresh(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// flushUntil flushes tr until done accepts r's chain. On Postgres the
// change feed returns an event only once every older transaction in the
// cluster has ended (other tests' databases share the server), so one
// Flush right after a commit may not see it yet; give up after 30 s (the
// caller's checks then fail).
func flushUntil(t *testing.T, tr *audit.Trail, r audit.Reader, done func([]store.AuditEntry) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if err := tr.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if done(mustLinks(t, r)) || time.Now().After(deadline) {
			return
		}
	}
}
