package sqlstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

// pendingCounts reads, on Postgres, the pending total the caps read and the
// number of pending tool-call rows it stands for.
func pendingCounts(t *testing.T, db *DB) (total, rows int) {
	t.Helper()
	ctx := t.Context()
	if err := db.sql.QueryRowContext(ctx, pendingTotal).Scan(&total); err != nil {
		t.Fatalf("read pending total: %v", err)
	}
	if err := db.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM requests WHERE `+pendingToolCalls).Scan(&rows); err != nil {
		t.Fatalf("count pending rows: %v", err)
	}
	return total, rows
}

// createCapped creates a pending request with id testID(n) under a total
// cap of limit and returns the pending count of its CapError (-1: created).
func createCapped(t *testing.T, db *DB, n, limit int) int {
	t.Helper()
	err := db.CreateRequest(t.Context(), pendingRequest(testID(n)), store.Cap{Scope: store.CapTotal, Limit: limit, Name: "total"})
	var ce *store.CapError
	switch {
	case err == nil:
		return -1
	case errors.As(err, &ce):
		return ce.Pending
	default:
		t.Fatalf("CreateRequest = %v", err)
		return 0
	}
}

// TestPendingCountShardsMigration migrates a Postgres database at schema
// version 15 holding pending and settled requests to 0016: the total the
// caps read is the same before and after, the total cap answers as before,
// and the new triggers count creations and decisions from then on.
func TestPendingCountShardsMigration(t *testing.T) {
	pgtest.DSN(t)
	b := backends[1]
	cfg := oldDatabase(t, b, 15, `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 50)
		INSERT INTO requests (id, state, server, tool, arguments, arguments_hash, display_warnings, tool_digest, rule,
			mode, requested_by, on_behalf_of, tenant, created_at, expires_at, required_approvals, approvers,
			valid_for_ms, reviews, decided_by, decided_at, reason, consumed_at, dispatch_outcome, held_by, lease_until)
		SELECT 'old-' || i, 'pending', 's', 't', '{}', 'sha256:00', '[]', '', 'r', 'hold', 'agent', '', '', i, 9000000000000, 1,
			'[]', 0, '[]', '', 0, '', 0, '', '', 0
		FROM c;
		UPDATE requests SET state = 'approved', decided_by = 'alice', decided_at = 1 WHERE id IN (SELECT 'old-' || i FROM generate_series(1, 10) AS i);`)
	db := openTest(t, cfg)
	var version, shards int
	if err := db.sql.QueryRowContext(t.Context(), `SELECT MAX(version) FROM schema_migrations`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := db.sql.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM pending_counts`).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	if version < 16 || shards != 256 {
		t.Fatalf("after migrating: schema version %d with %d shards, want at least 16 with 256", version, shards)
	}
	if total, rows := pendingCounts(t, db); total != 40 || rows != 40 {
		t.Fatalf("after migrating: pending total %d for %d pending rows, want 40 and 40", total, rows)
	}
	if got := createCapped(t, db, 1, 40); got != 40 {
		t.Fatalf("create under a total cap of 40 with 40 pending: got %d, want a CapError at 40", got)
	}
	if got := createCapped(t, db, 1, 41); got != -1 {
		t.Fatalf("create under a total cap of 41 with 40 pending: CapError at %d, want created", got)
	}
	if got := createCapped(t, db, 2, 41); got != 41 {
		t.Fatalf("create under a total cap of 41 with 41 pending: got %d, want a CapError at 41", got)
	}
	if _, err := db.UpdateRequest(t.Context(), "old-11", "alice", func(r *approval.Request) error {
		return r.Review(approval.Reviewer{ID: "alice"}, approval.VerdictDeny, "no", "", t0)
	}); err != nil {
		t.Fatalf("deny old-11: %v", err)
	}
	if got := createCapped(t, db, 2, 41); got != -1 {
		t.Fatalf("create under a total cap of 41 after a denial: CapError at %d, want created", got)
	}
	if total, rows := pendingCounts(t, db); total != 41 || rows != 41 {
		t.Errorf("pending total %d for %d pending rows, want 41 and 41", total, rows)
	}
}

