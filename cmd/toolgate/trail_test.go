package main

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestRunWithTrailChainsCallsOfTheShutdown (breakheld's finding): a call
// admitted after shutdown began, while the serve group still drains, is
// chained by the trail's last flush. With the trail stopped on the same
// context as the listeners, its last flush ran first and the record stayed
// in a queue nobody read.
func TestRunWithTrailChainsCallsOfTheShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := sqlitetest.Open(t)
		tr := audit.New(db, &audit.Options{Linger: 100 * time.Millisecond, Poll: time.Hour})
		pol := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "reads", Server: "fs", Tools: []string{"read_*"}, Effect: policy.Allow}}}
		g := gate.New(db, pol, &gate.Options{Recorder: tr})
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // shutdown has begun
		err := runWithTrail(ctx, tr, func() error {
			synctest.Wait() // everything that stops on ctx has stopped
			c := gate.Call{Principal: approval.Principal{ID: "agent-1", Kind: "agent"}, Server: "fs", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/x"}`)}
			if adm := g.Admit(context.WithoutCancel(ctx), c); !adm.Allowed {
				t.Errorf("refused: %s", adm.Message)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		links, err := db.AuditLog(t.Context(), store.AuditFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(links) != 1 {
			t.Fatalf("%d calls chained after shutdown, want the one admitted while the group drained", len(links))
		}
	})
}
