package sqlstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/pgtest"
)

func TestPGCreatable(t *testing.T) {
	r := pendingRequest(testID(1)) // requested by desktop
	own := store.Cap{Scope: store.CapPrincipal, Key: "desktop", Limit: 8, Name: "own"}
	total := store.Cap{Scope: store.CapTotal, Limit: 100, Name: "total"}
	policy := r
	policy.Kind = approval.KindSessionPolicy
	for _, tc := range []struct {
		name string
		r    approval.Request
		caps []store.Cap
		want bool
	}{
		{"principal and total", r, []store.Cap{own, total}, true},
		{"total and principal", r, []store.Cap{total, own}, true},
		{"no caps", r, nil, false},
		{"total only", r, []store.Cap{total}, false},
		{"another principal's cap", r, []store.Cap{{Scope: store.CapPrincipal, Key: "phone", Limit: 8}, total}, false},
		{"a session tree", r, []store.Cap{{Scope: store.CapSessionTree, Key: "s1", Limit: 8}, total}, false},
		{"two totals", r, []store.Cap{total, total}, false},
		{"a zero limit", r, []store.Cap{own, {Scope: store.CapTotal}}, false},
		{"a session policy request", policy, []store.Cap{own, total}, false},
	} {
		o, tl, ok := pgCreatable(tc.r, tc.caps)
		if ok != tc.want {
			t.Errorf("%s: ok = %v, want %v", tc.name, ok, tc.want)
		}
		if ok && (o != own || tl != total) {
			t.Errorf("%s: caps %+v, %+v; want %+v, %+v", tc.name, o, tl, own, total)
		}
	}
}

// TestPipelinedCreate: the pipelined creation (pgCreate) stores the
// request and its "requested" event; each of the general transaction's
// refusals (the principal's cap, the total, a session's principal, an id
// taken) makes it write nothing and return errPGCreateRefused, and
// CreateRequest then reports the refusal as the general path does.
func TestPipelinedCreate(t *testing.T) {
	db := openTest(t, postgresConfig(pgtest.Fresh(t)))
	pg := db.d.(*postgresDialect)
	ctx := t.Context()
	own := store.Cap{Scope: store.CapPrincipal, Key: "desktop", Limit: 2, Name: "own"}
	total := store.Cap{Scope: store.CapTotal, Limit: 3, Name: "total"}
	create := func(r approval.Request) error {
		t.Helper()
		w, err := encodeRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		return db.pgCreate(ctx, pg, r, w, own, total)
	}
	events := func() int {
		t.Helper()
		evs, err := db.Events(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}

	r1 := pendingRequest(testID(1))
	if err := create(r1); err != nil {
		t.Fatalf("pgCreate = %v", err)
	}
	got, err := db.GetRequest(ctx, r1.ID)
	if err != nil || got.State != approval.StatePending || got.RequestedBy != "desktop" || got.ExpiresAt != r1.ExpiresAt {
		t.Fatalf("GetRequest = %+v, %v", got, err)
	}
	evs, err := db.Events(ctx, 0, 100)
	if err != nil || len(evs) != 1 || evs[0].RequestID != r1.ID || evs[0].Type != approval.EventRequested {
		t.Fatalf("events = %+v, %v; want r1's requested event", evs, err)
	}

	// The id taken: refused, and CreateRequest says it exists.
	if err := create(r1); !errors.Is(err, errPGCreateRefused) {
		t.Errorf("pgCreate of a taken id = %v, want errPGCreateRefused", err)
	}
	if err := db.CreateRequest(ctx, r1, own, total); !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("CreateRequest of a taken id = %v, want ErrAlreadyExists", err)
	}

	// The principal's cap (2).
	if err := create(pendingRequest(testID(2))); err != nil {
		t.Fatal(err)
	}
	r3 := pendingRequest(testID(3))
	if err := create(r3); !errors.Is(err, errPGCreateRefused) {
		t.Errorf("pgCreate over the principal's cap = %v, want errPGCreateRefused", err)
	}
	var ce *store.CapError
	if err := db.CreateRequest(ctx, r3, own, total); !errors.As(err, &ce) || ce.Cap.Name != "own" || ce.Pending != 2 {
		t.Errorf("CreateRequest over the principal's cap = %v, want the CapError of own with 2 pending", err)
	}

	// The total (3): another principal's third pending request fits, its
	// fourth does not.
	phone := pendingRequest(testID(4))
	phone.RequestedBy = "phone"
	phoneCap := store.Cap{Scope: store.CapPrincipal, Key: "phone", Limit: 2, Name: "own"}
	if err := db.CreateRequest(ctx, phone, phoneCap, total); err != nil {
		t.Fatal(err)
	}
	phone2 := phone
	phone2.ID = testID(5)
	if err := db.CreateRequest(ctx, phone2, phoneCap, total); !errors.As(err, &ce) || ce.Cap.Name != "total" || ce.Pending != 3 {
		t.Errorf("CreateRequest over the total = %v, want the CapError of total with 3 pending", err)
	}

	// A session's principal: refused here, and the general path checks
	// the session (revoked: refused with session.ErrRevoked).
	ss := session.Session{ID: "s1", Principal: "agent-s1", TokenHash: strings.Repeat("ab", 32), Mode: session.ModeInherited,
		Revision: 1, CreatedAt: t0}
	if err := db.CreateSession(ctx, ss, "host-app"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RevokeSession(ctx, "s1", "alice", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s := pendingRequest(testID(6))
	s.RequestedBy = "agent-s1"
	sOwn := store.Cap{Scope: store.CapPrincipal, Key: "agent-s1", Limit: 2, Name: "own"}
	w, err := encodeRequest(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.pgCreate(ctx, pg, s, w, sOwn, store.Cap{Scope: store.CapTotal, Limit: 100, Name: "total"}); !errors.Is(err, errPGCreateRefused) {
		t.Errorf("pgCreate for a session's principal = %v, want errPGCreateRefused", err)
	}
	if err := db.CreateRequest(ctx, s, sOwn, store.Cap{Scope: store.CapTotal, Limit: 100, Name: "total"}); !errors.Is(err, session.ErrRevoked) {
		t.Errorf("CreateRequest in a revoked session = %v, want session.ErrRevoked", err)
	}

	// Nothing refused was written: r1, r2 and phone's request, 3 events
	// (and the session's).
	n, err := db.CountPending(ctx, "")
	if err != nil || n != 3 {
		t.Errorf("CountPending = %d, %v; want 3", n, err)
	}
	for _, id := range []approval.ID{r3.ID, phone2.ID, s.ID} {
		if _, err := db.GetRequest(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetRequest(%s) = %v, want ErrNotFound", id, err)
		}
	}
	if got := events(); got < 3 {
		t.Errorf("%d events, want at least 3", got)
	}
	// The connections went back to the pool idle, none left in a
	// transaction.
	for _, c := range pg.pool.AcquireAllIdle(ctx) {
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Errorf("a pool connection in transaction status %q after the refusals", st)
		}
		c.Release()
	}
}
