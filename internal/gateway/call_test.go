package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

func TestArgumentsByteForByte(t *testing.T) {
	// The gate and the upstream see the same JSON value the agent sent: the
	// same number literals, escapes and key order (only whitespace may go).
	const args = `{ "z" : 9007199254740993, "s":"\u00e9<&>\/", "b" :{"y":1,"x":2} }`
	h := newHooks()
	var (
		mu  sync.Mutex
		got []gate.Call
	)
	gk := gatekeeperFunc(func(_ context.Context, c gate.Call) gate.Admission {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
		return gate.Admission{Allowed: true}
	})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gk, nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("isError: %s", textOf(t, res))
	}
	want := compact(t, []byte(args))
	if upstream := compact(t, <-h.args); upstream != want {
		t.Errorf("upstream arguments\n got %s\nwant %s", upstream, want)
	}
	digest, _ := g.ToolDigest("up", "echo")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("gatekeeper saw %d calls, want 1", len(got))
	}
	c := got[0]
	if gateArgs := compact(t, c.Arguments); gateArgs != want {
		t.Errorf("gate arguments\n got %s\nwant %s", gateArgs, want)
	}
	if c.Server != "up" || c.Tool != "echo" || c.Principal.ID != "alice" || c.ToolDigest != digest || c.KeepAlive != nil {
		t.Errorf("gate.Call = {Server:%q Tool:%q Principal:%q Digest:%q KeepAlive:%v}, want {up echo alice %s nil}",
			c.Server, c.Tool, c.Principal.ID, c.ToolDigest, c.KeepAlive != nil, digest)
	}
}

func TestResultNumbersOverHTTP(t *testing.T) {
	// structuredContent and _meta reach a go-sdk agent with their digits.
	var wire *tee
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, func(rt http.RoundTripper) http.RoundTripper {
		wire = &tee{next: rt}
		return wire
	})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__numbers"})
	if err != nil {
		t.Fatal(err)
	}
	if textOf(t, res) != "numbers" {
		t.Errorf("text = %q", textOf(t, res))
	}
	raw := wire.String()
	for _, want := range []string{`"structuredContent":` + numbersStructured, `"big":` + numbersMeta} {
		if !strings.Contains(raw, want) {
			t.Errorf("agent wire bytes lack %s:\n%s", want, raw)
		}
	}
	if strings.Contains(raw, "test-upstream") {
		t.Errorf("the upstream's serverInfo _meta reached the agent:\n%s", raw)
	}
}

// rawAgent speaks newline-delimited JSON-RPC to ServeStdio, so results are
// read as bytes, never decoded by an SDK.
type rawAgent struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Reader
}

func serveRawStdio(t *testing.T, g *Gateway, p approval.Principal) *rawAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(t.Context(), inR, outW, p) }()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	a := &rawAgent{t: t, in: inW, out: bufio.NewReader(outR)}
	a.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	a.response(0)
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	return a
}

func (a *rawAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatalf("write: %v", err)
	}
}

// response reads lines until the response to id, and returns it raw.
func (a *rawAgent) response(id int) string {
	a.t.Helper()
	for {
		line, err := a.out.ReadString('\n')
		if err != nil {
			a.t.Fatalf("read: %v", err)
		}
		var m struct{ ID json.RawMessage }
		if json.Unmarshal([]byte(line), &m) == nil && string(m.ID) == fmt.Sprint(id) {
			return line
		}
	}
}

func TestResultNumbersRaw(t *testing.T) {
	// Through both capture paths (stdio Connection wrapper, HTTP
	// RoundTripper), to an agent reading raw bytes: 1e400 does not fail the
	// call, and every literal arrives as the upstream wrote it.
	tests := []struct {
		name   string
		server func(t *testing.T) ServerConfig
	}{
		{name: "stdio", server: func(*testing.T) ServerConfig { return stdioServer("up") }},
		{name: "http", server: func(t *testing.T) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, []ServerConfig{tt.server(t)}, allowAll(), nil)
			a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
			for id, args := range map[int]string{1: `{}`, 2: `{"huge":true}`} {
				a.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up__numbers","arguments":%s}}`, id, args))
				line := a.response(id)
				sc := numbersStructured
				if id == 2 {
					sc = numbersHuge
				}
				for _, want := range []string{`"structuredContent":` + sc, `"_meta":{"big":` + numbersMeta + `}`} {
					if !strings.Contains(line, want) {
						t.Errorf("response lacks %s:\n%s", want, line)
					}
				}
				if strings.Contains(line, `"error"`) || strings.Contains(line, `"isError"`) {
					t.Errorf("call failed:\n%s", line)
				}
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	h := newHooks()
	gk := gatekeeperFunc(func(context.Context, gate.Call) gate.Admission {
		return gate.Admission{Message: "denied by rule never-delete", Meta: map[string]any{"toolgate/approval": map[string]any{"id": "a1"}}}
	})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gk, nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"x": 1}})
	if err != nil {
		t.Fatalf("refusal came as a JSON-RPC error: %v", err)
	}
	if !res.IsError || textOf(t, res) != "denied by rule never-delete" {
		t.Errorf("result = isError %v %q, want isError true %q", res.IsError, textOf(t, res), "denied by rule never-delete")
	}
	if diff := cmp.Diff(map[string]any{"id": "a1"}, res.Meta["toolgate/approval"]); diff != "" {
		t.Errorf("_meta (-want +got):\n%s", diff)
	}
	if n := h.count("echo"); n != 0 {
		t.Errorf("upstream ran %d times, want 0", n)
	}
}