// TestPendingCountShardsFresh checks a fresh Postgres database has the
// 256 shards, all zero, and counts a creation.
func TestPendingCountShardsFresh(t *testing.T) {
	pgtest.DSN(t)
	db := openTest(t, backends[1].fresh(t))
	var shards, nonzero int
	if err := db.sql.QueryRowContext(t.Context(), `SELECT COUNT(*), COUNT(*) FILTER (WHERE created <> 0 OR settled <> 0) FROM pending_counts`).Scan(&shards, &nonzero); err != nil {
		t.Fatal(err)
	}
	if shards != 256 || nonzero != 0 {
		t.Fatalf("fresh database: %d shards, %d non-zero, want 256 and 0", shards, nonzero)
	}
	if got := createCapped(t, db, 1, 1); got != -1 {
		t.Fatalf("first create under a cap of 1: CapError at %d", got)
	}
	if got := createCapped(t, db, 2, 1); got != 1 {
		t.Fatalf("second create under a cap of 1: got %d, want a CapError at 1", got)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSettlingManyDoesNotDeadlock revokes several sessions, each with many
// pending requests, at once while other requests are approved: each
// revocation settles all its session's requests in one transaction,
// taking shard rows (0007: up to 16, in its requests' id order; 0016: its
// connection's one, at commit). A deadlock is aborted by Postgres and
// retried by the store, whose debug line names SQLSTATE 40P01: none may
// appear, and the pending total must match the pending rows after. (It
// passes under 0007 too: revocations are serialised by the sessions lock
// and lock their request rows before they write; with that sessions lock
// removed it fails under 0007 and passes under 0016.)
func TestSettlingManyDoesNotDeadlock(t *testing.T) {
	pgtest.DSN(t)
	var logs syncBuffer
	cfg := backends[1].fresh(t)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db := openTest(t, cfg)
	ctx := t.Context()
	const (
		rounds, sessions, perSession, approvals = 3, 4, 48, 16
	)
	n := 0
	for round := range rounds {
		var roots []session.Session
		for s := range sessions {
			k := round*sessions + s + 1
			id := session.ID(fmt.Sprintf("0190ffff-0000-7000-8000-%012x", k))
			root := session.Session{
				ID: id, Principal: session.PrincipalID(id), OnBehalfOf: "carol", Tenant: "acme",
				TokenHash: fmt.Sprintf("%064x", k), Mode: session.ModeExplicit, Tools: []string{"pay"},
				Revision: 1, CreatedAt: t0, CreatedBy: "host-app",
			}
			if err := db.CreateSession(ctx, root, "host-app"); err != nil {
				t.Fatalf("CreateSession = %v", err)
			}
			roots = append(roots, root)
			for range perSession {
				n++
				r := pendingRequest(testID(n))
				r.RequestedBy = root.Principal
				if err := db.CreateRequest(ctx, r); err != nil {
					t.Fatalf("CreateRequest = %v", err)
				}
			}
		}
		var others []approval.ID
		for range approvals {
			n++
			if err := db.CreateRequest(ctx, pendingRequest(testID(n))); err != nil {
				t.Fatalf("CreateRequest = %v", err)
			}
			others = append(others, testID(n))
		}
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for _, root := range roots {
			wg.Go(func() {
				<-start
				if _, err := db.RevokeSession(ctx, root.ID, "host-app", t0.Add(time.Minute)); err != nil {
					t.Errorf("RevokeSession = %v", err)
				}
			})
		}
		for _, id := range others {
			wg.Go(func() {
				<-start
				if _, err := db.UpdateRequest(ctx, id, "alice", func(r *approval.Request) error {
					return r.Review(approval.Reviewer{ID: "alice"}, approval.VerdictApprove, "ok", "", t0.Add(time.Second))
				}); err != nil {
					t.Errorf("approve %s: %v", id, err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	if l := logs.String(); strings.Contains(l, "40P01") {
		t.Errorf("a transaction deadlocked (and was retried):\n%s", firstLines(l, "40P01", 3))
	}
	if total, rows := pendingCounts(t, db); total != rows || rows != 0 {
		t.Errorf("pending total %d for %d pending rows, want 0 and 0", total, rows)
	}
}

// firstLines returns up to max lines of s that contain sub.
func firstLines(s, sub string, max int) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) && len(out) < max {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
