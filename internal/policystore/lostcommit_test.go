package policystore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

// lostApply is a real store whose ApplyPolicyApproval, once armed,
// commits and then answers an error, as an apply whose COMMIT's reply was
// lost with the connection does.
type lostApply struct {
	store.Store
	armed atomic.Bool
	lost  atomic.Int32
}

func (s *lostApply) ApplyPolicyApproval(ctx context.Context, id approval.ID, rev store.PolicyRevision, actor string, now time.Time) (store.PolicyRevision, approval.Request, error) {
	out, r, err := s.Store.ApplyPolicyApproval(ctx, id, rev, actor, now)
	if err != nil || !s.armed.CompareAndSwap(true, false) {
		return out, r, err
	}
	s.lost.Add(1)
	return store.PolicyRevision{}, approval.Request{}, fmt.Errorf("commit: %w: connection terminated after COMMIT (injected)", store.ErrUnavailable)
}

// An approved policy change whose apply commits but answers an error is
// read back: Apply answers the revision it made and puts it in force
// (before, it answered the store's error, and a retry answered "not
// approved", with the change applied). It applies once: the policy has
// one revision more, and a second Apply is refused.
func TestLostCommitOfPolicyApplyIsReadBack(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		la := &lostApply{Store: db}
		var in installs
		svc := policystore.New(la, &policystore.Options{Install: in.install, Approvers: []string{"bob"}})
		ctx := t.Context()
		if _, err := svc.Bootstrap(ctx, mustParse(t, base), "config"); err != nil {
			t.Fatal(err)
		}
		out, err := svc.Propose(ctx, alice, 1, mustParse(t, wider))
		if err != nil || out.Approval.ID == "" {
			t.Fatalf("widening Propose = %+v, %v; want a pending approval", out, err)
		}
		id := out.Approval.ID
		if _, err := db.UpdateRequest(ctx, id, "bob", func(r *approval.Request) error {
			return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", time.Now())
		}); err != nil {
			t.Fatal(err)
		}
		la.armed.Store(true)
		got, err := svc.Apply(ctx, id, "bob")
		if n := la.lost.Load(); n != 1 {
			t.Fatalf("%d commits lost, want 1", n)
		}
		if err != nil || got.Revision != 2 || got.ApprovalID != id {
			t.Fatalf("Apply = %+v, %v; want revision 2 through %s", got, err, id)
		}
		if e := in.effect(t, "fs", "delete_file"); e != policy.Allow {
			t.Errorf("after the widening, fs/delete_file is %s, want allow (revision 2 in force)", e)
		}
		cur, err := db.CurrentPolicy(ctx)
		if err != nil || cur.Revision != 2 {
			t.Fatalf("current revision %d, %v; want 2", cur.Revision, err)
		}
		if _, err := svc.Apply(ctx, id, "bob"); !errors.Is(err, approval.ErrNotApproved) {
			t.Errorf("second Apply = %v, want ErrNotApproved", err)
		}
	})
}
