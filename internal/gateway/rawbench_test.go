package gateway

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkRawCallStdio is one raw tools/call at a time on a shared stdio
// upstream session, without the HTTP front: the upstream side of an
// allowed call alone (the write to the child's stdin, the child, the
// answer line read back and routed to the call).
func BenchmarkRawCallStdio(b *testing.B) {
	logs := &logBuffer{}
	g, err := New(b.Context(), []ServerConfig{rawStdioServer("up")}, allowAll(), &Options{Logger: logs.logger(), HealthInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	u := g.ups["up"]
	if _, ok, err := u.callRaw(b.Context(), "echo", json.RawMessage(`{}`)); !ok || err != nil {
		b.Fatal("first call: ", ok, err) // also waits for the session
	}
	args := json.RawMessage(`{"message":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, ok, err := u.callRaw(b.Context(), "echo", args); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
