package gateway

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRawDecodeReadsKeysAsTheSDK: the 2025 raw paths read a result's keys
// as the SDK's decoder does (go-sdk v1.8.0 internal/json: segmentio with
// DontMatchCaseInsensitiveStructFields, so "IsError", "Content",
// "StructuredContent" are unknown members it drops). Found by branch
// breakraw: encoding/json's struct decodes (decodeCallResult's,
// decodeContent's, rawIsError's, withRawNumbers') matched them
// case-insensitively, so for {"content":[],"IsError":true} the SDK path
// answered isError false and recorded ok while the raw stdio path
// answered isError true and recorded tool_error. The raw paths now read
// members by exact key (rawscan.go).
func TestRawDecodeReadsKeysAsTheSDK(t *testing.T) {
	for _, raw := range []string{
		`{"content":[],"IsError":true}`,
		`{"content":[],"isError":false,"ISERROR":true}`,
		`{"Content":[{"type":"text","text":"a"}]}`,
		`{"content":[],"StructuredContent":{"a":1}}`,
		`{"content":[],"_META":{"a":1}}`,
		`{"content":[{"type":"text","Text":"a"}]}`,
		`{"content":[{"TYPE":"text","type":"text","text":"a"}]}`,
		`{"content":[{"type":"text","text":"a","TEXT":"b"}]}`,
		"{\"content\":[],\"i\u017fError\":true}",
		"{\"content\":[],\"\u017ftructuredContent\":{\"a\":1}}",
		`{"content":[],"isErr\u006fr":true}`,
		`{"content":[],"isError":true,"isError":false}`,
		`{"content":[],"isError":false,"isError":true}`,
		`{"content":[],"_meta":{"a":1},"_Meta":{"b":2}}`,
		`{"content":[],"structuredContent":{"a":1},"structuredcontent":{"b":2}}`,
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
