package sqlstore

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// TestUpgradeOfHeldAndDecidedRows opens a database an older toolgate left
// at schema version 16 (before migrations 0017 requests.timeout_rule and
// 0018 the covering index of held requests), holding requests under its
// instance lease and decided ones, with this store: the migrations run,
// every row reads as it was with no timeout rule, the held ones are still
// held and renewed through the new index (covering on both dialects), the
// settled ones are not, and requests written after the upgrade keep their
// timeout rule.
func TestUpgradeOfHeldAndDecidedRows(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			ctx := t.Context()
			cfg := oldDatabase(t, b, 16, "")
			d := map[string]dialect{DriverSQLite: &sqliteDialect{}, DriverPostgres: &postgresDialect{}}[cfg.Driver]

			at := t0.Add(time.Minute)
			held := func(n int, f func(*approval.Request)) approval.Request {
				r := pendingRequest(testID(n))
				r.Rule, r.HeldBy, r.LeaseUntil = "pay-approve", "gw-a", at
				if f != nil {
					f(&r)
				}
				return r
			}
			reviewed := func(v approval.Verdict) func(*approval.Request) {
				return func(r *approval.Request) {
					if err := r.Review(approval.Reviewer{ID: "bob"}, v, "", "", t0.Add(time.Second)); err != nil {
						t.Fatal(err)
					}
				}
			}
			consumed := func(r *approval.Request) {
				reviewed(approval.VerdictApprove)(r)
				if err := r.Consume(r.Binding(), "", t0.Add(2*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			rs := []approval.Request{
				held(1, nil), // held, pending
				held(2, reviewed(approval.VerdictApprove)), // held, approved
				held(3, consumed),                          // held, dispatch in flight
				held(4, reviewed(approval.VerdictDeny)),    // settled, mark not yet cleared
				held(5, func(r *approval.Request) { // settled: answered, no holder
					reviewed(approval.VerdictDeny)(r)
					r.HeldBy, r.LeaseUntil = "", time.Time{}
				}),
			}
			live := []approval.ID{rs[0].ID, rs[1].ID, rs[2].ID}

			// The rows as a version-16 binary wrote them: every column but
			// timeout_rule, the held ones carrying the instance lease marker.
			raw := openRaw(t, cfg)
			// (and no_grants, migration 27, which came later).
			cols := strings.TrimSuffix(requestColumns, ", timeout_rule, no_grants")
			for _, r := range rs {
				w, err := encodeRequest(r)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := raw.ExecContext(ctx, d.rebind(`INSERT INTO requests (`+cols+`) VALUES (`+placeholders(numRequestColumns-2)+`)`),
					w.args()[:numRequestColumns-2]...); err != nil {
					t.Fatalf("insert %s at version 16: %v", r.ID, err)
				}
			}
			if _, err := raw.ExecContext(ctx, d.rebind(`UPDATE requests SET lease_until = ? WHERE held_by = ?`), leaseMarker, "gw-a"); err != nil {
				t.Fatal(err)
			}
			if _, err := raw.ExecContext(ctx, d.rebind(`INSERT INTO instance_leases (instance, lease_until) VALUES (?, ?)`), "gw-a", millis(at)); err != nil {
				t.Fatal(err)
			}
			_ = raw.Close()

			db := openTest(t, cfg)
			checkMigrations(t, db)
			for _, want := range rs {
				got, err := db.GetRequest(ctx, want.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != want.State || got.HeldBy != want.HeldBy || got.Rule != want.Rule || got.TimeoutRule != "" {
					t.Errorf("%s after the upgrade: state %s, held by %q, rule %q, timeout rule %q; want %s, %q, %q, none",
						want.ID, got.State, got.HeldBy, got.Rule, got.TimeoutRule, want.State, want.HeldBy, want.Rule)
				}
				if want.HeldBy != "" && !got.LeaseUntil.Equal(at) {
					t.Errorf("%s after the upgrade: lease until %v, want its instance's %v", want.ID, got.LeaseUntil, at)
				}
			}

			// The renewal reads the held rows through 0018's index and
			// renews the live ones only.
			mustRenew(t, db, "gw-a", []approval.ID{rs[0].ID, rs[1].ID, rs[2].ID, rs[3].ID}, at.Add(time.Minute), live...)
			for _, id := range live {
				if r, err := db.GetRequest(ctx, id); err != nil || !r.LeaseUntil.Equal(at.Add(time.Minute)) {
					t.Errorf("%s after the renewal: lease until %v, %v; want %v", id, r.LeaseUntil, err, at.Add(time.Minute))
				}
			}
			if def := indexDef(t, db, "requests_instance_held"); !strings.Contains(def, "dispatch_outcome") {
				t.Errorf("requests_instance_held after the upgrade is %q, want 0018's covering index", def)
			}

			// Written on: a held request is decided, a new one keeps its
			// timeout rule.
			if _, err := db.UpdateRequest(ctx, rs[0].ID, "gw-a", func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", at)
			}); err != nil {
				t.Fatal(err)
			}
			r := pendingRequest(testID(6))
			r.Rule, r.TimeoutRule = "pay-approve", "strictest"
			if err := db.CreateRequest(ctx, r); err != nil {
				t.Fatal(err)
			}
			if got, err := db.GetRequest(ctx, r.ID); err != nil || got.TimeoutRule != "strictest" {
				t.Errorf("a request written after the upgrade: timeout rule %q, %v; want %q", got.TimeoutRule, err, "strictest")
			}
		})
	}
}

// indexDef returns the definition of the index name as the database keeps
// it ("" when there is none).
func indexDef(t *testing.T, db *DB, name string) string {
	t.Helper()
	q := `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?`
	if db.d.name() == DriverPostgres {
		q = `SELECT indexdef FROM pg_indexes WHERE indexname = ?`
	}
	var def string
	if err := db.sql.QueryRowContext(t.Context(), db.d.rebind(q), name).Scan(&def); err != nil {
		t.Fatalf("read the index %s: %v", name, err)
	}
	return def
}
