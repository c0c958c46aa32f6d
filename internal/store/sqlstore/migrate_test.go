package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// releasedMigrations are the SHA-256 digests of the migrations that
// databases in use were made with. Migrations are forward-only: a released
// file never changes (a change goes into a new version), or databases made
// with the old file would silently differ from new ones.
var releasedMigrations = map[string]string{
	"postgres/0001_init.sql":             "f72146b3cca7deaf46642ea1d8881beabdde7a4792be923dce3a75cbb796d169",
	"postgres/0002_answered_at.sql":      "5339778a2cfa21137c2aa61e75ed657b3bfb1adc7e42fc4cbb936274705a30f6",
	"postgres/0003_sessions.sql":         "26d34473727a8719751977caac77a232420fcc2619c3944db5e5ed8680fe3390",
	"postgres/0004_request_kind.sql":     "cbf3e88867090d904000e7e53907ef56a4fa056238bbe3d7b5475e3e23c0aeb6",
	"postgres/0005_policy_revisions.sql": "28f611e27b4705ef083b275be33a52261698bbf6fd6be123a535d2811b616047",
	"sqlite/0001_init.sql":               "d6f088ed50434bf2f313b8146777193b00733e7298986184d83ddbc05f4db838",
	"sqlite/0002_answered_at.sql":        "a146570497f29fc206ae9f203ea05d7b25d495b81273a8bdb8a40bf960241fad",
	"sqlite/0003_sessions.sql":           "7a44090ded0b01cef45052c4b23e1e6530d2c514ad55c93c3116a6a1cdc6f293",
	"sqlite/0004_request_kind.sql":       "97436292c36cce101b8be71b96aaca74faad9bbfae9111e26a752c17c8a45d2d",
	"sqlite/0005_policy_revisions.sql":   "d18932edecaebf9b816e954efef53820e91392855acf969e0dd223c5628f5b25",
}

// TestMigrationsReleasedUnchanged holds the released migrations to their
// digests, and every dialect to the same numbering.
func TestMigrationsReleasedUnchanged(t *testing.T) {
	seen := map[string]bool{}
	versions := map[string][]int{}
	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		ms, err := migrations(driver)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			versions[driver] = append(versions[driver], m.version)
			key := driver + "/" + m.name
			want, ok := releasedMigrations[key]
			if !ok {
				continue // not released yet
			}
			seen[key] = true
			sum := sha256.Sum256([]byte(m.sql))
			if got := hex.EncodeToString(sum[:]); got != want {
				t.Errorf("released migration %s changed (sha256 %s, want %s): add a new migration instead", key, got, want)
			}
		}
	}
	for key := range releasedMigrations {
		if !seen[key] {
			t.Errorf("released migration %s is missing", key)
		}
	}
	if diff := cmp.Diff(versions[DriverSQLite], versions[DriverPostgres]); diff != "" {
		t.Errorf("the dialects' migration versions differ (-sqlite +postgres):\n%s", diff)
	}
}

