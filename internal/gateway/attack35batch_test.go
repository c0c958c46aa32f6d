package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestAttack35BatchOddMembersNotQuoted (attack35): 2025-03-26 batches
// whose unknown method sits beside a member that is no object, or whose
// method is not a string, are answered without quoting the method.
func TestAttack35BatchOddMembersNotQuoted(t *testing.T) {
	const secret = "SECRET-35at"
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}}, allowAll(), nil)
	base := serveHTTP(t, g, &HTTPOptions{})
	v := "2025-03-26"
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"attack35","version":"1"}}}`
	ex, b := sessionExchange(t, http.MethodPost, base, aliceToken, "", "", strings.NewReader(init))
	sid := ex.Header.Get("Mcp-Session-Id")
	if ex.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", ex.StatusCode, b)
	}
	if ex, b = sessionExchange(t, http.MethodPost, base, aliceToken, sid, v, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); ex.StatusCode/100 != 2 {
		t.Fatalf("notifications/initialized: %d: %s", ex.StatusCode, b)
	}
	waitInitialized(t, g, sid)
	for _, body := range []string{
		`[1,{"jsonrpc":"2.0","id":2,"method":"no/` + secret + `"}]`,
		`[{"jsonrpc":"2.0","id":1,"method":5},{"jsonrpc":"2.0","id":2,"method":"no/` + secret + `"}]`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"no/` + secret + `","params":[1,2]}]`,
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"notifications/` + secret + `"}]`,
		`[[],{"jsonrpc":"2.0","id":2,"method":"` + secret + `"}]`,
		`[null,{"jsonrpc":"2.0","id":2,"method":"` + secret + `"}]`,
	} {
		ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, sid, v, strings.NewReader(body))
		t.Logf("%s -> %d %s %q", body, ex.StatusCode, ex.Header.Get("Content-Type"), got)
		if strings.Contains(string(got), secret) {
			t.Errorf("batch %s: %d %q quotes the method", body, ex.StatusCode, got)
		}
	}
	// Legitimate batches: every method known, a notification among them.
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}]`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`,
	} {
		ex, got := sessionExchange(t, http.MethodPost, base, aliceToken, sid, v, strings.NewReader(body))
		if ex.StatusCode != http.StatusOK || !strings.Contains(string(got), `"id":1,"result":{}`) {
			t.Errorf("legitimate batch %s: %d %q; want the ping answered", body, ex.StatusCode, got)
		}
	}
}
