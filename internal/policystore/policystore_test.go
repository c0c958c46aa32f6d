package policystore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/policy"
	"toolgate/internal/policystore"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore"
)

const base = `
default: allow
approval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}
rules:
  - {name: no-delete, server: fs, tools: [delete_*], effect: deny}
  - {name: writes, server: fs, tools: [write_*], effect: approve}
`

// narrower adds a deny rule.
const narrower = base + `  - {name: no-exec, server: sh, effect: deny}
`

// wider drops the deny rule.
const wider = `
default: allow
approval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}
rules:
  - {name: writes, server: fs, tools: [write_*], effect: approve}
`

func mustParse(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p, err := policystore.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// installs records what Install was called with.
type installs struct {
	mu   sync.Mutex
	revs []int64
	last *policy.Policy
}

func (in *installs) install(rev store.PolicyRevision, p *policy.Policy) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.revs = append(in.revs, rev.Revision)
	in.last = p
}

func (in *installs) effect(t *testing.T, server, tool string) policy.Effect {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	d, err := in.last.Evaluate(policy.Call{Server: server, Tool: tool})
	if err != nil {
		t.Fatal(err)
	}
	return d.Effect
}

var (
	alice = approval.Principal{ID: "alice", Kind: "human"}
	bob   = approval.Principal{ID: "bob", Kind: "human"}
)

func TestProposeAndApply(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		var in installs
		svc := policystore.New(db, &policystore.Options{Install: in.install, Approvers: []string{"alice", "bob"}})
		ctx := t.Context()

		rev, err := svc.Bootstrap(ctx, mustParse(t, base), "config")
		if err != nil || rev.Revision != 1 {
			t.Fatalf("Bootstrap = %d, %v; want revision 1", rev.Revision, err)
		}
		// A second bootstrap (another instance, another file) keeps revision 1.
		if rev, err := policystore.New(db, nil).Bootstrap(ctx, mustParse(t, wider), "config"); err != nil || rev.Revision != 1 {
			t.Fatalf("second Bootstrap = %d, %v; want revision 1", rev.Revision, err)
		}

		// Narrowing applies at once.
		out, err := svc.Propose(ctx, alice, 1, mustParse(t, narrower))
		if err != nil || !out.Applied || out.Revision.Revision != 2 {
			t.Fatalf("narrowing Propose = %+v, %v; want applied as revision 2", out, err)
		}
		if got := in.effect(t, "sh", "run"); got != policy.Deny {
			t.Errorf("after narrowing, sh/run is %s, want deny", got)
		}
		// A stale base is refused.
		if _, err := svc.Propose(ctx, alice, 1, mustParse(t, wider)); !errors.Is(err, store.ErrConflict) {
			t.Errorf("Propose on a stale base = %v, want ErrConflict", err)
		}
		// The same policy again is no change.
		if _, err := svc.Propose(ctx, alice, 2, mustParse(t, narrower)); !errors.Is(err, policystore.ErrInvalid) {
			t.Errorf("Propose of the current policy = %v, want ErrInvalid", err)
		}

		// Widening waits for an approval by someone else.
		out, err = svc.Propose(ctx, alice, 2, mustParse(t, wider))
		if err != nil || out.Applied || out.Approval.ID == "" || len(out.Reasons) == 0 {
			t.Fatalf("widening Propose = %+v, %v; want a pending approval with reasons", out, err)
		}
		id := out.Approval.ID
		if r, _ := db.GetRequest(ctx, id); r.Kind != approval.KindPolicyChange || r.BaseRevision != 2 || r.RequestedBy != "alice" {
			t.Errorf("approval: kind %q base %d by %q", r.Kind, r.BaseRevision, r.RequestedBy)
		}
		if _, err := svc.Apply(ctx, id, "bob"); !errors.Is(err, approval.ErrNotApproved) {
			t.Errorf("Apply of a pending approval = %v, want ErrNotApproved", err)
		}
		review := func(who string) error {
			_, err := db.UpdateRequest(ctx, id, who, func(r *approval.Request) error {
				return r.Review(approval.Reviewer{ID: who}, approval.VerdictApprove, "", "", time.Now())
			})
			return err
		}
		if err := review("alice"); !errors.Is(err, approval.ErrSelfReview) {
			t.Errorf("proposer's own approval = %v, want ErrSelfReview", err)
		}
		if err := review("bob"); err != nil {
			t.Fatal(err)
		}
		got, err := svc.Apply(ctx, id, "bob")
		if err != nil || got.Revision != 3 || got.ApprovalID != id || got.CreatedBy != "alice" {
			t.Fatalf("Apply = %+v, %v; want revision 3 by alice through %s", got, err, id)
		}
		if got := in.effect(t, "fs", "delete_file"); got != policy.Allow {
			t.Errorf("after the widening, fs/delete_file is %s, want allow", got)
		}
		if _, err := svc.Apply(ctx, id, "bob"); !errors.Is(err, approval.ErrNotApproved) {
			t.Errorf("second Apply = %v, want ErrNotApproved", err)
		}
		diff, err := svc.Diff(ctx, 2, 3)
		if err != nil || len(diff) == 0 {
			t.Errorf("Diff(2, 3) = %q, %v; want lines", diff, err)
		}
		if want := []int64{1, 2, 3}; len(in.revs) != len(want) || in.revs[0] != 1 || in.revs[2] != 3 {
			t.Errorf("installed revisions %v, want %v", in.revs, want)
		}
	})
}

