package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// halfCloseRound sends req on a new connection to base, half-closes it
// (FIN) at once and returns the answer's status, Content-Type and body.
func halfCloseRound(t *testing.T, base string, req func(host string) string) (int, string, []byte) {
	t.Helper()
	c, host := dialRaw(t, base)
	defer c.Close()
	if _, err := io.WriteString(c, req(host)); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer after a half-close: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer after a half-close: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestHalfCloseAfterSessionCall (fixes36): a client of a 2025-era session
// that half-closes (FIN) right after its tools/call, an allowed one, gets
// the tool's result on the lean front every time: before 2026-07-28 a
// disconnection is not a cancellation (Streamable HTTP, 2025-11-25), and
// the call that ran answers on the half-open connection.
func TestHalfCloseAfterSessionCall(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	const rounds = 12
	for i := range rounds {
		id := fmt.Sprint("h-", i)
		st, ct, b := halfCloseRound(t, f.base, func(host string) string {
			return rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, id, "up__numbers", `{}`, "")
		})
		var msg struct {
			ID     string          `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if st != http.StatusOK || ct != "application/json" || json.Unmarshal(b, &msg) != nil || msg.ID != id || len(msg.Result) == 0 {
			t.Fatalf("round %d: %d %s %q, want 200 application/json with the result of %s", i, st, ct, b, id)
		}
	}
	if k := f.h.count("numbers"); k != rounds {
		t.Fatalf("numbers ran %d times, want %d", k, rounds)
	}
}

// TestHalfCloseAfterModernCall (fixes36): a 2026-07-28 client that
// half-closes right after its tools/call is taken as gone (net/http
// cancels the request at the FIN, which at the socket cannot be told
// from a close; 2026-07-28 makes a disconnect the cancellation): each
// answer is still a whole JSON-RPC response with the request's id, the
// tool's result or the error "call cancelled" (it may have run), never
// an empty body, and no result is claimed for a call that did not run.
func TestHalfCloseAfterModernCall(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	const rounds = 12
	results := 0
	for i := range rounds {
		id := fmt.Sprint(100 + i)
		st, ct, b := halfCloseRound(t, f.base, func(host string) string {
			return rawModernRequest(host, id, "up__numbers", `{}`)
		})
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if st != http.StatusOK || ct != "application/json" || json.Unmarshal(b, &msg) != nil || string(msg.ID) != id ||
			(len(msg.Result) == 0) == (msg.Error == nil) {
			t.Fatalf("round %d: %d %s %q, want 200 application/json with a result or an error for id %s", i, st, ct, b, id)
		}
		if msg.Error != nil && (msg.Error.Code != CodeUpstreamUnavailable || len(msg.Error.Message) < len("call cancelled") || msg.Error.Message[:len("call cancelled")] != "call cancelled") {
			t.Fatalf("round %d: error %d %q, want %d \"call cancelled: ...\"", i, msg.Error.Code, msg.Error.Message, CodeUpstreamUnavailable)
		}
		if msg.Error == nil {
			results++
		}
	}
	if k := f.h.count("numbers"); k < results {
		t.Fatalf("numbers ran %d times, %d results answered", k, results)
	}
}
