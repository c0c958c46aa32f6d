package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// readCounter is a real store that counts the reads of one request.
type readCounter struct {
	store.Store
	reads atomic.Int32
}

func (c *readCounter) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	c.reads.Add(1)
	return c.Store.GetRequest(ctx, id)
}

func (c *readCounter) ViewRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	c.reads.Add(1)
	return c.Store.ViewRequest(ctx, id)
}

// TestApproveReadsNothingBeforeTheReview: POST …/approve records the
// verdict without reading the request first (the tenant and the kind are
// checked in the transaction that records it): one store read fewer per
// approval in approve-all (docs/performance.md, "Approving them all").
// Another tenant's request and an unknown id are still 404 and nothing is
// recorded.
func TestApproveReadsNothingBeforeTheReview(t *testing.T) {
	db := sqlitetest.Open(t)
	s := &readCounter{Store: db}
	h := api.New(gate.New(s, &policy.Policy{Default: policy.Allow}, nil), authenticate, nil)
	now := time.Now()
	id := approval.ID("01a23417-d92a-7178-a8c9-9feaf297eeab")
	if err := db.CreateRequest(t.Context(), approval.Request{ID: id, State: approval.StatePending, Server: "pay", Tool: "transfer",
		Arguments: json.RawMessage(`{"amount":5}`), ArgumentsHash: "sha256:x", RequestedBy: "desktop",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	if a := send(t, h, http.MethodPost, "/v1/approvals/"+string(id)+"/approve", "acme-tok", `{}`); a.status != http.StatusNotFound || a.code(t) != api.CodeNotFound {
		t.Errorf("another tenant's approve = %d %s, want 404 not_found", a.status, a.body)
	}
	if a := send(t, h, http.MethodPost, "/v1/approvals/01a23417-d92a-7178-a8c9-000000000000/approve", "bob-tok", `{}`); a.status != http.StatusNotFound || a.code(t) != api.CodeNotFound {
		t.Errorf("approve of an unknown id = %d %s, want 404 not_found", a.status, a.body)
	}
	if r, err := db.GetRequest(t.Context(), id); err != nil || r.State != approval.StatePending || len(r.Reviews) != 0 {
		t.Fatalf("after the refused approves: %s with %d reviews, %v; want pending, none", r.State, len(r.Reviews), err)
	}

	s.reads.Store(0)
	a := send(t, h, http.MethodPost, "/v1/approvals/"+string(id)+"/approve", "bob-tok", `{"reason":"ok"}`)
	if a.status != http.StatusOK {
		t.Fatalf("approve = %d %s", a.status, a.body)
	}
	if got := decodeAs[api.Approval](t, a); got.State != string(approval.StateApproved) {
		t.Errorf("answer state %q, want approved", got.State)
	}
	if n := s.reads.Load(); n != 0 {
		t.Errorf("approve read the request %d times, want 0 (the review's transaction reads it)", n)
	}
}
