package gateway

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// sseData returns the JSON-RPC message of an answer: the data of its one
// event when it is an event stream, else the answer itself.
func sseData(t *testing.T, answer string) []byte {
	t.Helper()
	if strings.HasPrefix(answer, "{") {
		return []byte(strings.TrimSpace(answer))
	}
	for l := range strings.Lines(answer) {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			return []byte(strings.TrimRight(d, "\r\n"))
		}
	}
	t.Fatalf("no data in the answer %q", answer)
	return nil
}

// loneSurrogateEscape reports whether the JSON text b has a \u escape of
// a UTF-16 surrogate that is not half of a high-low pair (the test's own
// reading, apart from repairUTF8's).
func loneSurrogateEscape(b []byte) bool {
	hex := func(i int) (uint64, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return v, err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		v, ok := hex(i)
		switch {
		case !ok:
			i++ // a two-byte escape: \\, \", \n…
		case v >= 0xd800 && v < 0xdc00:
			if w, ok := hex(i + 6); ok && w >= 0xdc00 && w < 0xe000 {
				i += 11
				continue
			}
			return true
		case v >= 0xdc00 && v < 0xe000:
			return true
		default:
			i += 5
		}
	}
	return false
}

// rawAndSDKAnswers has a scripted HTTP upstream answer tool "vendor" with
// msg ($ID its call's id; an answer in JSON when mode is "json", else an
// event stream) and calls it through the gateway on the lean raw path and
// on the SDK path; it returns each path's answer to the agent ("raw",
// "sdk"), the JSON-RPC message.
func rawAndSDKAnswers(t *testing.T, mode, msg string) map[string][]byte {
	t.Helper()
	f := newRawHTTPFixture(t, mode == "json", ServerConfig{}, nil)
	if mode == "json" {
		f.up.set("vendor", answerJSON(msg))
	} else {
		f.up.set("vendor", answerSSE(msg))
	}
	return map[string][]byte{
		"raw": sseData(t, f.call(t, "raw-"+mode, "vendor", `{}`)),
		"sdk": sseData(t, f.sdkCall(t, "sdk-"+mode, "vendor", `{}`)),
	}
}

// TestLeanAnswerOfLoneSurrogateEscapes: an upstream whose result holds \u
// escapes of lone UTF-16 surrogates (\ud800 alone, a low \udc00 alone, a
// high followed by a high) is answered on the lean path as on the SDK
// path: each such escape U+FFFD (\ufffd), a valid pair and an escaped
// backslash before "ud800" kept. Before, the lean path passed the
// escapes through as they came, and a strict decoder (Rust's serde_json,
// Go's encoding/json/v2) refuses the agent's whole answer: the defect
// attack15 fixed for bytes that are not UTF-8 (attack16).
func TestLeanAnswerOfLoneSurrogateEscapes(t *testing.T) {
	const text = `lone \ud800 high, \uDC00 low, \ud800\ud800 two highs, pair \ud83d\ude00, \\ud800 not an escape`
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			msg := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
			got := rawAndSDKAnswers(t, mode, msg)
			answers := map[string]any{}
			for _, path := range []string{"raw", "sdk"} {
				data := got[path]
				if loneSurrogateEscape(data) {
					t.Errorf("%s: answer %s holds a lone surrogate escape", path, data)
				}
				var m struct {
					Result any `json:"result"`
				}
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatalf("%s: %v: %s", path, err, data)
				}
				answers[path] = m.Result
			}
			if !reflect.DeepEqual(answers["raw"], answers["sdk"]) {
				t.Errorf("lean answer %#v, the SDK path's %#v", answers["raw"], answers["sdk"])
			}
			want := "lone \ufffd high, \ufffd low, \ufffd\ufffd two highs, pair \U0001F600, \\ud800 not an escape"
			if got := textIn(answers["raw"]); got != want {
				t.Errorf("lean answer's text %q, want %q", got, want)
			}
		})
	}
}

// textIn is the text of the first content of a decoded tools/call result.
func textIn(result any) string {
	m, _ := result.(map[string]any)
	cs, _ := m["content"].([]any)
	if len(cs) == 0 {
		return ""
	}
	c, _ := cs[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// TestRepairUTF8LoneSurrogates: repairUTF8 on escapes alone (valid UTF-8
// bytes): lone surrogate escapes become \ufffd, pairs, other escapes
// and escaped backslashes stay, and a value without a lone one is
// returned as it is (no copy).
func TestRepairUTF8LoneSurrogates(t *testing.T) {
	for in, want := range map[string]string{
		`"\ud800"`:                  `"\ufffd"`,
		`"\udfff x"`:                `"\ufffd x"`,
		`"\ud800\ud800\udc00"`:      `"\ufffd\ud800\udc00"`,
		`"\ud800\u0041"`:            `"\ufffd\u0041"`,
		`["\\ud800","\\\ud800"]`:    `["\\ud800","\\\ufffd"]`,
		`{"\udbff":"\ud83d\ude00"}`: `{"\ufffd":"\ud83d\ude00"}`,
		`"\ud800` + "\xff" + `"`:    `"\ufffd` + "\ufffd" + `"`,
	} {
		if got := string(repairUTF8(json.RawMessage(in))); got != want {
			t.Errorf("repairUTF8(%s) = %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{`"\ud83d\ude00"`, `"\\ud800"`, `{"a":"\u00e9\n\"\\"}`, `1`} {
		raw := json.RawMessage(in)
		if got := repairUTF8(raw); &got[0] != &raw[0] {
			t.Errorf("repairUTF8(%s) copied a value with no lone surrogate", in)
		}
	}
}

// BenchmarkRepairUTF8Escaped: repairUTF8's cost on a valid result whose
// text has escapes (a line break and a quote every 10 bytes, 1 KB): each
// backslash is looked at for a lone surrogate.
func BenchmarkRepairUTF8Escaped(b *testing.B) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat(`abcdefg\n\"`, 100) + `"}]}`)
	for b.Loop() {
		if len(repairUTF8(raw)) != len(raw) {
			b.Fatal("changed")
		}
	}
}

// BenchmarkRepairUTF8Unicode: repairUTF8's cost on a valid result written
// as Python's json.dumps writes text by default (ensure_ascii: every
// non-ASCII character a \u escape, an emoji a surrogate pair), 1 KB: each
// \u escape is looked at.
func BenchmarkRepairUTF8Unicode(b *testing.B) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat(`caf\u00e9 \ud83d\ude00 `, 40) + `"}]}`)
	for b.Loop() {
		if len(repairUTF8(raw)) != len(raw) {
			b.Fatal("changed")
		}
	}
}
