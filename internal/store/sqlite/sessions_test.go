package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/session"
)

// TestSessionsMigrationKeepsEvents upgrades a version-2 database with
// events to version 3 (the events table is rebuilt): the old events keep
// their seq, and new events continue after them.
func TestSessionsMigrationKeepsEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	raw, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(ON)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(t.Context(), `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version > 2 {
			break
		}
		if _, err := raw.ExecContext(t.Context(), m.sql); err != nil {
			t.Fatalf("apply %s: %v", m.name, err)
		}
		if _, err := raw.ExecContext(t.Context(), `INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.version, m.name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.ExecContext(t.Context(), `INSERT INTO requests (id, state, server, tool, arguments_hash, display_warnings, tool_digest,
		rule, mode, requested_by, on_behalf_of, tenant, created_at, expires_at, required_approvals, approvers, valid_for_ms,
		reviews, decided_by, reason, dispatch_outcome, held_by) VALUES
		('r1', 'cancelled', 's', 't', 'h', 'null', 'd', 'rule', 'hold', 'a', '', '', 1, 2, 1, 'null', 0, 'null', '', '', '', '')`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(t.Context(), `INSERT INTO events (seq, request_id, type, state, actor, at) VALUES
		(7, 'r1', 'requested', 'pending', 'a', 1), (9, 'r1', 'cancelled', 'cancelled', 'a', 2)`); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	db := openTest(t, path)
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
	want := []string{"7 requested r1", "9 cancelled r1", "10 " + string(approval.EventSessionCreated) + " s1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events after the migration mismatch (-want +got):\n%s", diff)
	}
}
