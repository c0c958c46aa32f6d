package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// notCallResults are result objects the SDK path refuses as tools/call
// results; callResults are results it passes, which the lean path must
// never refuse.
var (
	notCallResults = []string{
		`{"content":5}`,
		`{"content":{}}`,
		`{"content":"text"}`,
		`{"content":[5]}`,
		`{"content":[null]}`,
		`{"content":[{"type":"text","text":5}]}`,
		`{"content":[{"type":"video","uri":"x"}]}`,
		`{"content":[{"text":"no type"}]}`,
		`{"content":[{"type":"image","data":"not base64!","mimeType":"image/png"}]}`,
		`{"content":[],"isError":"yes"}`,
		`{"content":[],"_meta":5}`,
	}
	callResults = []string{
		`{}`,
		`{"content":null,"isError":false}`,
		`{"content":[{"type":"text","text":"ok"}],"unknown":{"a":[1,2]}}`,
		`{"content":[{"type":"text","text":"a","_meta":{"x":1},"annotations":{"priority":0.5}}],"isError":true}`,
		`{"content":[{"type":"resource_link","uri":"file:///x","name":"x","size":3}]}`,
		`{"content":[{"type":"audio","data":"AAAA","mimeType":"audio/wav"},{"type":"image","data":"AAAA","mimeType":"image/png"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///x","text":"t"}}]}`,
		`{"content":[],"structuredContent":{"n":1e400,"big":123456789012345678901234567890},"_meta":{"k":1e400}}`,
		`{"content":[{"type":"text","text":"x","Type":"ignored"}],"structuredContent":[1,"a"]}`,
		`{"Content":5,"content":[]}`,
	}
)

// TestCallResultShapeIsTheDecode: callResultShape refuses exactly the
// results the SDK's own CallToolResult decode (behind decodeCallResult)
// refuses, for the seeds above, and the scanner's fast answer never passes
// one the decode refuses.
func TestCallResultShapeIsTheDecode(t *testing.T) {
	for _, raw := range append(append([]string{}, notCallResults...), callResults...) {
		var r mcp.CallToolResult
		_, derr := decodeCallResult(json.RawMessage(raw))
		sdkErr := json.Unmarshal([]byte(raw), &r)
		why := callResultShape([]byte(raw))
		if (why != "") != (derr != nil) {
			t.Errorf("%s: callResultShape %q, decodeCallResult error %v", raw, why, derr)
		}
		if plainCallResult([]byte(raw)) && derr != nil {
			t.Errorf("%s: the scanner passes it, the decode refuses it (%v)", raw, derr)
		}
		if sdkErr != nil && !strings.Contains(raw, "1e400") && why == "" {
			t.Errorf("%s: passed, the SDK's decode refuses it (%v)", raw, sdkErr)
		}
	}
}

// TestLeanRefusesNotCallResult: a result that is not a tools/call result
// (content not a list, an item that is no content, isError not a boolean,
// ...) fails the call on the lean path of a 2025 agent as on the SDK path:
// an isError result "the upstream sent a malformed response (not a
// tools/call result); the call may have run", recorded transport_error.
// Before branch verdict the lean path passed it to the agent as a result
// and recorded "ok". Valid results (unknown members, _meta,
// structuredContent, other content types, big numbers) still pass and
// are recorded ok. A stdio and an HTTP upstream; real gate, SQLite store,
// go-sdk upstreams.
func TestLeanRefusesNotCallResult(t *testing.T) {
	verifyNoLeaks(t)
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute}},
		&gate.Options{})
	up, url := newScriptedUpstream(t, true)
	gw := newGateway(t, []ServerConfig{rawStdioServer("st"), {Name: "ht", URL: url}}, g, nil)
	waitUpstream(t, gw, "st", nil)
	base := serveHTTP(t, gw, nil)
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	sid, ver := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, gw, sid)
	approver := approval.Principal{ID: "carol", Kind: "human"}

	n := 0
	call := func(server, result string) (string, approval.ID) {
		t.Helper()
		n++
		rid := fmt.Sprintf("r%d", n)
		line := `{"jsonrpc":"2.0","id":$ID,"result":` + result + `}`
		tool, args := "ht__vendor", `{}`
		if server == "st" {
			b, _ := json.Marshal(map[string]any{"marker": rid, "lines": []string{line}})
			tool, args = "st__reply", string(b)
		} else {
			up.set("vendor", answerJSON(line))
		}
		done := make(chan string, 1)
		go func() {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, rid, tool, args)
			_, b := sessionExchange(t, http.MethodPost, base, aliceToken, sid, ver, strings.NewReader(body))
			done <- string(b)
		}()
		id := approveOnlyPending(t, db, g, approver)
		return <-done, id
	}
	for _, server := range []string{"st", "ht"} {
		for _, raw := range notCallResults {
			got, id := call(server, raw)
			if !strings.Contains(got, `the upstream sent a malformed response (not a tools/call result); the call may have run`) || !strings.Contains(got, `"isError":true`) {
				t.Errorf("%s %s: the agent got %q, want an isError result saying the upstream sent a malformed response", server, raw, got)
			}
			if o := waitOutcome(t, db, id); o != approval.OutcomeTransportError {
				t.Errorf("%s %s: outcome %q, want %q", server, raw, o, approval.OutcomeTransportError)
			}
		}
		for _, raw := range callResults {
			got, id := call(server, raw)
			if strings.Contains(got, "malformed") || !strings.Contains(got, `"result":`) {
				t.Errorf("%s %s: the agent got %q, want the result", server, raw, got)
			}
			want := approval.OutcomeOK
			if strings.Contains(raw, `"isError":true`) {
				want = approval.OutcomeToolError
			}
			if o := waitOutcome(t, db, id); o != want {
				t.Errorf("%s %s: outcome %q, want %q", server, raw, o, want)
			}
		}
	}
}

// BenchmarkCallResultShape is the lean path's check of a plain result
// (one text item of 1 KiB): a scan without a decode, no allocation.
func BenchmarkCallResultShape(b *testing.B) {
	raw := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 1024) + `"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if callResultShape(raw) != "" {
			b.Fatal("refused")
		}
	}
}

// TestCallResultShapeOnPlainResultsAllocatesNothing: the check the lean
// path adds to every call allocates nothing for plain text results.
func TestCallResultShapeOnPlainResultsAllocatesNothing(t *testing.T) {
	raw := []byte(`{"content":[{"type":"text","text":"ok","_meta":{"a":1}},{"type":"text","text":"two"}],"isError":false,"_meta":{"k":"v"}}`)
	if n := testing.AllocsPerRun(100, func() {
		if callResultShape(raw) != "" {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("%v allocations per check, want 0", n)
	}
}
