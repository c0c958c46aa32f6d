package store_test

import (
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/store"
)

// TestJoinedChangeAttributesTheConsumeToTheGateway: a decision whose
// transaction also consumed (or, at the consume's check, invalidated) the
// call held by its process writes the review and the approval as the
// reviewer's and the consume as the gateway's (newuser4: the consume was
// the reviewer's), as a decision and a consume in two changes would.
func TestJoinedChangeAttributesTheConsumeToTheGateway(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	pending := approval.Request{
		ID: "01900000-0000-7000-8000-000000000001", State: approval.StatePending, RequestedBy: "agent-1",
		Server: "fs", Tool: "write_file", ArgumentsHash: "sha256:00", RequiredApprovals: 1,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
	}
	for _, tc := range []struct {
		name     string
		deniedBy string
		last     approval.EventType
	}{
		{"consumed", "", approval.EventConsumed},
		{"invalidated", "rule no-writes", approval.EventType(approval.StateInvalidated)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := pending
			if err := after.Review(approval.Reviewer{ID: "alice"}, approval.VerdictApprove, "ok", "", t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := after.Consume(after.Binding(), tc.deniedBy, t0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			evs := store.ChangeEvents(pending, after, "alice", t0.Add(2*time.Minute))
			want := []struct {
				typ   approval.EventType
				actor string
			}{
				{approval.EventReviewed, "alice"},
				{approval.EventApproved, "alice"},
				{tc.last, store.GatewayActor},
			}
			if len(evs) != len(want) {
				t.Fatalf("events %+v, want %d", evs, len(want))
			}
			for i, w := range want {
				if evs[i].Type != w.typ || evs[i].Actor != w.actor {
					t.Errorf("event %d: %s by %q, want %s by %q", i, evs[i].Type, evs[i].Actor, w.typ, w.actor)
				}
			}
		})
	}
}
