package audit_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"toolgate/internal/audit"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
)

// BenchmarkAdmitAllowed measures what the audit trail adds to the gate's
// allowed path: without a recorder; with the trail only queueing (the
// call path's share); and with its Run appending to a real SQLite store in
// the background (whose work competes for the CPU and counts in the
// allocations, though not on the call's path):
//
//	go test -run '^$' -bench AdmitAllowed ./internal/audit/
func BenchmarkAdmitAllowed(b *testing.B) {
	pol := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "reads", Server: "fs", Tools: []string{"read_*"}, Effect: policy.Allow}}}
	c := call("read_file")
	b.Run("no-audit", func(b *testing.B) {
		g := gate.New(nil, pol, nil)
		b.ReportAllocs()
		for b.Loop() {
			if !g.Admit(b.Context(), c).Allowed {
				b.Fatal("refused")
			}
		}
	})
	b.Run("audit-enqueue-only", func(b *testing.B) {
		// The call path's own share: the queue (larger than -benchtime 40000x) never fills and nothing
		// drains it.
		db := openSQLite(b, filepath.Join(b.TempDir(), "tg.db"))
		tr := audit.New(db, &audit.Options{QueueSize: 1 << 16})
		g := gate.New(db, pol, &gate.Options{Recorder: tr})
		b.ReportAllocs()
		for b.Loop() {
			if !g.Admit(b.Context(), c).Allowed {
				b.Fatal("refused")
			}
		}
	})
	b.Run("audit", func(b *testing.B) {
		db := openSQLite(b, filepath.Join(b.TempDir(), "tg.db"))
		tr := audit.New(db, nil)
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error, 1)
		go func() { done <- tr.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				b.Error(err)
			}
		}()
		g := gate.New(db, pol, &gate.Options{Recorder: tr})
		b.ReportAllocs()
		for b.Loop() {
			if !g.Admit(b.Context(), c).Allowed {
				b.Fatal("refused")
			}
		}
	})
}

// BenchmarkFlushCalls measures the trail's own work per allowed call: a
// batch of 100 calls (with perfpair's kind of arguments) decided, then
// chained and appended to a real SQLite store by Flush; ns/op and
// allocs/op are per batch:
//
//	go test -run '^$' -bench FlushCalls ./internal/audit/
func BenchmarkFlushCalls(b *testing.B) {
	db := openSQLite(b, filepath.Join(b.TempDir(), "tg.db"))
	tr := audit.New(db, &audit.Options{QueueSize: 1 << 10})
	d := gate.Decided{Principal: agent, Server: "echo", Tool: "echo", Allowed: true, Rule: "all", PolicyRevision: "sha256:0",
		Arguments: json.RawMessage(`{"text":"` + strings.Repeat("x", 100) + `"}`)}
	b.ReportAllocs()
	for b.Loop() {
		for range 100 {
			d.At = time.Now()
			tr.Decided(b.Context(), d)
		}
		if err := tr.Flush(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