func TestMovedInvalidates(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		svc := policystore.New(db, nil)
		ctx := t.Context()
		if _, err := svc.Bootstrap(ctx, mustParse(t, base), "config"); err != nil {
			t.Fatal(err)
		}
		out, err := svc.Propose(ctx, alice, 1, mustParse(t, wider))
		if err != nil || out.Applied {
			t.Fatalf("Propose = %+v, %v", out, err)
		}
		if _, err := db.UpdateRequest(ctx, out.Approval.ID, "bob", func(r *approval.Request) error {
			return r.Review(approval.Reviewer{ID: "bob"}, approval.VerdictApprove, "", "", time.Now())
		}); err != nil {
			t.Fatal(err)
		}
		if out, err := svc.Propose(ctx, bob, 1, mustParse(t, narrower)); err != nil || !out.Applied {
			t.Fatalf("concurrent narrowing = %+v, %v", out, err)
		}
		if _, err := svc.Apply(ctx, out.Approval.ID, "bob"); !errors.Is(err, store.ErrConflict) {
			t.Errorf("Apply after the policy moved = %v, want ErrConflict", err)
		}
		if r, _ := db.GetRequest(ctx, out.Approval.ID); r.State != approval.StateInvalidated {
			t.Errorf("approval is %s, want invalidated", r.State)
		}
		if cur, _ := db.CurrentPolicy(ctx); cur.Revision != 2 {
			t.Errorf("current revision %d, want 2", cur.Revision)
		}
	})
}

func TestSyncFollowsAnotherInstance(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		ctx := t.Context()
		var in1, in2 installs
		one := policystore.New(db, &policystore.Options{Install: in1.install})
		two := policystore.New(db, &policystore.Options{Install: in2.install})
		if _, err := one.Bootstrap(ctx, mustParse(t, base), "config"); err != nil {
			t.Fatal(err)
		}
		if _, err := two.Bootstrap(ctx, mustParse(t, base), "config"); err != nil {
			t.Fatal(err)
		}
		if _, err := one.Propose(ctx, alice, 1, mustParse(t, narrower)); err != nil {
			t.Fatal(err)
		}
		if got := in2.effect(t, "sh", "run"); got != policy.Allow {
			t.Fatalf("before Sync, instance two has sh/run %s, want allow", got)
		}
		if err := two.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := in2.effect(t, "sh", "run"); got != policy.Deny || two.Installed() != 2 {
			t.Errorf("after Sync, instance two has sh/run %s at revision %d, want deny at 2", got, two.Installed())
		}
	})
}

