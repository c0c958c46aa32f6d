package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// shutdownAnswer is what the gate tells a held call's agent at shutdown
// (gate.abandon), as the test gatekeepers below answer it.
const shutdownAnswer = "the gateway is shutting down; nothing was run"

// stdioBubbleAgent serves one stdio agent over pipes inside a synctest
// bubble, with one tool ("up__echo") in the catalog and no upstream: the
// gatekeepers of these tests never let a call through.
type stdioBubbleAgent struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func newStdioBubbleAgent(t *testing.T, ctx context.Context, gk Gatekeeper, opts *Options) (*Gateway, *stdioBubbleAgent) {
	t.Helper()
	g, err := New(ctx, nil, gk, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if err := g.applyTools("up", upstreamTools{defs: []*mcp.Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, true); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &stdioBubbleAgent{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() { a.done <- g.ServeStdio(ctx, inR, outW, approval.Principal{ID: "desktop", Kind: "agent"}) }()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
	})
	a.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if _, err := a.response(0); err != nil {
		t.Fatal(err)
	}
	a.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	return g, a
}

func (a *stdioBubbleAgent) send(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.in, line+"\n"); err != nil {
		a.t.Fatalf("write: %v", err)
	}
}

// response reads lines until the response to id; an error when the
// output ends first.
func (a *stdioBubbleAgent) response(id int) (string, error) {
	for {
		line, err := a.out.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("the output ended before the response to %d: %w", id, err)
		}
		var m struct{ ID json.RawMessage }
		if json.Unmarshal([]byte(line), &m) == nil && string(m.ID) == fmt.Sprint(id) {
			return line, nil
		}
	}
}

// lateGatekeeper holds each call until its ctx ends; then it waits until
// every other goroutine of the bubble is blocked (the gateway's shutdown
// has gone as far as it goes without this answer: before shutdown37 it
// had begun closing the session, whose connection then refused the
// answer) and only then answers as the gate does at shutdown.
type lateGatekeeper struct {
	held chan struct{}
}

func (h *lateGatekeeper) Admit(ctx context.Context, c gate.Call) gate.Admission {
	h.held <- struct{}{}
	<-ctx.Done()
	synctest.Wait()
	return gate.Admission{Message: shutdownAnswer}
}

func TestShutdownWritesHeldAnswerStdio(t *testing.T) {
	// The end of ServeStdio's ctx (serve's SIGTERM) cancels the held call;
	// its answer is written before the session closes.
	synctest.Test(t, func(t *testing.T) {
		gk := &lateGatekeeper{held: make(chan struct{}, 1)}
		ctx, cancel := context.WithCancel(t.Context())
		_, a := newStdioBubbleAgent(t, ctx, gk, nil)
		a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`)
		<-gk.held
		cancel()
		line, err := a.response(1)
		if err != nil {
			t.Fatalf("the held call's agent got no answer at shutdown: %v", err)
		}
		if !strings.Contains(line, `"isError":true`) || !strings.Contains(line, "shutting down") {
			t.Errorf("the held call was answered %s, want an isError result saying the gateway is shutting down", line)
		}
		if err := <-a.done; !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio = %v, want context.Canceled", err)
		}
	})
}

// slowGatekeeper holds each call until its ctx ends, then answers only
// once release is closed (a gate that takes its time).
type slowGatekeeper struct {
	held    chan struct{}
	release chan struct{}
}

func (h *slowGatekeeper) Admit(ctx context.Context, c gate.Call) gate.Admission {
	h.held <- struct{}{}
	<-ctx.Done()
	<-h.release
	return gate.Admission{Message: shutdownAnswer}
}

func TestShutdownAnswerWaitIsBounded(t *testing.T) {
	// An answer that is not written within ShutdownGrace does not keep the
	// session open longer: at the grace it is closed (and says so).
	synctest.Test(t, func(t *testing.T) {
		gk := &slowGatekeeper{held: make(chan struct{}, 1), release: make(chan struct{})}
		logs := &logBuffer{}
		ctx, cancel := context.WithCancel(t.Context())
		const grace = 3 * time.Second
		_, a := newStdioBubbleAgent(t, ctx, gk, &Options{ShutdownGrace: grace, Logger: logs.logger()})
		a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`)
		<-gk.held
		cancel()
		const warn = "closing the stdio session with answers of cancelled calls not yet written"
		time.Sleep(grace - time.Nanosecond)
		synctest.Wait()
		if strings.Contains(logs.String(), warn) {
			t.Fatalf("the session was closed before the grace:\n%s", logs)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !strings.Contains(logs.String(), warn) {
			t.Fatalf("the session was not closed at the grace:\n%s", logs)
		}
		// The SDK's Close waits for the handler; the late answer is
		// dropped (the session is closing).
		close(gk.release)
		if err := <-a.done; !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio = %v, want context.Canceled", err)
		}
	})
}

