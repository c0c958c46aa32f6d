package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stdioPeer speaks raw newline-delimited JSON-RPC to `toolgate serve
// --stdio`, so it can send lines no SDK client would.
type stdioPeer struct {
	t     *testing.T
	in    io.WriteCloser
	lines chan string
}

// send writes one line.
func (p *stdioPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("write to toolgate's stdin: %v", err)
	}
}

// next returns the next message toolgate wrote, decoded.
func (p *stdioPeer) next() rpcAnswer {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatal("toolgate closed its stdout")
		}
		var a rpcAnswer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			p.t.Fatalf("toolgate wrote %q: %v", line, err)
		}
		a.raw = line
		return a
	case <-time.After(waitFor(p.t)):
		p.t.Fatal("no answer from toolgate --stdio")
		return rpcAnswer{}
	}
}

// startStdioPeer starts `toolgate serve --stdio` with cfg and a peer on
// its stdin and stdout.
func startStdioPeer(t *testing.T, cfg string) (*stdioPeer, *stdioChild) {
	t.Helper()
	cmd, stderr, _ := gatewayCommand(t, cfg, nil, "--stdio")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child := startStdioChild(t, cmd, stderr, func() { _ = in.Close() })
	p := &stdioPeer{t: t, in: in, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p, child
}

type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// TestStdioBadLines is issue 9's acceptance for --stdio: each of the five
// lines that used to end the process (nesting deeper than 1000, an object
// id, a boolean id, "id":1e400, a stray "error" member) gets a JSON-RPC
// error, ids the SDK would mangle (past 2^53, 1.5) are refused under the
// id as sent, and the next call works; closing stdin ends toolgate with
// status 0.
func TestStdioBadLines(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record.log")
	cfg := `
storage:
  driver: sqlite
  path: ` + q(filepath.Join(dir, "toolgate.db")) + `
` + principalsYAML + upstreamServer(record) + `
policy:
  default: allow
`
	p, child := startStdioPeer(t, cfg)

	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if a := p.next(); string(a.ID) != "1" || a.Error != nil {
		t.Fatalf("initialize: %s", a.raw)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	for _, tt := range []struct {
		name, line, id string
	}{
		{"nesting deeper than 1000", `{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"x":` + deep + `}}`, "null"},
		{"an object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, "null"},
		{"a boolean id", `{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, "null"},
		{"id 1e400", `{"jsonrpc":"2.0","id":1e400,"method":"tools/list"}`, "1e400"},
		{"a stray error member", `{"jsonrpc":"2.0","id":11,"method":"tools/list","error":{"code":1,"message":"x"}}`, "11"},
		{"an id past 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list"}`, "9007199254740993"},
		{"a fraction id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, "1.5"},
	} {
		p.send(tt.line)
		a := p.next()
		if a.Error == nil || a.Error.Code != -32600 || string(a.ID) != tt.id {
			t.Errorf("%s: answered %s; want a JSON-RPC error -32600 with id %s", tt.name, a.raw, tt.id)
		}
	}

	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t__echo_raw","arguments":{"after":"bad lines"}}}`)
	a := p.next()
	if string(a.ID) != "2" || a.Error != nil || !strings.Contains(string(a.Result), `{\"after\":\"bad lines\"}`) {
		t.Errorf("the call after the bad lines: %s", a.raw)
	}

	_ = p.in.Close()
	select {
	case <-child.exited:
	case <-time.After(waitFor(t)):
		t.Fatal("toolgate --stdio did not exit after its stdin closed")
	}
	if child.waitErr != nil {
		t.Errorf("toolgate --stdio exited with %v, want status 0", child.waitErr)
	}
}
