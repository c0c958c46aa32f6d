package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestLeanAnswerOfInvalidUTF8: an upstream whose result holds bytes that
// are not UTF-8 (a text with \xff) is answered with valid UTF-8 JSON on
// every path, as the SDK path answers it (its decode makes each bad byte
// U+FFFD): JSON is UTF-8 (RFC 8259), and an agent's strict decoder would
// refuse the whole answer. JSON and event-stream upstream answers; the
// lean path (raw) and the SDK path.
func TestLeanAnswerOfInvalidUTF8(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			f := newRawHTTPFixture(t, mode == "json", ServerConfig{}, nil)
			msg := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"bad ` + "\xff\xfe" + ` byte"}]}}`
			if mode == "json" {
				f.up.set("vendor", answerJSON(msg))
			} else {
				f.up.set("vendor", answerSSE(msg))
			}
			for _, path := range []string{"raw", "sdk"} {
				call := f.call
				if path == "sdk" {
					call = f.sdkCall
				}
				got := call(t, path+"-"+mode, "vendor", `{}`)
				if !utf8.ValidString(got) || !strings.Contains(got, "bad \ufffd\ufffd byte") {
					t.Errorf("%s: answer %q, want valid UTF-8 with U+FFFD for each bad byte", path, got)
				}
			}
		})
	}
}

// FuzzRepairUTF8: for any valid JSON, repairUTF8 gives valid UTF-8 JSON
// that decodes to what the original decodes to (encoding/json makes each
// bad byte U+FFFD), with no lone surrogate escape left, and valid UTF-8
// without one unchanged (attack16).
func FuzzRepairUTF8(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, "{\"t\":\"\xff\xfe\"}", "{\"\xc3\":\"\xed\xa0\x80\"}", "[\"\xe2\x82\"]", `"é"`, "\"\xf4\x90\x80\x80\"", `["\ud800","\\\udc00x","\ud83d\ude00\ud800"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		got := repairUTF8(raw)
		if !utf8.Valid(got) || !json.Valid(got) {
			t.Fatalf("repairUTF8(%q) = %q: not valid UTF-8 JSON", raw, got)
		}
		if utf8.Valid(raw) && !loneSurrogateEscape(raw) && !bytes.Equal(got, raw) {
			t.Fatalf("repairUTF8(%q) = %q: valid UTF-8 changed", raw, got)
		}
		if loneSurrogateEscape(got) {
			t.Fatalf("repairUTF8(%q) = %q: a lone surrogate escape left (attack16)", raw, got)
		}
		var want, have any
		if json.Unmarshal(raw, &want) != nil || json.Unmarshal(got, &have) != nil {
			return
		}
		if !reflect.DeepEqual(want, have) {
			t.Fatalf("repairUTF8(%q) = %q decodes to %#v, the original to %#v", raw, got, have, want)
		}
	})
}

// BenchmarkRepairUTF8Valid: repairUTF8's cost on a lean call's usual
// result (valid UTF-8, 100-byte text): the check alone.
func BenchmarkRepairUTF8Valid(b *testing.B) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 100) + `"}]}`)
	for b.Loop() {
		if len(repairUTF8(raw)) != len(raw) {
			b.Fatal("changed")
		}
	}
}
