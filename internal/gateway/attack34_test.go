package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnknownMethodReadAsTheSDKReads (attack34): refuseUnknownMethod reads
// the message's "method" member as the SDK does, by its exact name. Go's
// encoding/json matches a struct field's name without regard to case, so
// on integ44 a member "Method" or "METHOD" after "method" was taken for
// the method: a tools/list with a stray "METHOD" member was refused -32601
// although the SDK serves it, and an unknown method followed by
// "Method":"ping" went past the check to the SDK, which answered with a
// text quoting it (what fixes33 stopped).
func TestUnknownMethodReadAsTheSDKReads(t *testing.T) {
	const secret = "SECRET-34cd"
	for _, lean := range []bool{true, false} {
		g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
		base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean})
		const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"attack34","version":"1"}}}`
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
			{"no session, 2026-07-28", "", modernVersion},
			{"session", sid, "2025-06-18"},
		} {
			// A known method with a stray member of another case is served.
			ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, front.sid, front.version,
				strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list","METHOD":"x"}`))
			// (A 2026-07-28 request without its _meta is refused -32602 by
			// the SDK, which read it as tools/list.)
			if served := ex.StatusCode == http.StatusOK && strings.Contains(string(got), "up__echo"); strings.Contains(string(got), "-32601") ||
				(front.sid != "" && !served) || (front.sid == "" && !served && !strings.Contains(string(got), "-32602")) {
				t.Errorf("lean %v, %s: tools/list with a \"METHOD\" member: %d %s; want it served", lean, front.name, ex.StatusCode, got)
			}
			// An unknown method is refused whatever follows it, unquoted.
			ex, got = sessionExchange(t, http.MethodPost, base, aliceToken, front.sid, front.version,
				strings.NewReader(`{"jsonrpc":"2.0","id":8,"method":"no/`+secret+`","Method":"ping"}`))
			if strings.Contains(string(got), secret) || !strings.Contains(string(got), "-32601") {
				t.Errorf("lean %v, %s: unknown method with a \"Method\":\"ping\" member: %d %q; want -32601 not quoting it", lean, front.name, ex.StatusCode, got)
			}
		}
	}
}
