package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKPathRawMembersValidUTF8: structuredContent and _meta of a
// result pass from the upstream to the agent as the upstream's bytes on
// the SDK path too (withRawNumbers, notes §6), not only on the lean path:
// bytes that are not UTF-8 and \u escapes of lone surrogates in them must
// reach the agent as the lean path gives them (repairUTF8: U+FFFD), or a
// strict decoder (serde_json, encoding/json/v2) refuses the agent's whole
// answer. JSON and event-stream upstream answers; the two paths agree.
func TestSDKPathRawMembersValidUTF8(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			bad := "bad \xff byte, lone \\ud800 high, \\uDC00 low, pair \\ud83d\\ude00, \\\\ud800 text"
			msg := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"t"}],` +
				`"structuredContent":{"s":"` + bad + `","n":12345678901234567890},"_meta":{"m":"` + bad + `"}}}`
			got := rawAndSDKAnswers(t, mode, msg)
			answers := map[string]any{}
			for _, path := range []string{"raw", "sdk"} {
				data := got[path]
				if !utf8.Valid(data) {
					t.Errorf("%s: answer %q is not valid UTF-8", path, data)
				}
				if loneSurrogateEscape(data) {
					t.Errorf("%s: answer %s holds a lone surrogate escape", path, data)
				}
				var m struct {
					Result struct {
						SC   any `json:"structuredContent"`
						Meta any `json:"_meta"`
					} `json:"result"`
				}
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatalf("%s: %v: %s", path, err, data)
				}
				answers[path] = m.Result
			}
			if !reflect.DeepEqual(answers["raw"], answers["sdk"]) {
				t.Errorf("lean answer %#v, the SDK path's %#v", answers["raw"], answers["sdk"])
			}
		})
	}
}

// BenchmarkWithRawNumbersValid: withRawNumbers's cost on an SDK-path
// result with structuredContent and _meta in valid UTF-8 (the usual
// case), where repairUTF8 only checks them (attack17).
func BenchmarkWithRawNumbersValid(b *testing.B) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"rows":[` +
		strings.Repeat(`{"id":12345678901234567890,"name":"row name here","v":1.5},`, 15) + `{}]},"_meta":{"trace":"abc-123"}}`)
	for b.Loop() {
		var res mcp.CallToolResult
		if _, err := withRawNumbers(&res, raw); err != nil {
			b.Fatal(err)
		}
	}
}
