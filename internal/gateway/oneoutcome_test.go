package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// TestMalformedAnswerOneOutcome: an upstream's malformed answer to a call a
// human approved (a message whose "jsonrpc" is not "2.0", a response whose
// result is no tools/call result, a status or content type the client
// cannot read) is told to the agent and recorded the same way on every
// path: a stdio upstream (the raw path of 2025 sessions, the SDK path
// behind the stdout guard for the 2026-era session), an HTTP upstream (the
// lean raw path, the SDK path with a progress token, a 2026-07-28 request);
// an isError result "the upstream sent a malformed response (<why>); the
// call may have run", recorded transport_error (the upstream had the
// call). Before branch sdkbreak2, stdio and the raw paths answered a
// JSON-RPC error -32603, recorded tool_error, and the SDK path an answer
// whose result it could not read as "the connection failed". Real gate,
// SQLite store, go-sdk upstreams.
func TestMalformedAnswerOneOutcome(t *testing.T) {
	verifyNoLeaks(t)
	rig := newApprovedRig(t)
	up := rig.up
	bad := map[string]string{ // answer kind → its JSON-RPC message ($ID: the call's id)
		"jsonrpc 1.0":   `{"jsonrpc":"1.0","id":$ID,"result":{"content":[]}}`,
		"not a result":  `{"jsonrpc":"2.0","id":$ID,"result":{"content":5}}`,
		"plain text":    "",
		"HTTP 400 text": "",
	}
	up.set("vendor", answerJSON(bad["jsonrpc 1.0"]))
	up.set("array", answerJSON(bad["not a result"]))
	up.set("plain", func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("all good"))
	})
	up.set("notjson", func(w http.ResponseWriter, _ *http.Request, _ json.RawMessage) {
		http.Error(w, "bad", http.StatusBadRequest)
	})
	httpTool := map[string]string{"jsonrpc 1.0": "vendor", "not a result": "array", "plain text": "plain", "HTTP 400 text": "notjson"}
	// The agent gets the same words on every path: the message with the
	// call's names and the why, apart from the why's own detail.
	wantMsg := regexp.MustCompile(`upstream \\"(st|ht)\\": tool \\"(reply|vendor|array|plain|notjson)\\": the upstream sent a malformed response \(([^)]*)\); the call may have run`)
	whys := map[string]map[string]bool{}
	for _, kind := range []string{"jsonrpc 1.0", "not a result", "plain text", "HTTP 400 text"} {
		for _, server := range []string{"st", "ht"} {
			if server == "st" && bad[kind] == "" {
				continue // HTTP only
			}
			for _, path := range approvedPaths {
				name := fmt.Sprintf("%s/%s/%s", kind, server, path)
				rid := strings.NewReplacer(" ", "-", "/", "-", ".", "-").Replace(name)
				tool, args := "ht__"+httpTool[kind], `{}`
				if server == "st" {
					b, _ := json.Marshal(map[string]any{"marker": rid, "lines": []string{bad[kind]}})
					tool, args = "st__reply", string(b)
				}
				got, id := rig.call(path, rid, tool, args)
				m := wantMsg.FindStringSubmatch(got)
				if m == nil || !strings.Contains(got, `"isError":true`) {
					t.Errorf("%s: the agent got %q, want an isError result saying the upstream sent a malformed response and the call may have run", name, got)
				} else {
					if whys[kind] == nil {
						whys[kind] = map[string]bool{}
					}
					whys[kind][strings.SplitN(m[3], ":", 2)[0]] = true
				}
				if o := waitOutcome(t, rig.db, id); o != approval.OutcomeTransportError {
					t.Errorf("%s: outcome %q, want %q", name, o, approval.OutcomeTransportError)
				}
			}
		}
	}
	for kind, w := range whys {
		if len(w) != 1 {
			t.Errorf("%s: the agent was told %d different reasons on the paths (%v), want one", kind, len(w), w)
		}
	}
}
