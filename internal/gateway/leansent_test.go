package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// armCheckWriter is a stdio session's raw writer (rawCalls.w) that, at
// each tools/call line, tells whether the lean call it carries had its
// heartbeat armed already (armed), then writes the line.
type armCheckWriter struct {
	w     io.Writer
	raw   *rawCalls
	armed chan bool
}

func (a armCheckWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"tools/call"`)) {
		if o := a.raw.anyOrigin(); o != nil && o.lean != nil {
			if hw, ok := o.lean.w.(*heartbeatWriter); ok {
				hw.mu.Lock()
				armed := hw.timer != nil
				hw.mu.Unlock()
				select {
				case a.armed <- armed:
				default:
				}
			}
		}
	}
	return a.w.Write(p)
}

// TestLeanWatchesArmedAfterTheLine: an allowed lean call to a stdio
// upstream writes its line to the child before its heartbeat (and the
// watch on the POST's end, armed with it) is set up: neither is on the
// path from the agent's request to the line (leansent.go).
func TestLeanWatchesArmedAfterTheLine(t *testing.T) {
	g, u, _ := rawTestGateway(t, &Options{HealthInterval: time.Hour})
	c, err := u.session()
	if err != nil {
		t.Fatal(err)
	}
	armed := make(chan bool, 1)
	// Under the raw calls' lock, which every call takes before it writes.
	c.raw.mu.Lock()
	c.raw.w = armCheckWriter{w: c.raw.w, raw: c.raw, armed: armed}
	c.raw.mu.Unlock()
	base := serveHTTP(t, g, nil)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, g, cs.ID())
	resp, b := sessionExchange(t, http.MethodPost, base, aliceToken, cs.ID(), cs.InitializeResult().ProtocolVersion,
		strings.NewReader(leanCall("w-1", "up__echo", `{"message":"hi"}`)))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"id":"w-1","result"`)) {
		t.Fatalf("lean call: %d %s", resp.StatusCode, b)
	}
	select {
	case a := <-armed:
		if a {
			t.Error("the call's heartbeat was armed before its line was written to the child: the line waited for the call's watches")
		}
	default:
		t.Fatal("the call's line was not seen with a lean call waiting for it")
	}
}

// TestLeanStdioWatchesWhileWaiting: once its line is sent, a lean call to
// a stdio upstream that runs long gets its heartbeats, and its POST's
// end cancels it (after DropGrace), as before the watches were armed
// after the line.
func TestLeanStdioWatchesWhileWaiting(t *testing.T) {
	sc := stdioServer("up")
	sc.Sessions = SessionsShared
	g := newGateway(t, []ServerConfig{sc}, allowAll(), &Options{HealthInterval: time.Hour})
	waitUpstream(t, g, "up", nil)
	base := serveHTTP(t, g, &HTTPOptions{HeartbeatFirst: 10 * time.Millisecond, Heartbeat: 10 * time.Millisecond, DropGrace: time.Millisecond})
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, g, cs.ID())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(leanCall("s-1", "up__sleep", `{}`)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": cs.ID(),
		"Mcp-Protocol-Version": cs.InitializeResult().ProtocolVersion, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want the heartbeats' event stream", ct)
	}
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, ":") {
			t.Fatalf("first line %q, want a heartbeat comment", line)
		}
	case <-time.After(testWait):
		t.Fatal("no heartbeat on the POST of a call waiting for its stdio upstream")
	}
	cancel() // the agent goes away: the call is cancelled and untracked
	waitNoCalls(t, g)
}

// TestLeanInPathAllocations: the lean front's body read of a POST with a
// Content-Length makes the body's buffer alone (no MaxBytesReader, which
// cannot fire within the limit), and a numeric id's in-flight key is one
// allocation (issue 13: both are on the path from the agent's request to
// the child's line).
func TestLeanInPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const msg = `{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo"}}`
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	body := strings.NewReader(msg)
	r.Body, r.ContentLength = io.NopCloser(body), int64(len(msg))
	w := httptest.NewRecorder()
	if n := testing.AllocsPerRun(100, func() {
		body.Reset(msg)
		lb := leanBody{w: w, r: r, max: 1 << 20}
		if b, err := lb.get(); err != nil || len(b) != len(msg) {
			t.Fatalf("get: %q, %v", b, err)
		}
	}); n > 1 {
		t.Errorf("the body's read made %v allocations, want 1 (its buffer)", n)
	}
	id := json.RawMessage(`12345`)
	if n := testing.AllocsPerRun(100, func() {
		if k := canonicalID(id); k != "n:12345" {
			t.Fatalf("canonicalID: %q", k)
		}
	}); n > 1 {
		t.Errorf("canonicalID of a numeric id made %v allocations, want 1", n)
	}
}