// TestWakeSyncsFollow: Follow, whose poll is an hour, installs another
// instance's revision when woken (what the store's watch does on its
// announcement), and a Wake while one is pending does not block.
func TestWakeSyncsFollow(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		ctx := t.Context()
		var in2 installs
		installed := make(chan int64, 4)
		one := policystore.New(db, nil)
		two := policystore.New(db, &policystore.Options{Poll: time.Hour, Install: func(rev store.PolicyRevision, p *policy.Policy) {
			in2.install(rev, p)
			installed <- rev.Revision
		}})
		if _, err := one.Bootstrap(ctx, mustParse(t, base), "config"); err != nil {
			t.Fatal(err)
		}
		if _, err := two.Bootstrap(ctx, mustParse(t, base), "config"); err != nil {
			t.Fatal(err)
		}
		if got := <-installed; got != 1 {
			t.Fatalf("bootstrap installed revision %d, want 1", got)
		}
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); two.Follow(fctx) }()
		defer func() { cancel(); <-done }()
		if _, err := one.Propose(ctx, alice, 1, mustParse(t, narrower)); err != nil {
			t.Fatal(err)
		}
		two.Wake()
		two.Wake() // one pending already: returns at once
		select {
		case got := <-installed:
			if got != 2 || in2.effect(t, "sh", "run") != policy.Deny {
				t.Errorf("woken Follow installed revision %d, want 2 with sh/run denied", got)
			}
		case <-time.After(30 * time.Second): // a hang guard; the poll is an hour
			t.Fatal("Wake did not make Follow install revision 2")
		}
	})
}

func TestParseRefuses(t *testing.T) {
	for _, text := range []string{
		"default: maybe\napproval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}\n",
		base + "extra: 1\n",
		"source: store\n" + base,
		"{not yaml",
		// An explicit zero in a rule's approval would silently inherit.
		"default: allow\napproval: {timeout: 5m, mode: hold, approvals: 1, valid_for: 10m}\nrules:\n  - {name: w, tools: [x], effect: approve, approval: {approvals: 0}}\n",
		`{"default":"allow","approval":{"timeout":"5m","mode":"hold","approvals":1,"valid_for":"10m"},"rules":[{"name":"w","effect":"approve","approval":{"valid_for":"0s"}}]}`,
	} {
		if _, err := policystore.Parse([]byte(text)); !errors.Is(err, policystore.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", text, err)
		}
	}
	// JSON is accepted and round-trips through the canonical text.
	p := mustParse(t, `{"default":"deny","approval":{"timeout":"1m","mode":"retry","approvals":2,"valid_for":"1h"}}`)
	text, digest, err := policystore.Canonical(p)
	if err != nil {
		t.Fatal(err)
	}
	if q := mustParse(t, text); policy.Revision(q) != digest {
		t.Errorf("canonical text does not round-trip:\n%s", text)
	}
}

// TestTenantCannotPropose: a principal with a tenant proposes nothing,
// narrowing or widening: the deployment policy governs every tenant.
func TestTenantCannotPropose(t *testing.T) {
	eachStore(t, func(t *testing.T, db *sqlstore.DB) {
		t.Helper()
		svc := policystore.New(db, nil)
		ctx := t.Context()
		if _, err := svc.Bootstrap(ctx, mustParse(t, base), "config"); err != nil {
			t.Fatal(err)
		}
		acme := approval.Principal{ID: "acme-admin", Kind: "human", Tenant: "acme"}
		for _, p := range []string{narrower, wider} {
			if _, err := svc.Propose(ctx, acme, 1, mustParse(t, p)); !errors.Is(err, policystore.ErrTenant) {
				t.Errorf("Propose by a tenant admin = %v, want ErrTenant", err)
			}
		}
		if cur, err := svc.Get(ctx, 0); err != nil || cur.Revision != 1 {
			t.Errorf("current = %d, %v; want revision 1", cur.Revision, err)
		}
	})
}
