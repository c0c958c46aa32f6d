package gateway

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestUpstreamLogDataValidUTF8: an upstream log message's data reaches the
// agent as the upstream sent it (a json.RawMessage since attack21), on the
// lean raw path and on the SDK path: bytes that are not UTF-8 and \u
// escapes of lone surrogates in it must reach the agent as U+FFFD, as a
// result's do (repairUTF8), or a strict decoder (Rust's serde_json,
// encoding/json/v2) refuses the agent's whole event. Before attack21 the
// data was decoded into Go values, which made them U+FFFD.
func TestUpstreamLogDataValidUTF8(t *testing.T) {
	const bad = "bad \xff byte, lone \\ud800 high, pair \\ud83d\\ude00"
	logMsg := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"l","data":{"k":"` + bad + `","` + bad + `":["` + bad + `"]}}}`
	result := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"ok"}]}}`
	f := newRawHTTPFixture(t, false, ServerConfig{}, nil)
	f.up.set("vendor", answerSSE(logMsg, result))
	if resp, b := sessionExchange(t, http.MethodPost, f.base, aliceToken, f.sid, f.ver,
		strings.NewReader(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"info"}}`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("logging/setLevel: %d %s", resp.StatusCode, b)
	}
	for path, answer := range map[string]string{
		"raw": f.call(t, "raw-log", "vendor", `{}`),
		"sdk": f.sdkCall(t, "sdk-log", "vendor", `{}`),
	} {
		var logs int
		for l := range strings.Lines(answer) {
			d, ok := strings.CutPrefix(l, "data: ")
			if !ok || !strings.Contains(d, "notifications/message") {
				continue
			}
			logs++
			if !utf8.ValidString(d) {
				t.Errorf("%s: log event %q is not valid UTF-8", path, d)
			}
			if loneSurrogateEscape([]byte(d)) {
				t.Errorf("%s: log event %s holds a lone surrogate escape", path, d)
			}
			if !strings.Contains(d, "\ufffd") || !strings.Contains(d, "\U0001F600") && !strings.Contains(d, `\ud83d\ude00`) {
				t.Errorf("%s: log event %s: want U+FFFD for the bad bytes and the pair kept", path, d)
			}
		}
		if logs != 1 {
			t.Errorf("%s: %d log events in %q, want 1", path, logs, answer)
		}
	}
}
