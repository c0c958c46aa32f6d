package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// testCreateGet checks that every field round-trips: the create-time fields
// through CreateRequest, the rest through UpdateRequest, whose returned
// value must equal what GetRequest reads back.
func testCreateGet(t *testing.T, s store.Store) {
	r := pending(id(1, 1))
	// Not sorted, not canonical, with a number past 2^53: stored byte for byte.
	r.Arguments = json.RawMessage(`{"to":"acct-9","amount":12345678901234567890,"memo":"caf\u00e9 ☕","a":[1.50,true,null]}`)
	r.DisplayWarnings = []string{"memo: zero-width character escaped", "token: value redacted (bearer token)"}
	r.Approvers = []string{"bob", "group:ops"}
	r.RequiredApprovals = 2
	r.ValidFor = 90*time.Second + 500*time.Millisecond
	r.Reviews = []approval.Review{{By: "bob", Verdict: approval.VerdictApprove, Reason: "ok by me", At: t0.Add(time.Second)}}
	r.HeldBy = "gw-1"
	r.LeaseUntil = t0.Add(30 * time.Second)
	mustCreate(t, s, r)
	diffRequests(t, "GetRequest after CreateRequest", r, mustGet(t, s, r.ID))
	if v, err := s.ViewRequest(t.Context(), r.ID); err != nil {
		t.Fatalf("ViewRequest(%s) = %v", r.ID, err)
	} else {
		diffRequests(t, "ViewRequest after CreateRequest", r, v)
	}
	if _, err := s.ViewRequest(t.Context(), id(1, 99)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ViewRequest of an unknown id = %v, want ErrNotFound", err)
	}

	want := r
	want.State = approval.StateConsumed
	want.Reviews = append(append([]approval.Review(nil), r.Reviews...),
		approval.Review{By: "alice", Verdict: approval.VerdictApprove, Reason: "second", At: t0.Add(2 * time.Second)})
	want.DecidedBy = "alice"
	want.DecidedAt = t0.Add(2 * time.Second)
	want.Reason = "second"
	want.ConsumedAt = t0.Add(3 * time.Second)
	want.DispatchOutcome = approval.OutcomeToolError
	want.HeldBy = "gw-2"
	want.LeaseUntil = t0.Add(45 * time.Second)
	want.AnsweredAt = t0.Add(50 * time.Second)
	want.Kind = approval.KindSessionPolicy
	want.Target = "0190aaaa-0000-7000-8000-000000000001"
	want.BaseRevision = 7
	want.PolicyRevision = "sha256:5e1f"
	want.ConsumeToken = "K4ZQ7T2XWJ3M5N6P8R9S2T3V4W"
	want.TimeoutRule = "strictest"
	want.NoGrants = true
	requireAllSet(t, want)
	got := mustUpdate(t, s, r.ID, "alice", func(cur *approval.Request) error {
		*cur = want
		cur.Reviews = append([]approval.Review(nil), want.Reviews...)
		return nil
	})
	diffRequests(t, "UpdateRequest result", want, got)
	diffRequests(t, "GetRequest after UpdateRequest", want, mustGet(t, s, r.ID))

	// A minimal request: nil slices and zero optional times stay empty.
	m := pending(id(1, 2))
	m.Arguments = json.RawMessage(`{}`)
	m.OnBehalfOf, m.Mode, m.Rule = "", "", ""
	m.ValidFor = 0
	mustCreate(t, s, m)
	diffRequests(t, "GetRequest of a minimal request", m, mustGet(t, s, m.ID))
}

func testAlreadyExists(t *testing.T, s store.Store) {
	r := pending(id(1, 1))
	mustCreate(t, s, r)
	dup := r
	dup.Tool = "refund"
	dup.RequestedBy = "laptop"
	if err := s.CreateRequest(t.Context(), dup); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second CreateRequest(%s) = %v, want ErrAlreadyExists", r.ID, err)
	}
	diffRequests(t, "GetRequest after a duplicate create", r, mustGet(t, s, r.ID))
	if got := types(allEvents(t, s)); !cmp.Equal(got, []approval.EventType{approval.EventRequested}) {
		t.Errorf("events = %v, want one requested event", got)
	}
}

