package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// inboxTests are the cases of what the approver inbox needs (issue 14):
// the history filters, newest-first pages, id suffixes, the end of the
// event log and browser sessions.
var inboxTests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"ListInboxFilters", testListInboxFilters},
	{"ListDescending", testListDescending},
	{"WebSessions", testWebSessions},
}

func testListInboxFilters(t *testing.T, s store.Store) {
	type fixture struct {
		id      approval.ID
		server  string
		tool    string
		created time.Duration // after t0
		verdict approval.Verdict
	}
	fixtures := []fixture{
		{id(1, 0xa11ce1), "pay", "transfer", 0, ""},
		{id(1, 0xb0b0b0), "pay", "refund", time.Minute, approval.VerdictApprove},
		{id(2, 0xa11ce1), "fs", "write_file", 2 * time.Minute, approval.VerdictDeny},
		{id(2, 0xc0ffee), "fs", "write_file", 3 * time.Minute, ""},
	}
	for _, f := range fixtures {
		r := pending(f.id)
		r.Server, r.Tool = f.server, f.tool
		r.CreatedAt = t0.Add(f.created)
		r.ExpiresAt = r.CreatedAt.Add(10 * time.Minute)
		mustCreate(t, s, r)
		if f.verdict != "" {
			mustReview(t, s, f.id, "bob", f.verdict, r.CreatedAt.Add(time.Second))
		}
	}
	tests := []struct {
		name   string
		filter store.Filter
		want   []approval.ID
	}{
		{"server", store.Filter{Server: "fs"}, []approval.ID{id(2, 0xa11ce1), id(2, 0xc0ffee)}},
		{"server and tool", store.Filter{Server: "pay", Tool: "refund"}, []approval.ID{id(1, 0xb0b0b0)}},
		{"tool of no server", store.Filter{Tool: "write_file"}, []approval.ID{id(2, 0xa11ce1), id(2, 0xc0ffee)}},
		{"decided", store.Filter{Decided: true}, []approval.ID{id(1, 0xb0b0b0), id(2, 0xa11ce1)}},
		{"state wins over decided", store.Filter{Decided: true, State: approval.StatePending}, []approval.ID{id(1, 0xa11ce1), id(2, 0xc0ffee)}},
		{"created from (inclusive)", store.Filter{CreatedFrom: t0.Add(2 * time.Minute)}, []approval.ID{id(2, 0xa11ce1), id(2, 0xc0ffee)}},
		{"created before (exclusive)", store.Filter{CreatedBefore: t0.Add(time.Minute)}, []approval.ID{id(1, 0xa11ce1)}},
		{"created in a window", store.Filter{CreatedFrom: t0.Add(30 * time.Second), CreatedBefore: t0.Add(150 * time.Second)}, []approval.ID{id(1, 0xb0b0b0), id(2, 0xa11ce1)}},
		{"id suffix", store.Filter{IDSuffix: "a11ce1"}, []approval.ID{id(1, 0xa11ce1), id(2, 0xa11ce1)}},
		{"unique id suffix", store.Filter{IDSuffix: "c0ffee"}, []approval.ID{id(2, 0xc0ffee)}},
		{"whole id as suffix", store.Filter{IDSuffix: string(id(1, 0xb0b0b0))}, []approval.ID{id(1, 0xb0b0b0)}},
		{"suffix longer than an id", store.Filter{IDSuffix: "0" + string(id(1, 0xb0b0b0))}, nil},
		{"suffix and server", store.Filter{IDSuffix: "a11ce1", Server: "fs"}, []approval.ID{id(2, 0xa11ce1)}},
		{"suffix paged", store.Filter{IDSuffix: "a11ce1", Limit: 1}, []approval.ID{id(1, 0xa11ce1), id(2, 0xa11ce1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, listAll(t, s, tc.filter)); diff != "" {
				t.Errorf("ids mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func testListDescending(t *testing.T, s store.Store) {
	var ids []approval.ID
	for n := range 5 {
		mustCreate(t, s, pending(id(1, n)))
		ids = append(ids, id(1, n))
	}
	mustReview(t, s, id(1, 2), "bob", approval.VerdictDeny, t0.Add(time.Minute))
	slices.Reverse(ids)
	for _, limit := range []int{0, 1, 2, 5} {
		if diff := cmp.Diff(ids, listAll(t, s, store.Filter{Descending: true, Limit: limit})); diff != "" {
			t.Errorf("descending, limit %d: ids mismatch (-want +got):\n%s", limit, diff)
		}
	}
	want := []approval.ID{id(1, 4), id(1, 3), id(1, 1), id(1, 0)}
	if diff := cmp.Diff(want, listAll(t, s, store.Filter{Descending: true, State: approval.StatePending, Limit: 3})); diff != "" {
		t.Errorf("descending pending: ids mismatch (-want +got):\n%s", diff)
	}
}

func testWebSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := store.WebSession{ID: hex64('a'), TokenHash: hex64('1'), Principal: "bob", CreatedAt: t0.Add(123456 * time.Microsecond), ExpiresAt: t0.Add(time.Hour)}
	b := store.WebSession{ID: hex64('b'), TokenHash: hex64('2'), Principal: "alice", CreatedAt: t0, ExpiresAt: t0.Add(2 * time.Hour)}
	for _, ws := range []store.WebSession{a, b} {
		if err := s.CreateWebSession(ctx, ws); err != nil {
			t.Fatalf("CreateWebSession(%s) = %v", ws.Principal, err)
		}
	}
	if err := s.CreateWebSession(ctx, a); !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("CreateWebSession of a taken id = %v, want ErrAlreadyExists", err)
	}
	got, err := s.GetWebSession(ctx, a.ID, t0)
	if err != nil {
		t.Fatalf("GetWebSession = %v", err)
	}
	want := a
	want.CreatedAt = store.Millis(a.CreatedAt)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetWebSession mismatch (-want +got):\n%s", diff)
	}
	if got.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt in %v, want UTC", got.CreatedAt.Location())
	}
	// Expired at its ExpiresAt exactly.
	if _, err := s.GetWebSession(ctx, a.ID, a.ExpiresAt); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetWebSession at its expiry = %v, want ErrNotFound", err)
	}
	if _, err := s.GetWebSession(ctx, hex64('c'), t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetWebSession of an unknown id = %v, want ErrNotFound", err)
	}
	n, err := s.DeleteExpiredWebSessions(ctx, t0.Add(90*time.Minute))
	if err != nil || n != 1 {
		t.Errorf("DeleteExpiredWebSessions = %d, %v; want 1, nil", n, err)
	}
	if _, err := s.GetWebSession(ctx, b.ID, t0); err != nil {
		t.Errorf("the unexpired session was removed: %v", err)
	}
	if err := s.DeleteWebSession(ctx, b.ID); err != nil {
		t.Fatalf("DeleteWebSession = %v", err)
	}
	if _, err := s.GetWebSession(ctx, b.ID, t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetWebSession after sign-out = %v, want ErrNotFound", err)
	}
	if err := s.DeleteWebSession(ctx, b.ID); err != nil {
		t.Errorf("DeleteWebSession of a removed session = %v, want nil", err)
	}
	// Web sessions write no events.
	if evs := allEvents(t, s); len(evs) != 0 {
		t.Errorf("web sessions wrote events: %+v", evs)
	}
}

// hex64 returns 64 copies of c: a hash-shaped id.
func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
