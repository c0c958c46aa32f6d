package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBodyNotAMessageIsNotQuoted (fixes32): a POST whose body is not
// JSON, or is JSON but no JSON-RPC message, is answered 400 with a
// JSON-RPC error (application/json, id null; -32700 or -32600) that does
// not quote the body, on every front: without a session (the SDK path and
// a 2026-07-28 request), on a session the lean front serves, and on one
// only the SDK serves (DisableLeanCalls). On 31ac484 the SDK answered 400
// text/plain "malformed payload: … invalid token: <the body>". A parse
// error names the body, not "the line" as on stdio: on 8308deeb a body
// starting with '{' got the stdio wording (policy44).
func TestBodyNotAMessageIsNotQuoted(t *testing.T) {
	const secret = "SECRET-4f1c"
	bodies := []struct {
		body string
		code int
	}{
		{"not json <b>" + secret + "</b>", -32700},
		{"[" + secret + "]", -32700},
		{"  \x00" + secret, -32700},
		{"", -32700},
		{`{"jsonrpc":"2.0","id":1,"method":"` + secret, -32700},
		{`"` + secret + `"`, -32600},
		{`["` + secret + `"]`, -32600},
		{`12345`, -32600},
	}
	for _, lean := range []bool{true, false} {
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
		base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean})
		const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fixes32","version":"1"}}}`
		ex, b := sessionExchange(t, http.MethodPost, base, aliceToken, "", "", strings.NewReader(init))
		sid := ex.Header.Get("Mcp-Session-Id")
		if ex.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d, session %q: %s", ex.StatusCode, sid, b)
		}
		if ex, b = sessionExchange(t, http.MethodPost, base, aliceToken, sid, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); ex.StatusCode/100 != 2 {
			t.Fatalf("notifications/initialized: %d: %s", ex.StatusCode, b)
		}
		if lean {
			waitInitialized(t, g, sid)
		}
		for _, front := range []struct{ name, sid, version string }{
			{"no session", "", ""},
			{"no session, 2026-07-28", "", modernVersion},
			{"session", sid, "2025-06-18"},
		} {
			for _, bb := range bodies {
				ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, front.sid, front.version, strings.NewReader(bb.body))
				var msg struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				err := json.Unmarshal(got, &msg)
				if ex.StatusCode != http.StatusBadRequest || ex.Header.Get("Content-Type") != "application/json" || err != nil ||
					msg.JSONRPC != "2.0" || string(msg.ID) != "null" || msg.Error.Code != bb.code || strings.Contains(string(got), secret) ||
					bb.code == -32700 && msg.Error.Message != bodyParseError {
					t.Errorf("lean %v, %s, body %q: %d %q %q; want 400 application/json, a JSON-RPC error %d with id null, not quoting the body (a parse error saying %q)",
						lean, front.name, bb.body, ex.StatusCode, ex.Header.Get("Content-Type"), got, bb.code, bodyParseError)
				}
			}
		}
		// A message still goes through on the same session.
		if ex, b = sessionExchange(t, http.MethodPost, base, aliceToken, sid, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)); ex.StatusCode != http.StatusOK || !strings.Contains(string(b), "up__echo") {
			t.Errorf("lean %v: tools/list after the refusals: %d %s", lean, ex.StatusCode, b)
		}
	}
}

// TestSessionBodyTooLargeWithoutLean (fixes32): on a session the lean
// front does not serve, the body is now read before the SDK (to refuse one
// that is no message); a chunked body past MaxBody is still answered 413
// naming the limit, as on a lean session.
func TestSessionBodyTooLargeWithoutLean(t *testing.T) {
	for _, lean := range []bool{true, false} {
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
		base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean, MaxBody: 1024})
		const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fixes32","version":"1"}}}`
		ex, b := sessionExchange(t, http.MethodPost, base, aliceToken, "", "", strings.NewReader(init))
		sid := ex.Header.Get("Mcp-Session-Id")
		if ex.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d, session %q: %s", ex.StatusCode, sid, b)
		}
		sessionExchange(t, http.MethodPost, base, aliceToken, sid, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
		if lean {
			waitInitialized(t, g, sid)
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"pad":"` + strings.Repeat("x", 2048) + `"}}}`
		// A reader of unknown length: the client sends the body chunked.
		ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, sid, "2025-06-18", io.MultiReader(strings.NewReader(body)))
		if ex.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(got), "request body exceeds 1024 bytes") {
			t.Errorf("lean %v: chunked body of %d bytes on a session: %d %q; want 413 naming the limit", lean, len(body), ex.StatusCode, got)
		}
	}
}
