package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestLeanLogSameBytesAsSDKPath is polish19's item 7: the lean front
// encoded an upstream's log message about a call with json.Marshal, which
// escapes <, > and & (\u003c…), while the SDK path's jsonrpc2 encodes
// without HTML escaping: the same log message reached the agent as
// different bytes depending on the path. Both now send the same bytes.
func TestLeanLogSameBytesAsSDKPath(t *testing.T) {
	logMsg := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"<up>","data":{"html":"<b>a & b</b>","n":1}}}`
	result := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"done"}]}}`
	var got []string
	for _, lean := range []bool{true, false} {
		up, url := newScriptedUpstream(t, false)
		g := newGateway(t, []ServerConfig{{Name: "up", URL: url}}, allowAll(), nil)
		trail := &leanTrail{}
		g.leanHook = trail.hook
		base := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: !lean})
		cs := connectHTTP(t, base, aliceToken, nil, nil)
		sid, ver := cs.ID(), cs.InitializeResult().ProtocolVersion
		if lean {
			waitInitialized(t, g, sid) // the lean front serves initialized sessions only
		}
		if resp, b := sessionExchange(t, http.MethodPost, base, aliceToken, sid, ver,
			strings.NewReader(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"info"}}`)); resp.StatusCode != http.StatusOK {
			t.Fatalf("logging/setLevel: %d %s", resp.StatusCode, b)
		}
		trail.take()
		up.set("plain", answerSSE(logMsg, result))
		resp, body := sessionExchange(t, http.MethodPost, base, aliceToken, sid, ver, strings.NewReader(leanCall("l-1", "up__plain", `{}`)))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("lean %v: %d %v, want an event stream\n%s", lean, resp.StatusCode, resp.Header, body)
		}
		if tr := trail.take(); lean != (len(tr) == 1 && tr[0]) {
			t.Fatalf("lean %v: trail %v", lean, tr)
		}
		msgs, _ := sseMessages(t, body)
		if len(msgs) != 2 || !strings.Contains(msgs[0], `"notifications/message"`) {
			t.Fatalf("lean %v: events %q, want the log message, then the result", lean, msgs)
		}
		got = append(got, msgs[0])
	}
	if got[0] != got[1] {
		t.Errorf("the log message differs between the paths:\nlean: %s\nSDK:  %s", got[0], got[1])
	}
	if !strings.Contains(got[0], `"<b>a & b</b>"`) {
		t.Errorf("lean log message %s, want <, > and & as the upstream sent them (the SDK path's bytes)", got[0])
	}
}
