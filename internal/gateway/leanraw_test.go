package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/gate"
)

// TestLeanCallPassesStdioResultBytesThrough: a lean call to a stdio
// upstream answers, in one write with its Content-Length, as
// application/json (nothing went before the result), with the
// upstream's result bytes as they came (a field
// no SDK type knows and a number no float64 holds survive), compacted
// when the line carried a carriage return (it would end the SSE data
// line), and an isError result is still recorded as a tool error.
func TestLeanCallPassesStdioResultBytesThrough(t *testing.T) {
	g, _, _ := rawTestGateway(t, nil)
	trail := &leanTrail{}
	g.leanHook = trail.hook
	base := serveHTTP(t, g, nil)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, g, sid)
	trail.take()

	call := func(id, marker, line string) string {
		t.Helper()
		args, err := json.Marshal(map[string]any{"marker": marker, "lines": []string{line}})
		if err != nil {
			t.Fatal(err)
		}
		body := `{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"up__reply","arguments":` + string(args) + `}}`
		resp, b := sessionExchange(t, http.MethodPost, base, aliceToken, sid, version, strings.NewReader(body))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", id, resp.StatusCode, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			// Nothing went before the result: the answer is the result alone.
			t.Errorf("POST %s: Content-Type %q, want application/json", id, ct)
		}
		if len(resp.TransferEncoding) != 0 || resp.ContentLength != int64(len(b)) {
			// A short answer goes out in one write with its length, not
			// as a flushed chunked stream.
			t.Errorf("POST %s: transfer encoding %v, content length %d for %d bytes", id, resp.TransferEncoding, resp.ContentLength, len(b))
		}
		return string(b)
	}

	got := call("r-1", "vendor", `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"raw"}],"x-vendor":{"n":1e400}}}`)
	want := `{"jsonrpc":"2.0","id":"r-1","result":{"content":[{"type":"text","text":"raw"}],"x-vendor":{"n":1e400}}}`
	if got != want {
		t.Errorf("lean answer\n got %q\nwant %q", got, want)
	}
	got = call("r-2", "cr", "{\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"content\":[],\r\"isError\":true}}")
	want = `{"jsonrpc":"2.0","id":"r-2","result":{"content":[],"isError":true}}`
	if got != want {
		t.Errorf("lean answer of a line with a carriage return\n got %q\nwant %q", got, want)
	}
	// An upstream of a 2025-era session that answers with an input round
	// anyway: neither its requests nor its state reach the agent.
	got = call("r-3", "round", `{"jsonrpc":"2.0","id":$ID,"result":{"inputRequests":{"q":{"method":"elicitation/create","params":{}}},"requestState":"upstream-secret"}}`)
	if strings.Contains(got, "upstream-secret") || strings.Contains(got, "inputRequests") || !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "asked for more input") {
		t.Errorf("lean answer of an input round: %q", got)
	}
	if tr := trail.take(); len(tr) != 3 || !tr[0] || !tr[1] || !tr[2] {
		t.Errorf("lean trail %v, want every call served lean", tr)
	}
}

func TestAsksForInput(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"content":[]}`: false,
		`{"content":[{"type":"text","text":"\"inputRequests\""}]}`: false,
		`{"inputRequests":{}}`: true,
		`{"requestState":"x"}`: true,
		`{"requestState":"x"`:  true, // unreadable: treated as a round
	} {
		if got := asksForInput(nil, json.RawMessage(raw)); got != want {
			t.Errorf("asksForInput(%s) = %v, want %v", raw, got, want)
		}
	}
}

func TestRawIsError(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"content":[],"isError":true}`:  true,
		`{"content":[],"isError":false}`: false,
		`{"content":[]}`:                 false,
		`{"isError":"yes"}`:              false,
	} {
		if got := rawIsError(json.RawMessage(raw)); got != want {
			t.Errorf("rawIsError(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestRawIsErrorReadsAsTheSDK checks that rawIsError's answer is the one
// the SDK's decode of the result gives (keys matched exactly, escapes
// resolved, the last of duplicates winning), for keys only a
// case-insensitive decode matches (case, the long s that folds to "s"),
// escapes and duplicates; false for what is not JSON. It read keys as
// encoding/json does (case-insensitively) before.
func TestRawIsErrorReadsAsTheSDK(t *testing.T) {
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"type":"text","text":"isError"}]}`,
		`{"content":[{"type":"text","text":"\"isError\":true"}]}`,
		`{"content":[],"isError":true}`,
		`{"content":[],"ISERROR":true}`,
		`{"content":[],"IsErRoR":true}`,
		`{"content":[],"i\u0073Error":true}`,
		`{"content":[],"\u0069sError":true}`,
		"{\"content\":[],\"i\u017fError\":true}",
		`{"content":[],"isError":true,"isError":false}`,
		`{"content":[],"isError":false,"isError":true}`,
		`{"content":[],"isError":false,"iserror":true}`,
		`{"content":[],"isError":null}`,
		`{"content":[],"isError" : true , "_meta":{"isError":false}}`,
		`{"content":[],"_meta":{"isError":true}}`,
		`{"content":[],"isError":true`,
		`{"content":[],"isError":true}x`,
		`[]`,
		``,
	} {
		var r mcp.CallToolResult
		want := json.Unmarshal([]byte(raw), &r) == nil && r.IsError
		if got := rawIsError(json.RawMessage(raw)); got != want {
			t.Errorf("rawIsError(%s) = %v, the SDK's decode says %v", raw, got, want)
		}
	}
}

// TestRawIsErrorOnPlainResultsAllocatesNothing checks that a result that
// cannot name isError is not decoded (issue 13: no re-decode of the
// result on the lean path).
func TestRawIsErrorOnPlainResultsAllocatesNothing(t *testing.T) {
	raw := json.RawMessage(`{"content":[{"type":"text","text":"Echo: ` + strings.Repeat("x", 100) + `"}],"structuredContent":{"n":1}}`)
	if n := testing.AllocsPerRun(100, func() {
		if rawIsError(raw) {
			t.Fatal("rawIsError = true")
		}
	}); n != 0 {
		t.Errorf("rawIsError allocated %v times per call, want 0", n)
	}
}

// TestFinishContextTimesOnlyRecordingAdmissions checks that recording the
// outcome of a call allowed without an approval arms no timer (its Finish
// records nothing), while one run through an approval is bounded by
// finishTimeout; neither ends with the call's own context.
func TestFinishContextTimesOnlyRecordingAdmissions(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	plain, done := finishContext(ctx, &gate.Admission{Allowed: true})
	defer done()
	if _, ok := plain.Deadline(); ok || plain.Err() != nil {
		t.Errorf("allowed without an approval: deadline set %v, err %v; want neither", ok, plain.Err())
	}
	before := time.Now()
	approved, done2 := finishContext(ctx, &gate.Admission{Allowed: true, ApprovalID: "ap-1"})
	defer done2()
	dl, ok := approved.Deadline()
	if !ok || dl.Before(before.Add(finishTimeout)) || approved.Err() != nil {
		t.Errorf("through an approval: deadline %v (set %v), err %v; want finishTimeout from now, not ended", dl, ok, approved.Err())
	}
}