func testNotFound(t *testing.T, s store.Store) {
	mustCreate(t, s, pending(id(1, 1)))
	missing := id(1, 2)
	if _, err := s.GetRequest(t.Context(), missing); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRequest(missing) = %v, want ErrNotFound", err)
	}
	called := false
	_, err := s.UpdateRequest(t.Context(), missing, "bob", func(r *approval.Request) error {
		called = true
		return nil
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateRequest(missing) = %v, want ErrNotFound", err)
	}
	if called {
		t.Error("UpdateRequest(missing) called fn")
	}
}

func testList(t *testing.T, s store.Store) {
	type fixture struct {
		id      approval.ID
		by      string
		tenant  string
		verdict approval.Verdict // "" stays pending
	}
	// Created out of id order: listing follows creation (list order,
	// store.ListPosition), not ids, which come from the creating
	// instance's clock.
	fixtures := []fixture{
		{id(3, 1), "desktop", "acme", ""},
		{id(1, 2), "desktop", "acme", approval.VerdictApprove},
		{id(2, 2), "laptop", "globex", approval.VerdictDeny},
		{id(1, 1), "desktop", "acme", ""},
		{id(2, 1), "desktop", "globex", ""},
		{id(1, 3), "laptop", "acme", ""},
	}
	for _, f := range fixtures {
		r := pending(f.id)
		r.RequestedBy, r.Tenant = f.by, f.tenant
		mustCreate(t, s, r)
		if f.verdict != "" {
			mustReview(t, s, f.id, "bob", f.verdict, t0.Add(time.Minute))
		}
	}
	all := []approval.ID{id(3, 1), id(1, 2), id(2, 2), id(1, 1), id(2, 1), id(1, 3)}
	tests := []struct {
		name   string
		filter store.Filter
		want   []approval.ID
	}{
		{"all", store.Filter{}, all},
		{"state", store.Filter{State: approval.StatePending}, []approval.ID{id(3, 1), id(1, 1), id(2, 1), id(1, 3)}},
		{"requested by", store.Filter{RequestedBy: "laptop"}, []approval.ID{id(2, 2), id(1, 3)}},
		{"tenant", store.Filter{Tenant: "globex"}, []approval.ID{id(2, 2), id(2, 1)}},
		{"id prefix", store.Filter{IDPrefix: groupPrefix(1)}, []approval.ID{id(1, 2), id(1, 1), id(1, 3)}},
		{"whole id as prefix", store.Filter{IDPrefix: string(id(2, 1))}, []approval.ID{id(2, 1)}},
		{"prefix and state", store.Filter{IDPrefix: groupPrefix(1), State: approval.StateApproved}, []approval.ID{id(1, 2)}},
		{"tenant and requester", store.Filter{Tenant: "acme", RequestedBy: "desktop"}, []approval.ID{id(3, 1), id(1, 2), id(1, 1)}},
		{"no match", store.Filter{State: approval.StateConsumed}, nil},
		{"unknown prefix", store.Filter{IDPrefix: "ffff"}, nil},
		{"limit 2", store.Filter{Limit: 2}, all},
		{"limit 4", store.Filter{Limit: 4}, all},
		{"limit 3 pending", store.Filter{Limit: 3, State: approval.StatePending}, []approval.ID{id(3, 1), id(1, 1), id(2, 1), id(1, 3)}},
		{"limit exact", store.Filter{Limit: 6}, all},
		{"limit above count", store.Filter{Limit: 7}, all},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := listAll(t, s, tc.filter)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ids mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// listAll follows cursors from the first page to the last and returns the
// ids in order, checking the size of every page: full pages until the last,
// which has next == "" and is not empty unless nothing matches.
func listAll(t *testing.T, s store.Store, f store.Filter) []approval.ID {
	t.Helper()
	limit := f.Limit
	if limit == 0 {
		limit = 100
	}
	var ids []approval.ID
	for page := 0; ; page++ {
		rs, next, err := s.ListRequests(t.Context(), f)
		if err != nil {
			t.Fatalf("ListRequests(%+v) = %v", f, err)
		}
		if len(rs) > limit {
			t.Fatalf("page %d has %d requests, limit %d", page, len(rs), limit)
		}
		if next != "" && len(rs) != limit {
			t.Fatalf("page %d has %d requests and a next cursor; only full pages have one", page, len(rs))
		}
		if page > 0 && len(rs) == 0 {
			t.Fatalf("page %d is empty: the previous page should have had no next cursor", page)
		}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		if next == "" {
			return ids
		}
		if page > 100 {
			t.Fatal("more than 100 pages: the cursor does not advance")
		}
		f.Cursor = next
	}
}

func testListDefaultLimit(t *testing.T, s store.Store) {
	for n := range 101 {
		mustCreate(t, s, pending(id(1, n)))
	}
	rs, next, err := s.ListRequests(t.Context(), store.Filter{})
	if err != nil {
		t.Fatalf("ListRequests = %v", err)
	}
	if len(rs) != 100 || next == "" {
		t.Fatalf("first page: %d requests, next %q; want 100 and a cursor", len(rs), next)
	}
	rs, next, err = s.ListRequests(t.Context(), store.Filter{Cursor: next})
	if err != nil {
		t.Fatalf("ListRequests(second page) = %v", err)
	}
	if len(rs) != 1 || rs[0].ID != id(1, 100) || next != "" {
		t.Fatalf("second page: %d requests, next %q; want only %s and no cursor", len(rs), next, id(1, 100))
	}
}

// testTimesRoundTripUTCms stores times in a non-UTC zone with nanoseconds
// and expects them back in UTC, truncated to the millisecond.
func testTimesRoundTripUTCms(t *testing.T, s store.Store) {
	zone := time.FixedZone("IST", 5*3600+30*60)
	at := func(d time.Duration) time.Time {
		return time.Date(2026, 3, 1, 17, 30, 0, 123456789, zone).Add(d)
	}
	ms := func(d time.Duration) time.Time {
		return time.Date(2026, 3, 1, 12, 0, 0, 123000000, time.UTC).Add(d)
	}
	r := pending(id(1, 1))
	r.CreatedAt = at(0)
	r.ExpiresAt = at(10*time.Minute + 543210*time.Nanosecond) // .123999999 s: still .123
	r.LeaseUntil = at(30 * time.Second)
	r.RequiredApprovals = 2
	r.Reviews = []approval.Review{{By: "bob", Verdict: approval.VerdictApprove, At: at(time.Second)}}
	mustCreate(t, s, r)
	updated := mustUpdate(t, s, r.ID, "alice", func(cur *approval.Request) error {
		if err := cur.Review(reviewer("alice"), approval.VerdictApprove, "", "", at(2*time.Second+1)); err != nil {
			return err
		}
		return cur.Consume(cur.Binding(), "", at(3*time.Second+999))
	})
	got := mustGet(t, s, r.ID)
	for _, c := range []struct {
		what string
		r    approval.Request
	}{{"UpdateRequest result", updated}, {"GetRequest", got}} {
		if len(c.r.Reviews) != 2 {
			t.Fatalf("%s: %d reviews, want 2", c.what, len(c.r.Reviews))
		}
		tests := []struct {
			name      string
			got, want time.Time
		}{
			{"CreatedAt", c.r.CreatedAt, ms(0)},
			{"ExpiresAt", c.r.ExpiresAt, ms(10 * time.Minute)},
			{"LeaseUntil", c.r.LeaseUntil, ms(30 * time.Second)},
			{"Reviews[0].At", c.r.Reviews[0].At, ms(time.Second)},
			{"Reviews[1].At", c.r.Reviews[1].At, ms(2 * time.Second)},
			{"DecidedAt", c.r.DecidedAt, ms(2 * time.Second)},
			{"ConsumedAt", c.r.ConsumedAt, ms(3 * time.Second)},
		}
		for _, tc := range tests {
			checkUTCms(t, c.what+" "+tc.name, tc.got, tc.want)
		}
	}
	evs := eventsOf(allEvents(t, s), r.ID)
	for _, ev := range evs {
		checkUTCms(t, fmt.Sprintf("event %d (%s) At", ev.Seq, ev.Type), ev.At, ev.At.Truncate(time.Millisecond))
	}
	if len(evs) == 0 || !evs[0].At.Equal(ms(0)) {
		t.Errorf("requested event = %+v, want At %v", evs, ms(0))
	}
}

func checkUTCms(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
	if got.Location() != time.UTC {
		t.Errorf("%s is in %v, want UTC", what, got.Location())
	}
}

func testCountPending(t *testing.T, s store.Store) {
	n := 0
	create := func(by string) approval.ID {
		n++
		r := pending(id(1, n))
		r.RequestedBy = by
		mustCreate(t, s, r)
		return r.ID
	}
	create("desktop")
	create("desktop")
	approved := create("desktop")
	create("laptop")
	denied := create("laptop")
	mustReview(t, s, approved, "bob", approval.VerdictApprove, t0.Add(time.Minute))
	mustReview(t, s, denied, "bob", approval.VerdictDeny, t0.Add(time.Minute))
	tests := []struct {
		name, by string
		want     int
	}{
		{"total", "", 3},
		{"desktop", "desktop", 2},
		{"laptop", "laptop", 1},
		{"nobody", "ghost", 0},
	}
	for _, tc := range tests {
		got, err := s.CountPending(t.Context(), tc.by)
		if err != nil {
			t.Fatalf("CountPending(%q) = %v", tc.by, err)
		}
		if got != tc.want {
			t.Errorf("CountPending(%q) = %d, want %d", tc.by, got, tc.want)
		}
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping = %v", err)
	}
}

func testListByKind(t *testing.T, s store.Store) {
	tool := pending(id(1, 1))
	tool.Kind = ""
	mustCreate(t, s, tool)
	// Session policy requests need their target session, at their base
	// revision.
	s1, s2 := rootSession(1), rootSession(2)
	mustCreateSession(t, s, s1, "host-app")
	mustCreateSession(t, s, s2, "host-app")
	sp := pending(id(1, 2))
	sp.Kind, sp.Target, sp.BaseRevision = approval.KindSessionPolicy, string(s1.ID), 1
	mustCreate(t, s, sp)
	sp2 := pending(id(1, 3))
	sp2.Kind, sp2.Target, sp2.BaseRevision = approval.KindSessionPolicy, string(s2.ID), 1
	mustCreate(t, s, sp2)
	ids := func(f store.Filter) []approval.ID {
		rs, _, err := s.ListRequests(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		var out []approval.ID
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids(store.Filter{Kind: approval.KindToolCall}); len(got) != 1 || got[0] != tool.ID {
		t.Errorf("kind tool_call: %v, want [%s]", got, tool.ID)
	}
	if got := ids(store.Filter{Kind: approval.KindSessionPolicy, Target: string(s2.ID)}); len(got) != 1 || got[0] != sp2.ID {
		t.Errorf("kind session_policy, target %s: %v, want [%s]", s2.ID, got, sp2.ID)
	}
	if n, err := s.CountPending(t.Context(), ""); err != nil || n != 1 {
		t.Errorf("CountPending = %d, %v; want 1 (tool calls only)", n, err)
	}
	// Held resource reads and prompt gets are agent requests too: they count
	// against the pending caps (issue 10).
	for i, k := range []string{approval.KindResourceRead, approval.KindPromptGet} {
		r := pending(id(1, 4+i))
		r.Kind = k
		mustCreate(t, s, r)
	}
	if n, err := s.CountPending(t.Context(), ""); err != nil || n != 3 {
		t.Errorf("CountPending = %d, %v; want 3 (tool calls, resource reads and prompt gets)", n, err)
	}
}
