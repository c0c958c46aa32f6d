package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/session"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// beforeTakeOver is a store that runs do once, before the first request
// write of id (a take-over's UpdateRequest), then writes.
type beforeTakeOver struct {
	store.Store
	id   approval.ID
	once sync.Once
	do   func()
}

func (s *beforeTakeOver) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	if id == s.id {
		s.once.Do(s.do)
	}
	return s.Store.UpdateRequest(ctx, id, actor, fn)
}

// TestTakeOverRechecksTheSession (fixes25): an identical re-send of a
// session's call checks the session at admission, then may wait up to a
// lease to take the request over from another instance (takeOver). A
// session narrowed in between (the tool now outside its policy) did not
// stop it: it took the request over and was held for a decision that its
// consume would refuse anyway. It is now refused at the take-over, and
// the request's lease is released. A revocation in between was refused
// already on the base (it cancels the session's requests, so nothing is
// taken over and the new request's creation is refused); kept as a case.
func TestTakeOverRechecksTheSession(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, db *sqlstore.DB, id session.ID)
		want   string
	}{
		{"narrowed", func(t *testing.T, db *sqlstore.DB, id session.ID) {
			t.Helper()
			if _, _, err := db.UpdateSession(context.Background(), id, "host-app", time.Now(), func(s *session.Session) error {
				s.Mode, s.Tools = session.ModeExplicit, []string{"pay"}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}, "outside the session's policy"},
		{"revoked", func(t *testing.T, db *sqlstore.DB, id session.ID) {
			t.Helper()
			if _, err := db.RevokeSession(context.Background(), id, "host-app", time.Now()); err != nil {
				t.Error(err)
			}
		}, "revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, db *sqlstore.DB) {
				t.Helper()
				pol := &swappable{}
				pol.p.Store(allowAll())
				opts := func(inst string, now func() time.Time) *Options {
					return &Options{Lease: time.Hour, Instance: inst, Now: now, ServerExists: knownServers, SessionApproval: allowAll().Approval}
				}
				x := New(db, pol, opts("gw-x", nil))
				s, p := mustSession(t, x, host, session.NewSession{RequireApproval: map[string]session.Requirement{"fs": {Tools: []string{"write_file"}}}})
				c := sessionCall(p, "fs", "write_file")
				dropped, drop := context.WithCancelCause(t.Context())
				admitHeld(dropped, t, x, c)
				r := waitPending(t, db, 1)[0]
				defer drop(nil)

				// To y, x's lease ends 100 ms after the re-send came: y
				// waits for it, then takes the request over.
				var ahead atomic.Int64
				hook := &beforeTakeOver{Store: db, id: r.ID, do: func() { tc.change(t, db, s.ID) }}
				y := New(hook, pol, opts("gw-y", func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }))
				resend := c
				tookOver := make(chan approval.ID, 1)
				resend.OnHold = func(r approval.Request) { tookOver <- r.ID }
				ahead.Store(int64(time.Until(r.LeaseUntil) - 100*time.Millisecond))
				a := recv(t, admitAsync(t.Context(), y, resend))
				select {
				case id := <-tookOver:
					t.Fatalf("the re-send took %s over although its session was %s while it waited (answered %+v)", id, tc.name, a)
				default:
				}
				if a.Allowed || a.Pending || !strings.Contains(a.Message, tc.want) {
					t.Fatalf("re-send answered %+v, want refused: %s", a, tc.want)
				}
				if cur, _ := db.GetRequest(t.Context(), r.ID); cur.HeldBy == "gw-y" && !cur.LeaseLapsed(y.now()) {
					t.Errorf("request %s still leased to gw-y until %v after the refusal", r.ID, cur.LeaseUntil)
				}
			})
		})
	}
}

