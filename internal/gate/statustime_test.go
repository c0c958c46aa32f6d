package gate_test

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestStatusMessageTimesToTheSecond: a task's statusMessage names the
// request's deadline to the second. To the minute, a 30-second request
// made at 14:33:12 "timed out: no decision before 14:33Z", a time before
// it was made (newuser6).
func TestStatusMessageTimesToTheSecond(t *testing.T) {
	now := time.Date(2026, 12, 3, 14, 33, 12, 0, time.UTC)
	g := gate.New(sqlitetest.Open(t), &policy.Policy{Default: policy.Allow}, &gate.Options{Now: func() time.Time { return now }})
	const id = "01900000-0000-7000-8000-000000000001"
	deadline := now.Add(30 * time.Second)
	for _, tc := range []struct {
		state approval.State
		want  string
	}{
		{approval.StatePending, "; expires 14:33:42Z"},
		{approval.StateExpired, "timed out: no decision before 14:33:42Z; nothing was run"},
	} {
		r := approval.Request{ID: id, State: tc.state, ExpiresAt: deadline, RequiredApprovals: 1}
		if got := g.StatusMessage(r); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want it to contain %q", tc.state, got, tc.want)
		}
	}
}
