package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

func TestCancelReachesUpstream(t *testing.T) {
	// Case C02: the agent's notifications/cancelled reaches the upstream
	// handler (the SDK forwards it when the handler ctx ends).
	h := newHooks()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, allowAll(), nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__sleep"})
		errc <- err
	}()
	<-h.started
	// Another call on the same session still completes.
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo"}); err != nil {
		t.Fatalf("concurrent call: %v", err)
	}
	cancel()
	if cause := <-h.ended; !errors.Is(cause, context.Canceled) {
		t.Errorf("upstream handler ended with %v, want context.Canceled", cause)
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool = %v, want context.Canceled", err)
	}
}

// holdingGatekeeper holds every call until its ctx ends and reports the
// cause; calls signal held when they start.
type holdingGatekeeper struct {
	held  chan gate.Call
	cause chan error
}

func newHoldingGatekeeper() *holdingGatekeeper {
	return &holdingGatekeeper{held: make(chan gate.Call, 8), cause: make(chan error, 8)}
}

// waitHeld waits until a call is held.
func (h *holdingGatekeeper) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(testWait):
		t.Fatal("no call was held")
	}
}

// waitCause waits until a held call ends and returns its ctx's cause.
func (h *holdingGatekeeper) waitCause(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.cause:
		return err
	case <-time.After(testWait):
		t.Fatal("the held call was never cancelled")
		return nil
	}
}

func (h *holdingGatekeeper) Admit(ctx context.Context, c gate.Call) gate.Admission {
	h.held <- c
	<-ctx.Done()
	h.cause <- context.Cause(ctx)
	return gate.Admission{Message: "cancelled"}
}

func TestCancelWhileHeld(t *testing.T) {
	// An explicit cancel of a held call gives cause context.Canceled, not
	// ErrClientGone, although the go-sdk client also aborts the POST.
	hg := newHoldingGatekeeper()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, hg, nil)
	// A generous grace: the notification must win even on a loaded machine.
	cs := connectHTTP(t, serveHTTP(t, g, &HTTPOptions{DropGrace: time.Minute}), aliceToken, nil, nil)

	ctx, cancel := context.WithCancel(t.Context())
	go func() { _, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo"}) }()
	hg.waitHeld(t)
	cancel()
	if cause := hg.waitCause(t); !errors.Is(cause, context.Canceled) || errors.Is(cause, ErrClientGone) {
		t.Errorf("held call cancelled with %v, want context.Canceled", cause)
	}
}

// connTracker remembers the client's TCP connections so a test can drop
// them as a killed client would.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *connTracker) transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
		}
		return conn, err
	}
	return tr
}

func (c *connTracker) dropAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}

func TestClientGoneWhileHeld(t *testing.T) {
	// A client whose connection drops (no notifications/cancelled) gets its
	// held call cancelled with ErrClientGone (notes §3).
	hg := newHoldingGatekeeper()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, hg, nil)
	base := serveHTTP(t, g, nil)
	var ct connTracker
	cs := connectHTTP(t, base, aliceToken, nil, func(http.RoundTripper) http.RoundTripper {
		return bearer{token: aliceToken, next: ct.transport()}
	})
	go func() { _, _ = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo"}) }()
	hg.waitHeld(t)
	ct.dropAll()
	if cause := hg.waitCause(t); !errors.Is(cause, ErrClientGone) {
		t.Errorf("held call cancelled with %v, want ErrClientGone", cause)
	}
}

func TestDeleteSessionCancelsHeld(t *testing.T) {
	hg := newHoldingGatekeeper()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, hg, nil)
	base := serveHTTP(t, g, nil)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	go func() { _, _ = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo"}) }()
	hg.waitHeld(t)

	// Another principal cannot cancel alice's calls with her session id.
	del := func(token string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, base+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del(bobToken); code != http.StatusForbidden {
		t.Errorf("DELETE by bob: %d, want 403", code)
	}
	if code := del(aliceToken); code != http.StatusNoContent {
		t.Errorf("DELETE by alice: %d, want 204", code)
	}
	cause := hg.waitCause(t)
	if !errors.Is(cause, ErrClientGone) || !strings.Contains(cause.Error(), "deleted its session") {
		t.Errorf("held call cancelled with %v, want ErrClientGone (session deleted)", cause)
	}
}

func TestHeartbeatWhileHeld(t *testing.T) {
	// A held call without a progress token still gets its response headers
	// and ": hb" comments, and then its result.
	seen := make(chan struct{})
	var once sync.Once
	gk := gatekeeperFunc(func(ctx context.Context, c gate.Call) gate.Admission {
		select {
		case <-seen:
		case <-ctx.Done():
		}
		return gate.Admission{Allowed: true}
	})
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, gk, nil)
	base := serveHTTP(t, g, &HTTPOptions{HeartbeatFirst: 10 * time.Millisecond, Heartbeat: 10 * time.Millisecond})
	cs := connectHTTP(t, base, aliceToken, nil, func(rt http.RoundTripper) http.RoundTripper {
		return &tee{next: rt, onRead: func(all string) {
			if strings.Count(all, heartbeatComment) >= 2 {
				once.Do(func() { close(seen) })
			}
		}}
	})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != `{"k":"v"}` {
		t.Errorf("result %q", got)
	}
}

func TestCloseEndsHeldCalls(t *testing.T) {
	// Close cuts held calls short with ErrShutdown (not context.Canceled, so
	// the approval stays pending), on HTTP and on stdio.
	hg := newHoldingGatekeeper()
	g, err := New(t.Context(), []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, hg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	go func() { _, _ = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo"}) }()
	a := serveRawStdio(t, g, approval.Principal{ID: "desktop", Kind: "agent"})
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`)
	hg.waitHeld(t)
	hg.waitHeld(t)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if cause := hg.waitCause(t); !errors.Is(cause, ErrShutdown) {
			t.Errorf("held call ended with %v, want ErrShutdown", cause)
		}
	}
	if line := a.response(1); !strings.Contains(line, `"isError":true`) {
		t.Errorf("stdio agent got %s, want an isError result", line)
	}
	// New calls are refused.
	a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`)
	if line := a.response(2); !strings.Contains(line, ErrShutdown.Error()) {
		t.Errorf("call after Close: %s", line)
	}
}

func TestServeStdioEndEndsHeldCalls(t *testing.T) {
	hg := newHoldingGatekeeper()
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, hg, nil)
	ctx, cancel := context.WithCancel(t.Context())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	done := make(chan error, 1)
	go func() { done <- g.ServeStdio(ctx, inR, outW, approval.Principal{ID: "desktop", Kind: "agent"}) }()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`,
	} {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	hg.waitHeld(t)
	cancel()
	if cause := hg.waitCause(t); !errors.Is(cause, ErrShutdown) {
		t.Errorf("held call ended with %v, want ErrShutdown", cause)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("ServeStdio = %v, want context.Canceled", err)
	}
	_ = inW.Close()
}
