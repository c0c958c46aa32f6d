package gate_test

import (
	"testing"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestStatusMessageSaysWhyCancelled: a cancelled task's statusMessage
// says why when the gateway wrote the reason (polish16; before, every
// cancellation read "cancelled; nothing was run"), and nothing more for a
// reason it does not know (no free text reaches the model).
func TestStatusMessageSaysWhyCancelled(t *testing.T) {
	g := gate.New(sqlitetest.Open(t), &policy.Policy{Default: policy.Allow}, nil)
	const id = "01900000-0000-7000-8000-000000000001"
	for _, tc := range []struct{ reason, want string }{
		{store.ReasonSessionRevoked, "approval " + id + " cancelled: the session was revoked; nothing was run"},
		{approval.ReasonCancelled, "approval " + id + " cancelled by its caller; nothing was run"},
		{gate.ReasonPolicyRevision, "approval " + id + " cancelled: the session's policy changed since the request was made; nothing was run"},
		{"", "approval " + id + " cancelled; nothing was run"},
		{"some operator's free text", "approval " + id + " cancelled; nothing was run"},
	} {
		r := approval.Request{ID: id, State: approval.StateCancelled, Reason: tc.reason}
		if got := g.StatusMessage(r); got != tc.want {
			t.Errorf("reason %q: %q, want %q", tc.reason, got, tc.want)
		}
	}
}
