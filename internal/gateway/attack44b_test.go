package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLeanHTTPCancelEveryBody (branch attack44b): a notifications/cancelled
// POST naming a lean call in flight cancels it however the SDK would
// cancel a call of its own by it. The SDK's canceller reads every body it
// is sent, whatever its length or framing, and cancels on a message that
// carries an id too (and answers it). On 70feee3f cancelLean passed over a
// body sent chunked (no Content-Length), one longer than 4096 bytes (a long
// reason), and one with an exact id: each went to the SDK, which does not
// know the lean call, and the call ran on.
func TestLeanHTTPCancelEveryBody(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	for i, c := range []struct {
		name string
		body func(id int) io.Reader
	}{
		{"with an id", func(id int) io.Reader {
			return strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"notifications/cancelled","params":{"requestId":%d}}`, id))
		}},
		{"chunked", func(id int) io.Reader {
			// A reader of no known length: the client sends it chunked.
			return io.MultiReader(strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id)))
		}},
		{"a long reason", func(id int) io.Reader {
			return strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":%q}}`, id, strings.Repeat("r", 5000)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := cancelLeanSleep(t, f, sid, version, 60+i, "the cancel "+c.name, c.body(60+i))
			t.Logf("the cancel was answered %+v", ex)
		})
	}
}

// TestHTTPSessionlessReadAsTheSDK (branch attack44b): a POST without a
// session is routed by its method and its _meta's protocol version as the
// SDK reads them (exact keys, the last of two): only initialize opens a
// session, only a 2026-07-28 request (or server/discover) is served
// statelessly, anything else is refused (400, case C04). On 70feee3f
// isModern and isInitialize decoded the body with encoding/json, which
// folds case: "METHOD":"server/discover" or a "_META" naming 2026-07-28
// sent a request the SDK reads as a 2025-era tools/list or tools/call to
// the stateless handler, which served it without a session, and
// "METHOD":"initialize" sent a tools/call the SDK reads as such to the
// session handler.
func TestHTTPSessionlessReadAsTheSDK(t *testing.T) {
	f := newLeanFixture(t, nil)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"server/discover"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}},"METHOD":"server/discover"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","Params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{},"_meta":{"IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}},"METHOD":"initialize"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{}},"METHOD":"initialize"}]`,
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.base+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: answered %d (session %q) %.300s, want 400 without a session", body, resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), b)
		}
	}
}
