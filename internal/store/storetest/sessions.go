package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
)

// sessionTests are the SessionStore conformance tests; Run runs them too.
var sessionTests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"SessionCreateGet", testSessionCreateGet},
	{"SessionChildAndChain", testSessionChildAndChain},
	{"SessionUpdate", testSessionUpdate},
	{"SessionUpdateWithChain", testSessionUpdateWithChain},
	{"SessionRevoke", testSessionRevoke},
	{"SessionEventsShareTheLog", testSessionEventsShareTheLog},
	{"CountPendingInTree", testCountPendingInTree},
}

// sid returns a UUIDv7-shaped session id.
func sid(n int) session.ID {
	return session.ID(fmt.Sprintf("0190ffff-0000-7000-8000-%012x", n))
}

// rootSession returns a live root session with id sid(n), explicit tools
// {fs, pay__refund}, approval required for fs write_file, created at t0.
func rootSession(n int) session.Session {
	id := sid(n)
	return session.Session{
		ID:         id,
		Principal:  session.PrincipalID(id),
		OnBehalfOf: "carol",
		Tenant:     "acme",
		TokenHash:  fmt.Sprintf("%064x", n),
		Mode:       session.ModeExplicit,
		Tools:      []string{"fs", "pay__refund"},
		RequireApproval: map[string]session.Requirement{
			"fs": {Tools: []string{"write_file"}},
		},
		Revision:  1,
		CreatedAt: t0.Add(123456 * time.Microsecond),
		CreatedBy: "host-app",
	}
}

// childSession returns a child of parent with id sid(n) and the given mode
// and tools.
func childSession(n int, parent session.ID, mode session.Mode, tools []string) session.Session {
	s := rootSession(n)
	s.ParentID = parent
	s.Mode, s.Tools, s.RequireApproval = mode, tools, nil
	s.CreatedBy = session.PrincipalID(parent)
	return s
}

func mustCreateSession(t *testing.T, s store.Store, ss session.Session, actor string) {
	t.Helper()
	if err := s.CreateSession(t.Context(), ss, actor); err != nil {
		t.Fatalf("CreateSession(%s) = %v", ss.ID, err)
	}
}

func sessionEvents(evs []approval.Event) []approval.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(ev approval.Event) bool { return ev.SessionID == "" })
}

func testSessionCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	want := store.NormalizeSession(root)
	got, err := s.GetSession(ctx, root.ID)
	if err != nil {
		t.Fatalf("GetSession = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetSession mismatch (-want +got):\n%s", diff)
	}
	byTok, err := s.SessionByToken(ctx, root.TokenHash)
	if err != nil {
		t.Fatalf("SessionByToken = %v", err)
	}
	if diff := cmp.Diff(want, byTok); diff != "" {
		t.Errorf("SessionByToken mismatch (-want +got):\n%s", diff)
	}

	dupID := rootSession(1)
	dupID.TokenHash = fmt.Sprintf("%064x", 99)
	if err := s.CreateSession(ctx, dupID, "host-app"); !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("CreateSession(same id) = %v, want ErrAlreadyExists", err)
	}
	dupTok := rootSession(2)
	dupTok.TokenHash = root.TokenHash
	if err := s.CreateSession(ctx, dupTok, "host-app"); !errors.Is(err, store.ErrAlreadyExists) {
		t.Errorf("CreateSession(same token) = %v, want ErrAlreadyExists", err)
	}
	if _, err := s.GetSession(ctx, sid(404)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSession(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.SessionByToken(ctx, fmt.Sprintf("%064x", 404)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SessionByToken(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.Chain(ctx, sid(404)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Chain(unknown) = %v, want ErrNotFound", err)
	}

	// An explicit empty tool list stays empty (no tools), not unset; a
	// default session has no tools; requirements are normalized.
	none := childSession(3, "", session.ModeExplicit, []string{})
	none.RequireApproval = map[string]session.Requirement{"pay": {Tools: []string{"b", "a", "a"}}, "fs": {Tools: []string{}}}
	mustCreateSession(t, s, none, "host-app")
	got, err = s.GetSession(ctx, none.ID)
	if err != nil {
		t.Fatalf("GetSession = %v", err)
	}
	if got.Tools == nil || len(got.Tools) != 0 {
		t.Errorf("explicit [] came back as %#v, want an empty non-nil list", got.Tools)
	}
	wantRA := map[string]session.Requirement{"pay": {Tools: []string{"a", "b"}}}
	if diff := cmp.Diff(wantRA, got.RequireApproval); diff != "" {
		t.Errorf("RequireApproval mismatch (-want +got):\n%s", diff)
	}
	def := childSession(4, "", session.ModeDefault, nil)
	mustCreateSession(t, s, def, "host-app")
	if got, _ := s.GetSession(ctx, def.ID); got.Tools != nil || got.Mode != session.ModeDefault {
		t.Errorf("default session came back with mode %q tools %#v", got.Mode, got.Tools)
	}
}

func testSessionChildAndChain(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	child := childSession(2, root.ID, session.ModeExplicit, []string{"fs__read_text_file"})
	mustCreateSession(t, s, child, root.Principal)
	grand := childSession(3, child.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, grand, child.Principal)

	c, err := s.Chain(ctx, grand.ID)
	if err != nil {
		t.Fatalf("Chain = %v", err)
	}
	var ids []session.ID
	for _, ss := range c {
		ids = append(ids, ss.ID)
	}
	if diff := cmp.Diff([]session.ID{grand.ID, child.ID, root.ID}, ids); diff != "" {
		t.Errorf("Chain order mismatch (-want +got):\n%s", diff)
	}
	if !c.Allows("fs", "read_text_file") || c.Allows("fs", "write_file") || c.Allows("pay", "refund") {
		t.Errorf("chain policy wrong: %+v", c)
	}

	orphan := childSession(4, sid(404), session.ModeInherited, nil)
	if err := s.CreateSession(ctx, orphan, "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CreateSession(unknown parent) = %v, want ErrNotFound", err)
	}
	evs := sessionEvents(allEvents(t, s))
	want := []approval.Event{
		{SessionID: string(root.ID), Type: approval.EventSessionCreated, Actor: "host-app", At: store.Millis(root.CreatedAt)},
		{SessionID: string(child.ID), Type: approval.EventChildCreated, Actor: root.Principal, At: store.Millis(child.CreatedAt)},
		{SessionID: string(grand.ID), Type: approval.EventChildCreated, Actor: child.Principal, At: store.Millis(grand.CreatedAt)},
	}
	if diff := cmp.Diff(want, evs, cmpEventNoSeq); diff != "" {
		t.Errorf("session events mismatch (-want +got):\n%s", diff)
	}
}

var cmpEventNoSeq = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Seq" }, cmp.Ignore())

func testSessionUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	now := t0.Add(time.Minute)
	set := func(r session.Requirement) func(*session.Session) error {
		return func(ss *session.Session) error {
			if ss.RequireApproval == nil {
				ss.RequireApproval = map[string]session.Requirement{}
			}
			ss.RequireApproval["pay"] = r
			return nil
		}
	}
	got, changed, err := s.UpdateSession(ctx, root.ID, "host-app", now, set(session.Requirement{Tools: []string{"refund", "refund"}}))
	if err != nil || !changed || got.Revision != 2 {
		t.Fatalf("UpdateSession = rev %d, changed %v, %v; want rev 2, changed", got.Revision, changed, err)
	}
	if diff := cmp.Diff(session.Requirement{Tools: []string{"refund"}}, got.RequireApproval["pay"]); diff != "" {
		t.Errorf("stored requirement mismatch (-want +got):\n%s", diff)
	}
	// The same value again: nothing written.
	got, changed, err = s.UpdateSession(ctx, root.ID, "host-app", now, set(session.Requirement{Tools: []string{"refund"}}))
	if err != nil || changed || got.Revision != 2 {
		t.Errorf("unchanged UpdateSession = rev %d, changed %v, %v; want rev 2, unchanged", got.Revision, changed, err)
	}
	// fn's error is returned and nothing is written.
	boom := errors.New("boom")
	if _, _, err := s.UpdateSession(ctx, root.ID, "host-app", now, func(*session.Session) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("UpdateSession(fn error) = %v, want boom", err)
	}
	// Only the policy may change.
	if _, _, err := s.UpdateSession(ctx, root.ID, "host-app", now, func(ss *session.Session) error { ss.Tenant = "other"; return nil }); err == nil {
		t.Errorf("UpdateSession changing the tenant succeeded")
	}
	if _, _, err := s.UpdateSession(ctx, sid(404), "x", now, set(session.Requirement{All: true})); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateSession(unknown) = %v, want ErrNotFound", err)
	}
	if cur, _ := s.GetSession(ctx, root.ID); cur.Revision != 2 || cur.Tenant != "acme" {
		t.Errorf("after refused updates: revision %d tenant %q, want 2 acme", cur.Revision, cur.Tenant)
	}
	evs := sessionEvents(allEvents(t, s))
	if diff := cmp.Diff([]approval.EventType{approval.EventSessionCreated, approval.EventSessionPolicyChanged}, types(evs)); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	if last := evs[len(evs)-1]; last.Actor != "host-app" || !last.At.Equal(now) {
		t.Errorf("policy event = %+v, want actor host-app at %v", last, now)
	}
	if _, err := s.RevokeSession(ctx, root.ID, "host-app", now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.UpdateSession(ctx, root.ID, "host-app", now, set(session.Requirement{All: true})); !errors.Is(err, session.ErrRevoked) {
		t.Errorf("UpdateSession(revoked) = %v, want session.ErrRevoked", err)
	}
}

// testSessionUpdateWithChain checks that fn gets the session's ancestors,
// parent first (none for a root), and that its error writes nothing.
func testSessionUpdateWithChain(t *testing.T, s store.Store) {
	ctx := t.Context()
	root, child, grand := threeGenerations(t, s)
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		id   session.ID
		want []session.ID
	}{{root.ID, nil}, {grand.ID, []session.ID{child.ID, root.ID}}} {
		var got []session.ID
		if _, _, err := s.UpdateSessionWithChain(ctx, tc.id, "host-app", now, func(_ *session.Session, c session.Chain) error {
			got = nil
			for _, ss := range c {
				got = append(got, ss.ID)
			}
			return nil
		}); err != nil {
			t.Fatalf("UpdateSessionWithChain(%s) = %v", tc.id, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ancestors of %s (-want +got):\n%s", tc.id, diff)
		}
	}
	boom := errors.New("boom")
	if _, _, err := s.UpdateSessionWithChain(ctx, grand.ID, "host-app", now, func(ss *session.Session, _ session.Chain) error {
		ss.RequireApproval = map[string]session.Requirement{"pay": {All: true}}
		return boom
	}); !errors.Is(err, boom) {
		t.Errorf("UpdateSessionWithChain(fn error) = %v, want boom", err)
	}
	if cur, _ := s.GetSession(ctx, grand.ID); cur.Revision != 1 {
		t.Errorf("after fn's error: revision %d, want 1", cur.Revision)
	}
}

// threeGenerations creates root session sid(1), its child sid(2) and
// their grandchild sid(3), both inheriting.
func threeGenerations(t *testing.T, s store.Store) (root, child, grand session.Session) {
	t.Helper()
	root = rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	child = childSession(2, root.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, child, root.Principal)
	grand = childSession(3, child.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, grand, child.Principal)
	return root, child, grand
}

func testSessionRevoke(t *testing.T, s store.Store) {
	ctx := t.Context()
	root, child, grand := threeGenerations(t, s)
	other := rootSession(4)
	mustCreateSession(t, s, other, "host-app")

	// A pending request of the grandchild, an approved one of the child, a
	// pending one of an unrelated session.
	held := pending(id(1, 1))
	held.RequestedBy = grand.Principal
	mustCreate(t, s, held)
	approved := pending(id(1, 2))
	approved.RequestedBy = child.Principal
	mustCreate(t, s, approved)
	mustReview(t, s, approved.ID, "alice", approval.VerdictApprove, t0.Add(time.Second))
	unrelated := pending(id(1, 3))
	unrelated.RequestedBy = other.Principal
	mustCreate(t, s, unrelated)

	now := t0.Add(time.Hour)
	rev, err := s.RevokeSession(ctx, child.ID, "host-app", now)
	if err != nil {
		t.Fatalf("RevokeSession = %v", err)
	}
	var revoked []session.ID
	for _, ss := range rev.Sessions {
		revoked = append(revoked, ss.ID)
		if !ss.RevokedAt.Equal(now) {
			t.Errorf("revoked session %s RevokedAt = %v, want %v", ss.ID, ss.RevokedAt, now)
		}
	}
	if diff := cmp.Diff([]session.ID{child.ID, grand.ID}, revoked); diff != "" {
		t.Errorf("revoked sessions mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]approval.ID{held.ID}, rev.Cancelled); diff != "" {
		t.Errorf("cancelled requests mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]approval.ID{approved.ID}, rev.Invalidated); diff != "" {
		t.Errorf("invalidated requests mismatch (-want +got):\n%s", diff)
	}
	if r := mustGet(t, s, held.ID); r.State != approval.StateCancelled || r.Reason != store.ReasonSessionRevoked {
		t.Errorf("held request: %s %q, want cancelled %q", r.State, r.Reason, store.ReasonSessionRevoked)
	}
	// An approved request not consumed yet is void too: once revocation
	// answered, nothing of the subtree may run (issue 9, defect 2).
	if r := mustGet(t, s, approved.ID); r.State != approval.StateInvalidated || r.Reason != store.ReasonSessionRevoked {
		t.Errorf("approved request: %s %q, want invalidated %q", r.State, r.Reason, store.ReasonSessionRevoked)
	}
	if r := mustGet(t, s, unrelated.ID); r.State != approval.StatePending {
		t.Errorf("unrelated request is %s, want pending", r.State)
	}
	for _, c := range []struct {
		id      session.ID
		revoked bool
	}{{root.ID, false}, {child.ID, true}, {grand.ID, true}, {other.ID, false}} {
		ch, err := s.Chain(ctx, c.id)
		if err != nil {
			t.Fatalf("Chain(%s) = %v", c.id, err)
		}
		if ch.Revoked() != c.revoked {
			t.Errorf("Chain(%s).Revoked() = %v, want %v", c.id, ch.Revoked(), c.revoked)
		}
	}
	// A child of a revoked session cannot be created.
	late := childSession(5, grand.ID, session.ModeInherited, nil)
	if err := s.CreateSession(ctx, late, grand.Principal); !errors.Is(err, session.ErrRevoked) {
		t.Errorf("CreateSession(under revoked) = %v, want session.ErrRevoked", err)
	}
	// Revoking again changes nothing.
	again, err := s.RevokeSession(ctx, child.ID, "host-app", now.Add(time.Minute))
	if err != nil || len(again.Sessions) != 0 || len(again.Cancelled) != 0 {
		t.Errorf("second RevokeSession = %+v, %v; want nothing changed", again, err)
	}
	if _, err := s.RevokeSession(ctx, sid(404), "x", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeSession(unknown) = %v, want ErrNotFound", err)
	}

	evs := allEvents(t, s)
	if diff := cmp.Diff([]approval.EventType{approval.EventRequested, approval.EventCancelled}, types(eventsOf(evs, held.ID))); diff != "" {
		t.Errorf("held request events mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]approval.EventType{approval.EventRequested, approval.EventReviewed, approval.EventApproved, approval.EventInvalidated},
		types(eventsOf(evs, approved.ID))); diff != "" {
		t.Errorf("approved request events mismatch (-want +got):\n%s", diff)
	}
	var revEvents []approval.Event
	for _, ev := range evs {
		if ev.Type == approval.EventSessionRevoked {
			revEvents = append(revEvents, ev)
		}
	}
	want := []approval.Event{
		{SessionID: string(child.ID), Type: approval.EventSessionRevoked, Actor: "host-app", At: now},
		{SessionID: string(grand.ID), Type: approval.EventSessionRevoked, Actor: "host-app", At: now},
	}
	if diff := cmp.Diff(want, revEvents, cmpEventNoSeq); diff != "" {
		t.Errorf("revocation events mismatch (-want +got):\n%s", diff)
	}
}

// testSessionEventsShareTheLog checks that session and request events are
// one log in commit order, each with exactly one of RequestID and
// SessionID.
func testSessionEventsShareTheLog(t *testing.T, s store.Store) {
	mustCreate(t, s, pending(id(1, 1)))
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	mustCreate(t, s, pending(id(1, 2)))
	evs := allEvents(t, s)
	var got []string
	for _, ev := range evs {
		if (ev.RequestID == "") == (ev.SessionID == "") {
			t.Errorf("event %+v: want exactly one of request_id and session_id", ev)
		}
		got = append(got, string(ev.Type)+" "+string(ev.RequestID)+ev.SessionID)
	}
	want := []string{
		"requested " + string(id(1, 1)),
		"session_created " + string(root.ID),
		"requested " + string(id(1, 2)),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event log mismatch (-want +got):\n%s", diff)
	}
}

func testCountPendingInTree(t *testing.T, s store.Store) {
	root := rootSession(1)
	mustCreateSession(t, s, root, "host-app")
	child := childSession(2, root.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, child, root.Principal)
	grand := childSession(3, child.ID, session.ModeInherited, nil)
	mustCreateSession(t, s, grand, child.Principal)
	other := rootSession(4)
	mustCreateSession(t, s, other, "host-app")

	n := 0
	add := func(by string, kind string, settle bool) {
		n++
		r := pending(id(7, n))
		r.RequestedBy, r.Kind = by, kind
		if kind == approval.KindSessionPolicy {
			r.Target, r.BaseRevision = string(grand.ID), grand.Revision
		}
		mustCreate(t, s, r)
		if settle {
			mustUpdate(t, s, r.ID, "x", func(r *approval.Request) error { return r.Cancel(t0) })
		}
	}
	add(root.Principal, "", false)
	add(child.Principal, approval.KindToolCall, false)
	add(grand.Principal, "", false)
	add(grand.Principal, "", true)                          // not pending
	add(grand.Principal, approval.KindSessionPolicy, false) // not a tool call
	add(child.Principal, approval.KindResourceRead, false)  // an agent request
	add(root.Principal, approval.KindPromptGet, false)      // an agent request
	add(other.Principal, "", false)                         // another tree
	add("desktop", "", false)                               // not a session

	for _, tc := range []struct {
		root session.ID
		want int
	}{{root.ID, 5}, {child.ID, 3}, {grand.ID, 1}, {other.ID, 1}, {sid(99), 0}} {
		got, err := s.CountPendingInTree(t.Context(), tc.root)
		if err != nil || got != tc.want {
			t.Errorf("CountPendingInTree(%s) = %d, %v; want %d", tc.root, got, err, tc.want)
		}
	}
}