// pipeListener is a net.Listener of in-memory connections (net.Pipe),
// whose blocking is durable inside a synctest bubble, as a socket's is not.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial is the client's side of a new connection.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func TestShutdownWritesHeldAnswerHTTP(t *testing.T) {
	// Close cancels a call held on the SDK path of an HTTP agent (the
	// go-sdk client, 2025-11-25); its answer reaches the agent before
	// Close closes the session (before shutdown37: "request terminated
	// without response").
	synctest.Test(t, func(t *testing.T) {
		gk := &lateGatekeeper{held: make(chan struct{}, 1)}
		g, err := New(t.Context(), nil, gk, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.applyTools("up", upstreamTools{defs: []*mcp.Tool{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, true); err != nil {
			t.Fatal(err)
		}
		h, err := g.Handler(testAuth, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
		served := make(chan struct{})
		go func() { _ = srv.Serve(l); close(served) }()
		tr := &http.Transport{DialContext: l.dial}
		defer func() {
			_ = srv.Close()
			<-served
			tr.CloseIdleConnections()
		}()
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: "http://pipe/mcp", HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: tr}}, DisableStandaloneSSE: true}, era2025)
		if err != nil {
			t.Fatalf("connect agent: %v", err)
		}
		defer func() { _ = cs.Close() }()
		type result struct {
			res *mcp.CallToolResult
			err error
		}
		got := make(chan result, 1)
		go func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{}})
			got <- result{res, err}
		}()
		<-gk.held
		closed := make(chan struct{})
		go func() { _ = g.Close(); close(closed) }()
		r := <-got
		<-closed
		if r.err != nil {
			t.Fatalf("the held call's agent got %v at shutdown, want its answer", r.err)
		}
		if msg := textOf(t, r.res); !r.res.IsError || !strings.Contains(msg, "shutting down") {
			t.Errorf("the held call was answered %q, want an isError result saying the gateway is shutting down", msg)
		}
	})
}

// scriptConn is an mcp.Connection that reads the messages it was given
// and records nothing.
type scriptConn struct{ in []jsonrpc.Message }

func (c *scriptConn) Read(context.Context) (jsonrpc.Message, error) {
	if len(c.in) == 0 {
		return nil, io.EOF
	}
	m := c.in[0]
	c.in = c.in[1:]
	return m, nil
}
func (*scriptConn) Write(context.Context, jsonrpc.Message) error { return nil }
func (*scriptConn) Close() error                                 { return nil }
func (*scriptConn) SessionID() string                            { return "" }

func TestOwingConnCounts(t *testing.T) {
	// Calls read are owed until a response with their id is written (one
	// each, ids reused too); notifications and other responses owe
	// nothing; Close releases what is left, in the parent too.
	id := func(v int64) jsonrpc.ID { i, _ := jsonrpc.MakeID(float64(v)); return i }
	var parent answers
	owed := &answers{parent: &parent}
	c := &owingConn{Connection: &scriptConn{in: []jsonrpc.Message{
		&jsonrpc.Request{ID: id(1), Method: "tools/call"},
		&jsonrpc.Request{ID: id(1), Method: "tools/call"},
		&jsonrpc.Request{ID: id(2), Method: "ping"},
		&jsonrpc.Request{Method: "notifications/initialized"},
	}}, owed: owed, ids: map[jsonrpc.ID]int{}}
	for range 4 {
		if _, err := c.Read(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	count := func(a *answers) int { a.mu.Lock(); defer a.mu.Unlock(); return a.n }
	if got := count(owed); got != 3 {
		t.Fatalf("owed %d after reading three calls and a notification, want 3", got)
	}
	for _, m := range []jsonrpc.Message{&jsonrpc.Response{ID: id(1)}, &jsonrpc.Response{ID: id(7)}, &jsonrpc.Request{ID: id(9), Method: "roots/list"}} {
		if err := c.Write(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if got, gotParent := count(owed), count(&parent); got != 2 || gotParent != 2 {
		t.Fatalf("owed %d (parent %d) after one response to a call read, want 2 (2)", got, gotParent)
	}
	select {
	case <-parent.settled():
		t.Fatal("the parent settled with answers owed")
	default:
	}
	_ = c.Close()
	if got, gotParent := count(owed), count(&parent); got != 0 || gotParent != 0 {
		t.Fatalf("owed %d (parent %d) after Close, want 0", got, gotParent)
	}
	<-parent.settled()
	if !owed.wait(0) {
		t.Error("wait reported answers owed after Close")
	}
}
