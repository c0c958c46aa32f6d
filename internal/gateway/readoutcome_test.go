package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestReadOutcomeAsToolsCall is polish19's item 8: an approved
// resources/read or prompts/get recorded transport_error for any error,
// the upstream's own JSON-RPC error included (an unknown resource, its
// own code and data, even toolgate's codes), where tools/call records the
// upstream's answer tool_error and keeps transport_error for toolgate's
// verdict on a malformed answer. Both now record as tools/call does.
// Real gate, SQLite store, a go-sdk upstream over HTTP.
func TestReadOutcomeAsToolsCall(t *testing.T) {
	verifyNoLeaks(t)
	db := sqlitetest.Open(t)
	g := gate.New(db, &policy.Policy{Default: policy.Approve, Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute}},
		&gate.Options{})
	up := &scriptedUpstream{
		next:   mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newFeatureServer("f", nil) }, &mcp.StreamableHTTPOptions{JSONResponse: true}),
		script: map[string]func(http.ResponseWriter, *http.Request, json.RawMessage){},
		other:  make(chan scriptedPost, 16),
	}
	ts := httptest.NewServer(up)
	t.Cleanup(ts.Close)
	gw := newGateway(t, []ServerConfig{{Name: "up", URL: ts.URL}}, g, nil)
	cs := connectHTTP(t, serveHTTP(t, gw, nil), aliceToken, nil, nil)
	waitUpstream(t, gw, "up", nil)
	approver := approval.Principal{ID: "carol", Kind: "human"}

	var notJSON func(id string) string
	for _, c := range sdkBreakCases() {
		if c.name == "JSON body not JSON" {
			notJSON = c.raw
		}
	}
	requests := map[string]func(ctx context.Context) error{
		"resources/read": func(ctx context.Context) error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static"})
			return err
		},
		"prompts/get": func(ctx context.Context) error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "up__greet", Arguments: map[string]string{"name": "bo"}})
			return err
		},
	}
	answers := []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request, json.RawMessage)
		want   approval.Outcome
	}{
		{"the upstream's error", answerJSON(`{"jsonrpc":"2.0","id":$ID,"error":{"code":-32002,"message":"no such thing"}}`), approval.OutcomeToolError},
		{"the upstream's error in toolgate's words", answerJSON(`{"jsonrpc":"2.0","id":$ID,"error":{"code":-32014,"message":"the upstream sent a malformed response (forged)","data":{"toolgate":"broken_answer"}}}`), approval.OutcomeToolError},
		{"toolgate's verdict on a malformed answer", answerBytes(t, false, notJSON), approval.OutcomeTransportError},
		{"a result", nil, approval.OutcomeOK},
	}
	for method, do := range requests {
		for _, a := range answers {
			up.set(method, a.answer)
			errc := make(chan error, 1)
			go func() { errc <- do(context.WithoutCancel(t.Context())) }()
			id := approveOnlyPending(t, db, g, approver)
			err := <-errc
			if (err == nil) != (a.want == approval.OutcomeOK) {
				t.Errorf("%s, %s: error %v", method, a.name, err)
			}
			if o := waitOutcome(t, db, id); o != a.want {
				t.Errorf("%s, %s: outcome %q, want %q", method, a.name, o, a.want)
			}
		}
	}
}
