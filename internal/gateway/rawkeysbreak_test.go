package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRawDecodeReadsKeysAsTheSDK: the 2025 raw paths read a result's keys
// as encoding/json does (case-insensitively: decodeCallResult's struct,
// rawIsError), the SDK path as the SDK's decoder does (go-sdk v1.8.0
// internal/json: segmentio with DontMatchCaseInsensitiveStructFields, so
// "IsError", "Content", "StructuredContent" are unknown members it drops).
// For {"content":[],"IsError":true} the SDK path answers isError false and
// records ok; the raw stdio path answers isError true and records
// tool_error, and the lean 2025 path passes the bytes and records
// tool_error. Found by branch breakraw; not fixed there: exact keys in
// decodeCallResult (a map, or a check for case variants before the
// struct decode) touch the hottest path of issue 13 and need their own
// before/after numbers.
func TestRawDecodeReadsKeysAsTheSDK(t *testing.T) {
	t.Skip("known: the 2025 raw paths match result keys case-insensitively, the SDK does not (see the comment; docs/performance.md, branch breakraw)")
	for _, raw := range []string{
		`{"content":[],"IsError":true}`,
		`{"content":[],"isError":false,"ISERROR":true}`,
		`{"Content":[{"type":"text","text":"a"}]}`,
		`{"content":[],"StructuredContent":{"a":1}}`,
		`{"content":[],"_META":{"a":1}}`,
		`{"content":[{"type":"text","Text":"a"}]}`,
	} {
		var sdk mcp.CallToolResult
		if err := json.Unmarshal([]byte(raw), &sdk); err != nil {
			t.Fatalf("SDK decode of %s: %v", raw, err)
		}
		want, err := withRawNumbers(&sdk, json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got := rawIsError(json.RawMessage(raw)); got != want.IsError {
			t.Errorf("rawIsError(%s) = %v, the SDK path's isError %v", raw, got, want.IsError)
		}
		got, err := decodeCallResult(json.RawMessage(raw))
		if err != nil {
			t.Errorf("decodeCallResult(%s): %v", raw, err)
			continue
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		var g, w any
		_ = json.Unmarshal(gb, &g)
		_ = json.Unmarshal(wb, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n raw path %s\n SDK path %s", raw, gb, wb)
		}
	}
}