func TestUnknownTool(t *testing.T) {
	admitted := &counter{}
	gk := gatekeeperFunc(func(context.Context, gate.Call) gate.Admission { admitted.inc(); return gate.Admission{Allowed: true} })
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, gk, nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	// MCP 2025-11-25 (tools, error handling): an unknown tool is a
	// JSON-RPC error, invalid params; only policy outcomes are isError.
	for _, name := range []string{"up__nope", "echo", "up_echo", "other__echo"} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name})
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams || wire.Message != "unknown tool: "+name+unknownToolHint {
			t.Errorf("%s: %+v, %v; want JSON-RPC error %d \"unknown tool: %s\"", name, res, err, jsonrpc.CodeInvalidParams, name)
		}
	}
	if admitted.get() != 0 {
		t.Errorf("the gatekeeper was asked about unknown tools")
	}
}

func TestLargeResults(t *testing.T) {
	// Case C09: one 5 MiB stdio line and one 2 MiB SSE event pass intact.
	tests := []struct {
		name   string
		server func(t *testing.T) ServerConfig
		size   int
	}{
		{name: "stdio 5MiB", server: func(*testing.T) ServerConfig { return stdioServer("up") }, size: 5 << 20},
		{name: "http 2MiB", server: func(t *testing.T) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}
		}, size: 2 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, []ServerConfig{tt.server(t)}, allowAll(), nil)
			cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__big", Arguments: map[string]any{"n": tt.size}})
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, res); got != bigText(tt.size) {
				t.Errorf("text of %d bytes differs from the %d bytes sent", len(got), tt.size)
			}
			// The session survives.
			if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo"}); err != nil {
				t.Errorf("next call: %v", err)
			}
		})
	}
}

func TestCallTimeout(t *testing.T) {
	// Case C08 "mute": call_timeout fails the call with a JSON-RPC error that
	// names it, and the upstream sees the cancellation.
	//
	// Under load the 100 ms can pass before the call's POST is written:
	// the upstream then never sees the call, and the test waited for its
	// end for good (until the package's timeout: once in a 50-run shard
	// under load). A call is waited for only once it reached the
	// upstream: an echo call answered after it (the upstream session's
	// POSTs are written one after another) tells whether it did; else it
	// is tried again.
	h := newHooks()
	var arrived atomic.Int32
	srv := newUpstreamServer(h)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"name":"sleep"`)) {
				arrived.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	sc := ServerConfig{Name: "up", URL: ts.URL, CallTimeout: 100 * time.Millisecond}
	g := newGateway(t, []ServerConfig{sc}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	for attempt := 1; ; attempt++ {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__sleep"})
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) || wire.Code != CodeUpstreamTimeout || !strings.Contains(wire.Message, "call_timeout 100ms") {
			t.Fatalf("CallTool = %v, want a JSON-RPC error %d naming call_timeout 100ms", err, CodeUpstreamTimeout)
		}
		// The echo is bound by call_timeout too: one that timed out is no
		// sign either way, and the attempt is made again.
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{}})
		if err == nil && !res.IsError && arrived.Load() > 0 {
			break
		}
		if attempt == 10 {
			t.Fatalf("none of %d calls seen to reach the upstream before its call_timeout (last echo: %v)", attempt, err)
		}
	}
	select {
	case cause := <-h.ended:
		if !errors.Is(cause, context.Canceled) {
			t.Errorf("upstream handler ended with %v, want context.Canceled (notifications/cancelled)", cause)
		}
	case <-time.After(testWait):
		t.Fatal("the upstream's handler of the timed-out call did not end (no notifications/cancelled)")
	}
}