// TestAnswerAfterTheWaitOnAnApprovedRequest (fixes25): an identical
// re-send whose MaxHold passed while it waited for another instance's
// lease on an approved request was told "approval … is pending (1 of 1
// approvals …) … The request expires at …": it waits for no decision,
// and the approval lapses at the end of its validity. It is now told
// that the request is approved and held by another call, and until when
// the approval is valid.
func TestAnswerAfterTheWaitOnAnApprovedRequest(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		p := testPolicy(2 * time.Hour)
		p.Approval.ValidFor = 10 * time.Minute
		pol.p.Store(p)
		// x is not watched: the approval made elsewhere does not reach its
		// held call, which keeps holding the approved request.
		x := New(db, pol, &Options{Lease: time.Hour, Instance: "gw-x"})
		ctx, drop := context.WithCancelCause(t.Context())
		defer drop(nil)
		admitHeld(ctx, t, x, writeCall("/approved-elsewhere"))
		r := waitPending(t, db, 1)[0]
		z := New(db, pol, &Options{Instance: "gw-z"})
		if _, err := z.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		y := New(db, pol, &Options{Lease: time.Hour, Instance: "gw-y"})
		c := writeCall("/approved-elsewhere")
		c.MaxHold = 100 * time.Millisecond
		a := recv(t, admitAsync(t.Context(), y, c))
		if !a.Pending || a.ApprovalID != r.ID {
			t.Fatalf("re-send answered %+v, want not run yet on %s", a, r.ID)
		}
		cur, err := db.GetRequest(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		valid := cur.ValidUntil().UTC().Format(time.RFC3339)
		if strings.Contains(a.Message, "is pending") || !strings.Contains(a.Message, "approved by alice") || !strings.Contains(a.Message, valid) {
			t.Fatalf("re-send told %q; want it approved by alice, held by another call, valid until %s", a.Message, valid)
		}
	})
}

// lostUpdateReply is a store whose next request write of id, once armed,
// commits and then reports store.ErrUnavailable (a lost COMMIT reply).
type lostUpdateReply struct {
	store.Store
	id    approval.ID
	armed atomic.Bool
}

func (s *lostUpdateReply) UpdateRequest(ctx context.Context, id approval.ID, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	r, err := s.Store.UpdateRequest(ctx, id, actor, fn)
	if err == nil && id == s.id && s.armed.CompareAndSwap(true, false) {
		return approval.Request{}, fmt.Errorf("fixes25: after the commit: %w", store.ErrUnavailable)
	}
	return r, err
}

// TestTakeOverWhoseReplyWasLost (fixes25): a take-over's write that
// committed but reported an error (a lost COMMIT reply) left the
// re-send without the request: it made a new one, and the old one stayed
// pending and leased to this instance, held by no call and not renewed,
// for a whole lease (an identical re-send elsewhere waited it out). The
// take-over now reads the request after such an error and holds it when
// this instance's lease on it is stored. On both stores.
func TestTakeOverWhoseReplyWasLost(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		pol := &swappable{}
		pol.p.Store(testPolicy(time.Hour))
		ls := &lostUpdateReply{Store: db}
		g := New(ls, pol, &Options{Lease: time.Hour})
		ctx, drop := context.WithCancelCause(t.Context())
		dropped := admitHeld(ctx, t, g, writeCall("/lost-take-over-reply"))
		r := waitPending(t, db, 1)[0]
		drop(errors.New("client connection dropped")) // the request stays pending, its lease released
		if a := recv(t, dropped); a.Allowed {
			t.Fatalf("dropped call answered %+v", a)
		}
		ls.id = r.ID
		ls.armed.Store(true)
		c := writeCall("/lost-take-over-reply")
		heldOn := make(chan approval.ID, 1)
		c.OnHold = func(r approval.Request) { heldOn <- r.ID }
		resend := admitAsync(t.Context(), g, c)
		select {
		case id := <-heldOn:
			if id != r.ID {
				t.Fatalf("the re-send is held on a new request %s; %s, which its take-over's write leased to this instance, stays leased and held by no call", id, r.ID)
			}
		case a := <-resend:
			t.Fatalf("the re-send was answered %+v, want held on %s", a, r.ID)
		}
		if ls.armed.Load() {
			t.Fatal("the take-over's write was not the one that lost its reply")
		}
		if _, err := g.Review(t.Context(), r.ID, alice, approval.VerdictApprove, "ok", ""); err != nil {
			t.Fatal(err)
		}
		a := recv(t, resend)
		if !a.Allowed || a.ApprovalID != r.ID {
			t.Fatalf("the re-send after approval: %+v, want allowed on %s", a, r.ID)
		}
		a.Finish(t.Context(), approval.OutcomeOK)
		if ids := g.leases.ids(); len(ids) != 0 {
			t.Fatalf("lease marks left: %v", ids)
		}
	})
}