// oldDatabase makes a database as the store of commit 37590d2 (the separate
// sqlite and postgres packages) left it at schema version upTo: the
// version table and the embedded migrations 1..upTo applied in order, then
// the SQL statements of rows run as one script. It returns the Config to
// open it.
func oldDatabase(t *testing.T, b backend, upTo int, rows string) Config {
	t.Helper()
	cfg := b.fresh(t)
	raw := openRaw(t, cfg)
	defer func() { _ = raw.Close() }()
	ctx := t.Context()
	d := map[string]dialect{DriverSQLite: &sqliteDialect{}, DriverPostgres: &postgresDialect{}}[cfg.Driver]
	if _, err := raw.ExecContext(ctx, d.schemaMigrationsDDL()); err != nil {
		t.Fatal(err)
	}
	ms, err := migrations(cfg.Driver)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version > upTo {
			break
		}
		if err := applyRaw(ctx, raw, m); err != nil {
			t.Fatalf("apply %s: %v", m.name, err)
		}
		if _, err := raw.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations VALUES (?, ?, 0)`), m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	if rows != "" {
		if _, err := raw.ExecContext(ctx, rows); err != nil {
			t.Fatalf("insert the old rows: %v", err)
		}
	}
	return cfg
}

// applyRaw runs migration m on raw as written: in one call, or a
// noTxMarker one statement by statement.
func applyRaw(ctx context.Context, raw *sql.DB, m migration) error {
	if m.steps == nil {
		_, err := raw.ExecContext(ctx, m.sql)
		return err
	}
	for _, s := range m.steps {
		if _, err := raw.ExecContext(ctx, s.stmt); err != nil {
			return err
		}
	}
	return nil
}

// openRaw opens cfg's database without the store (no migrations).
func openRaw(t *testing.T, cfg Config) *sql.DB {
	t.Helper()
	var (
		raw *sql.DB
		err error
	)
	switch cfg.Driver {
	case DriverSQLite:
		raw, err = sql.Open("sqlite", cfg.Path+"?_pragma=foreign_keys(ON)")
	case DriverPostgres:
		raw, err = sql.Open("pgx", cfg.DSN)
	}
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// release5 is testdata/release5/want.json: what the store of commit
// 37590d2 returned for the rows of rows.sql.
type release5 struct {
	Requests []release5Request      `json:"requests"`
	Events   []approval.Event       `json:"events"`
	Sessions []session.Session      `json:"sessions"`
	Policies []store.PolicyRevision `json:"policies"`
}

// release5Request adds ValidFor, which approval.Request leaves out of JSON.
type release5Request struct {
	approval.Request
	ValidForMS int64 `json:"valid_for_ms"`
}

// TestOpenDatabaseOfPreviousRelease opens databases written by the store of
// commit 37590d2 (testdata/release5: the rows it stored, and what it
// returned for them, made by gen.go there) with this store: it migrates
// them, returns every request, event, session and policy revision exactly
// as that store did, and writes on after them (event sequence numbers
// continue; sessions, policies and requests keep their rules).
func TestOpenDatabaseOfPreviousRelease(t *testing.T) {
	rows, err := os.ReadFile(filepath.Join("testdata", "release5", "rows.sql"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "release5", "want.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			ctx := t.Context()
			db := openTest(t, oldDatabase(t, b, 5, string(rows)))
			checkMigrations(t, db)

			var got release5
			rs, _, err := db.ListRequests(ctx, store.Filter{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				got.Requests = append(got.Requests, release5Request{r, r.ValidFor.Milliseconds()})
			}
			if got.Events, err = db.Events(ctx, 0, 1000); err != nil {
				t.Fatal(err)
			}
			for _, id := range []session.ID{"s1", "s2", "s3"} {
				s, err := db.GetSession(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				got.Sessions = append(got.Sessions, s)
			}
			for n := int64(1); n <= 2; n++ {
				p, err := db.GetPolicy(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				got.Policies = append(got.Policies, p)
			}
			text, err := json.MarshalIndent(got, "", "\t")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(text)+"\n"); diff != "" {
				t.Fatalf("reads of the old rows differ from the old store's (-old +new):\n%s", diff)
			}

			// The pending count kept by triggers starts from the old rows,
			// and the change feed returns the old events in their order.
			pendingRows := 0
			for _, r := range rs {
				if r.State == approval.StatePending && (r.Kind == "" || r.Kind == approval.KindToolCall) {
					pendingRows++
				}
			}
			if n, err := db.CountPending(ctx, ""); err != nil || n != pendingRows {
				t.Errorf("CountPending = %d, %v; want %d, as counted in the old rows", n, err, pendingRows)
			}
			if feed, _, err := db.Feed(ctx, store.Cursor{}, 1000); err != nil || !slices.Equal(seqs(feed), seqs(got.Events)) {
				t.Errorf("Feed of the old events = %v, %v; want seqs %v", seqs(feed), err, seqs(got.Events))
			}

			// Writing on: new events follow the old ones.
			lastSeq := got.Events[len(got.Events)-1].Seq
			at := t0.Add(time.Hour)
			r := pendingRequest(testID(100))
			r.CreatedAt, r.ExpiresAt = at, at.Add(10*time.Minute)
			if err := db.CreateRequest(ctx, r); err != nil {
				t.Fatal(err)
			}
			const approved = approval.ID("01900000-0000-7000-8000-000000000006")
			if _, err := db.UpdateRequest(ctx, approved, "gw-2", func(r *approval.Request) error {
				return r.Consume(r.Binding(), "", r.DecidedAt.Add(time.Minute))
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.AppendPolicy(ctx, 2, store.PolicyRevision{Policy: "default: deny\n", Digest: "sha256:03", CreatedAt: at}, "ops-admin"); err != nil {
				t.Fatal(err)
			}
			child := session.Session{ID: "s4", ParentID: "s1", Principal: session.PrincipalID("s4"), TokenHash: "04", Mode: session.ModeDefault, Revision: 1, CreatedAt: at}
			if err := db.CreateSession(ctx, child, "session:s1"); err != nil {
				t.Fatal(err)
			}
			child.ID, child.ParentID, child.Principal, child.TokenHash = "s5", "s3", session.PrincipalID("s5"), "05"
			if err := db.CreateSession(ctx, child, "session:s3"); !errors.Is(err, session.ErrRevoked) {
				t.Errorf("CreateSession under the revoked s3 = %v, want ErrRevoked", err)
			}
			evs, err := db.Events(ctx, lastSeq, 0)
			if err != nil {
				t.Fatal(err)
			}
			var gotNew []string
			for _, ev := range evs {
				gotNew = append(gotNew, fmt.Sprintf("%d %s %s%s", ev.Seq-lastSeq, ev.Type, ev.RequestID, ev.SessionID))
			}
			wantNew := []string{
				"1 requested " + string(r.ID),
				"2 consumed " + string(approved),
				"3 policy_changed ",
				"4 child_created s4",
			}
			if diff := cmp.Diff(wantNew, gotNew); diff != "" {
				t.Errorf("events written after the old ones (-want +got):\n%s", diff)
			}
			if p, err := db.CurrentPolicy(ctx); err != nil || p.Revision != 3 {
				t.Errorf("CurrentPolicy = revision %d, %v; want 3", p.Revision, err)
			}
			if n, err := db.CountPending(ctx, ""); err != nil || n != pendingRows+1 {
				t.Errorf("CountPending after one more request = %d, %v; want %d", n, err, pendingRows+1)
			}
		})
	}
}

// TestSessionsMigrationKeepsEvents upgrades a version-2 database with
// events to the newest version (SQLite rebuilds the events table in
// versions 3 and 5): the old events keep their seq (on SQLite, with gaps,
// so the AUTOINCREMENT position is kept too), and new events continue
// after them.
func TestSessionsMigrationKeepsEvents(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			// Postgres numbers events itself (GENERATED ALWAYS).
			seqs, want := []int{0, 0}, []string{"1 requested r1", "2 cancelled r1", "3 " + string(approval.EventSessionCreated) + " s1"}
			if b.driver == DriverSQLite {
				seqs, want = []int{7, 9}, []string{"7 requested r1", "9 cancelled r1", "10 " + string(approval.EventSessionCreated) + " s1"}
			}
			cfg := oldDatabase(t, b, 2, `INSERT INTO requests (id, state, server, tool, arguments_hash, display_warnings, tool_digest,
			rule, mode, requested_by, on_behalf_of, tenant, created_at, expires_at, required_approvals, approvers, valid_for_ms,
			reviews, decided_by, reason, dispatch_outcome, held_by) VALUES
			('r1', 'cancelled', 's', 't', 'h', 'null', 'd', 'rule', 'hold', 'a', '', '', 1, 2, 1, 'null', 0, 'null', '', '', '', '');`+
				eventInsert(seqs[0], `'r1', 'requested', 'pending', 'a', 1`)+eventInsert(seqs[1], `'r1', 'cancelled', 'cancelled', 'a', 2`))
			db := openTest(t, cfg)
			s := session.Session{ID: "s1", Principal: "session:s1", TokenHash: "h1", Mode: session.ModeDefault, Revision: 1, CreatedAt: t0, CreatedBy: "host"}
			if err := db.CreateSession(t.Context(), s, "host"); err != nil {
				t.Fatal(err)
			}
			evs, err := db.Events(t.Context(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				got = append(got, fmt.Sprintf("%d %s %s%s", ev.Seq, ev.Type, ev.RequestID, ev.SessionID))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events after the migration mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// eventInsert inserts an event of schema version 2 with the given values
// of request_id, type, state, actor and at, and seq unless it is 0.
func eventInsert(seq int, values string) string {
	if seq == 0 {
		return `INSERT INTO events (request_id, type, state, actor, at) VALUES (` + values + `);`
	}
	return fmt.Sprintf(`INSERT INTO events (seq, request_id, type, state, actor, at) VALUES (%d, %s);`, seq, values)
}

// TestOpenRefusesNewerSchema: a database migrated by a newer binary is not
// touched.
func TestOpenRefusesNewerSchema(t *testing.T) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) {
			cfg := b.fresh(t)
			db := openTest(t, cfg)
			if _, err := db.sql.ExecContext(t.Context(), `INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 0)`); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			db2, err := Open(ctx, cfg)
			if err == nil {
				_ = db2.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Open = %v; a newer schema is not an outage", err)
			}
		})
	}
}
