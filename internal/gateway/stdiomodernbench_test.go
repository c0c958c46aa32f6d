package gateway

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
)

// BenchmarkServeStdioCall2026 is BenchmarkServeStdioCall for a 2026-07-28
// stdio agent (no initialize; each call carries its protocol metadata)
// on a gateway with the Tasks front: each call line is offered to the
// Tasks front (taskTaken decodes it) before the SDK path serves it
// (branch stdio43, gap 5):
//
//	go test -run '^$' -bench ServeStdioCall2026 ./internal/gateway/
func BenchmarkServeStdioCall2026(b *testing.B) {
	p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		b.Fatal(err)
	}
	gk := gate.New(nil, policy.NewHolder(p), &gate.Options{Key: key})
	g, err := New(b.Context(), []ServerConfig{{Name: "up", URL: benchUpstream(b)}}, gk, &Options{StdioWriteTimeout: 30 * time.Second, Tasks: gk})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	inW, out := benchServeStdio(b, g)
	call := func(i int) {
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__echo","arguments":{"to":"acct-1","amount":5},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`, i)
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprint(i)
		for {
			l, err := out.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":`+id+`,`)) {
				return
			}
		}
	}
	call(1)
	b.ReportAllocs()
	i := 2
	for b.Loop() {
		call(i)
		i++
	}
}

// BenchmarkStdioTaskLook is the Tasks front's look at one 2026-07-28
// stdio tools/call line it does not take (an agent without the Tasks
// extension calling a tool without task support): the decode
// BenchmarkServeStdioCall2026 pays before the SDK decodes the line again
// (gap 5: its share of a call).
func BenchmarkStdioTaskLook(b *testing.B) {
	p := &policy.Policy{Default: policy.Deny, Rules: []policy.Rule{{Name: "all", Server: "up", Effect: policy.Allow}}}
	gk := gate.New(nil, policy.NewHolder(p), nil)
	g, err := New(b.Context(), []ServerConfig{{Name: "up", URL: benchUpstream(b)}}, gk, &Options{Tasks: gk})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	line := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"to":"acct-1","amount":5},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, taken := g.taskTaken(bytes.Clone(line), nil, true); taken {
			b.Fatal("taken")
		}
	}
}
