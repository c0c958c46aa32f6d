package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"toolgate/internal/approval"
)

// serveModernStdio serves a raw stdio agent that speaks 2026-07-28 (no
// initialize: each request carries its protocol metadata in _meta, and the
// SDK takes the session's from the first) as principal desktop.
func serveModernStdio(t *testing.T, g *Gateway) *rawAgent {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- g.ServeStdio(t.Context(), inR, outW, approval.Principal{ID: "desktop", Kind: "agent"})
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		_ = outR.Close()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return &rawAgent{t: t, in: inW, out: bufio.NewReader(outR)}
}

// resultOfAnswer is the result object of a JSON-RPC answer msg, approval ids
// and times blanked; "" when msg has none.
func resultOfAnswer(t *testing.T, msg []byte) (string, map[string]any) {
	t.Helper()
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("answer %s: %v", msg, err)
	}
	var fields map[string]any
	if len(m.Result) > 0 {
		if err := json.Unmarshal(m.Result, &fields); err != nil {
			t.Fatalf("result %s: %v", m.Result, err)
		}
	}
	return approvalIDs.ReplaceAllString(string(m.Result), "<id>"), fields
}

// TestStdioModernAnswersCarryResultType: a 2026-07-28 agent over stdio
// gets every answer toolgate makes itself (a denied call, a held call an
// approver denied) with resultType "complete", as the same agent over
// HTTP gets it (SEP-2322: the TypeScript SDK v2 fails a result without
// it), and the same result object; an allowed call's result, which the
// SDK marks, is the control. On 2b45551b the stdio refusals lacked it:
// isModernRequest knew only HTTP's stateless 2026-07-28 requests.
func TestStdioModernAnswersCarryResultType(t *testing.T) {
	db, gk := stdioLeanGate(t)
	g := newGateway(t, []ServerConfig{rawStdioServer("up")}, gk, nil)
	waitUpstream(t, g, "up", nil)
	base := serveHTTP(t, g, nil)
	a := serveModernStdio(t, g)
	carol := approval.Principal{ID: "carol", Kind: "human"}
	cases := []struct {
		name, tool string
		held       bool // denied by carol once pending
		isError    bool
		plain      bool // sent over stdio without _meta
	}{
		{name: "allowed", tool: "up__echo"},
		{name: "denied", tool: "up__numbers", isError: true},
		{name: "held then denied", tool: "up__progress", held: true, isError: true},
		// The session speaks 2026-07-28 since its first request: a call
		// without _meta on it is answered as one of that revision too
		// (by the SDK, not the stdio lean front).
		{name: "plain allowed", tool: "up__echo", plain: true},
		{name: "plain denied", tool: "up__numbers", plain: true, isError: true},
	}
	for i, c := range cases {
		body := modernCallBody(strconv.Itoa(10+i), c.tool, `{"k":"v"}`, "")
		if c.plain {
			body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"k":"v"}}}`, 10+i, c.tool)
		}
		a.send(body)
		if c.held {
			reviewOnlyPending(t, db, gk, carol, approval.VerdictDeny)
		}
		sLine := a.response(10 + i)
		type post struct {
			st int
			b  []byte
		}
		hp := make(chan post, 1)
		go func() {
			st, h, b := modernPost(t, base, c.tool, modernCallBody(strconv.Itoa(10+i), c.tool, `{"k":"v"}`, ""), nil)
			_, b = asJSONAnswer(t, h, b)
			hp <- post{st, b}
		}()
		if c.held {
			reviewOnlyPending(t, db, gk, carol, approval.VerdictDeny)
		}
		p := within(t, hp, c.name+": the HTTP answer")
		sRes, sFields := resultOfAnswer(t, []byte(sLine))
		hRes, hFields := resultOfAnswer(t, p.b)
		if hFields["resultType"] != "complete" {
			t.Errorf("%s: HTTP answered %d %s", c.name, p.st, p.b)
		}
		if sFields["resultType"] != "complete" {
			t.Errorf("%s: stdio answer lacks resultType \"complete\":\n%s", c.name, sLine)
		}
		if isErr, _ := sFields["isError"].(bool); isErr != c.isError {
			t.Errorf("%s: stdio isError %v, want %v:\n%s", c.name, isErr, c.isError, sLine)
		}
		// The SDK names itself in _meta only on a request that carries
		// protocol metadata (SEP-2575); the rest is the same.
		if c.plain {
			hRes = strings.Replace(hRes, `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"toolgate","version":"dev"}},`, "", 1)
		}
		if sRes != hRes {
			t.Errorf("%s: stdio answered\n%s\nHTTP\n%s", c.name, sRes, hRes)
		}
	}
}
