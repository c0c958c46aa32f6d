package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestUnknownMethodNotQuoted (fixes33): a well-formed message whose method
// no one serves is answered with a JSON-RPC error -32601 "Method not
// found" (application/json, the request's id, null for a notification)
// that does not quote the method, with the SDK's status (404 for a
// 2026-07-28 request, else 400), on every front: without a session
// (2026-07-28), on a session the lean front serves and on one only the
// SDK serves. On 78ec92b the SDK answered a session's 400 text/plain
// "JSON RPC not handled: \"<method>\" unsupported", and a 2026-07-28
// request's -32601 quoting it. Every method of knownMethods still reaches
// the SDK, which serves it (does not answer "not handled").
func TestUnknownMethodNotQuoted(t *testing.T) {
	const secret = "SECRET-77ab"
	bodies := []struct {
		body, id string
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"no/` + secret + `"}`, "3"},
		{`{"jsonrpc":"2.0","id":"x","method":"` + secret + `","params":{}}`, `"x"`},
		{`{"jsonrpc":"2.0","method":"notifications/` + secret + `"}`, "null"},
	}
	for _, lean := range []bool{true, false} {
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
		base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean})
		const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fixes33","version":"1"}}}`
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
		fronts := []struct{ name, sid, version string }{
			{"no session, 2026-07-28", "", modernVersion},
			{"session", sid, "2025-06-18"},
		}
		for _, front := range fronts {
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
				status := http.StatusBadRequest
				if front.sid == "" && bb.id != "null" {
					status = http.StatusNotFound
				}
				if ex.StatusCode != status || ex.Header.Get("Content-Type") != "application/json" || err != nil ||
					msg.JSONRPC != "2.0" || string(msg.ID) != bb.id || msg.Error.Code != -32601 || msg.Error.Message != "Method not found" ||
					strings.Contains(string(got), secret) {
					t.Errorf("lean %v, %s, body %s: %d %q %q; want %d application/json, a JSON-RPC error -32601 \"Method not found\" with id %s, not quoting the method",
						lean, front.name, bb.body, ex.StatusCode, ex.Header.Get("Content-Type"), got, status, bb.id)
				}
			}
			// Every known method still reaches the SDK, which serves it.
			for m := range knownMethods {
				body := `{"jsonrpc":"2.0","id":9,"method":"` + m + `","params":{}}`
				if strings.HasPrefix(m, "notifications/") {
					body = `{"jsonrpc":"2.0","method":"` + m + `","params":{}}`
				}
				ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, front.sid, front.version, strings.NewReader(body))
				if strings.Contains(string(got), "not handled") || strings.Contains(string(got), "Method not found") {
					t.Errorf("lean %v, %s: known method %s: %d %q", lean, front.name, m, ex.StatusCode, got)
				}
			}
		}
		// A message still goes through on the same session.
		if ex, b = sessionExchange(t, http.MethodPost, base, aliceToken, sid, "2025-06-18", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)); ex.StatusCode != http.StatusOK || !strings.Contains(string(b), "up__echo") {
			t.Errorf("lean %v: tools/list after the refusals: %d %s", lean, ex.StatusCode, b)
		}
	}
}

// TestUnknownMethodInBatchNotQuoted: a JSON-RPC batch on a 2025-03-26
// session (the last revision with batches) that carries a method no one
// serves is refused as a whole, as the SDK refuses it, but with 400
// application/json and a JSON-RPC error -32601 "Method not found" without
// an id, not quoting the method (the SDK's text/plain "JSON RPC not
// handled: \"<method>\" unsupported"); a batch of known methods is still
// served, and on a 2025-06-18 session a batch still gets the SDK's
// refusal of batches. Lean front on and off.
func TestUnknownMethodInBatchNotQuoted(t *testing.T) {
	const secret = "SECRET-35cd"
	for _, lean := range []bool{true, false} {
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
		base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean})
		sids := map[string]string{}
		for _, v := range []string{"2025-03-26", "2025-06-18"} {
			init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"fixes35","version":"1"}}}`
			ex, b := sessionExchange(t, http.MethodPost, base, aliceToken, "", "", strings.NewReader(init))
			sid := ex.Header.Get("Mcp-Session-Id")
			if ex.StatusCode != http.StatusOK || sid == "" || !strings.Contains(string(b), `"protocolVersion":"`+v+`"`) {
				t.Fatalf("initialize %s: %d, session %q: %s", v, ex.StatusCode, sid, b)
			}
			if ex, b = sessionExchange(t, http.MethodPost, base, aliceToken, sid, v, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); ex.StatusCode/100 != 2 {
				t.Fatalf("notifications/initialized: %d: %s", ex.StatusCode, b)
			}
			if lean {
				waitInitialized(t, g, sid)
			}
			sids[v] = sid
		}
		for _, body := range []string{
			`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"no/` + secret + `"}]`,
			`[{"jsonrpc":"2.0","method":"notifications/` + secret + `"}]`,
			`[{"jsonrpc":"2.0","id":"x","method":"` + secret + `","params":{}},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`,
		} {
			for _, version := range []string{"2025-03-26", ""} { // no header: the SDK takes 2025-03-26
				ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, sids["2025-03-26"], version, strings.NewReader(body))
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
					msg.JSONRPC != "2.0" || string(msg.ID) != "null" || msg.Error.Code != -32601 || msg.Error.Message != "Method not found" ||
					strings.Contains(string(got), secret) {
					t.Errorf("lean %v, header %q, batch %s: %d %q %q; want 400 application/json, a JSON-RPC error -32601 \"Method not found\" with id null, not quoting the method",
						lean, version, body, ex.StatusCode, ex.Header.Get("Content-Type"), got)
				}
			}
		}
		// A batch of known methods is served.
		ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, sids["2025-03-26"], "2025-03-26",
			strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`))
		if ex.StatusCode != http.StatusOK || !strings.Contains(string(got), `"id":1,"result":{}`) || !strings.Contains(string(got), "up__echo") {
			t.Errorf("lean %v: a batch of known methods: %d %s; want both answered", lean, ex.StatusCode, got)
		}
		// Where batches are gone, the SDK's refusal of the batch stands.
		ex, got = sessionExchange(t, http.MethodPost, base, aliceToken, sids["2025-06-18"], "2025-06-18",
			strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"no/x"}]`))
		if ex.StatusCode != http.StatusBadRequest || !strings.Contains(string(got), "batching is not supported") {
			t.Errorf("lean %v: a batch on a 2025-06-18 session: %d %s; want the SDK's 400 refusing batches", lean, ex.StatusCode, got)
		}
	}
}
