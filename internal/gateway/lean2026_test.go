package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// modernCallBody is a 2026-07-28 tools/call of tool with args, id id and
// extra _meta entries (JSON members, without braces) after the protocol's.
func modernCallBody(id, tool, args, extraMeta string) string {
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`
	if extraMeta != "" {
		meta += "," + extraMeta
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{%s}}}`, id, tool, args, meta)
}

// modernPost POSTs body to base's /mcp as a 2026-07-28 client does (no
// session; MCP-Protocol-Version, Mcp-Method and Mcp-Name set from name
// unless hdr overrides them; an empty value in hdr deletes the header) and
// returns the status, the headers that matter and the body.
func modernPost(t *testing.T, base, name, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for _, k := range []string{"Content-Type", "Cache-Control", "Connection", "Mcp-Session-Id", "Content-Length", "Transfer-Encoding"} {
		if v := resp.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	if resp.TransferEncoding != nil {
		h["Transfer-Encoding"] = resp.TransferEncoding
	}
	return resp.StatusCode, h, b
}

// TestLeanModernAnswersAsTheSDK: plain 2026-07-28 tools/call POSTs, one
// allowed, one denied, one with large numbers in its result, are answered
// by the lean front with the status, headers and bytes the SDK's stateless
// handler gives the same request (the same gateway served with
// DisableLeanCalls), but for the framing: the one message the SDK streams
// is the lean answer's whole application/json body (asJSONAnswer), after one policy evaluation each, and so are calls
// held, then approved or denied (but for the framing of a call parked off
// net/http's connection: leanpark.go).
func TestLeanModernAnswersAsTheSDK(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	sdkBase := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true})

	// The first 2026 call connects the upstream's session for 2026 agents
	// (modernconn.go), on the lean path as on the SDK path.
	st, _, b := modernPost(t, f.base, "up__echo", modernCallBody("1", "up__echo", `{"warm":1}`, ""), nil)
	<-f.h.args
	if st != http.StatusOK || !bytes.Contains(b, []byte(`"resultType":"complete"`)) {
		t.Fatalf("first call: %d %s", st, b)
	}
	if got := f.trail.take(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("first call: lean trail %v, want [true]", got)
	}

	for _, c := range []struct {
		name, tool, args string
		echo             bool
	}{
		{"allowed", "up__echo", `{"a":"<b>&","n":1}`, true},
		{"denied", "up__die", `{}`, false},
		{"numbers", "up__numbers", `{}`, false},
		{"huge numbers", "up__numbers", `{"huge":true}`, false},
	} {
		for _, id := range []string{`7`, `"s-1"`} {
			body := modernCallBody(id, c.tool, c.args, "")
			n0 := f.pol.n.Load()
			lst, lh, lb := modernPost(t, f.base, c.tool, body, nil)
			if c.echo {
				<-f.h.args
			}
			if got := f.trail.take(); !slices.Equal(got, []bool{true}) {
				t.Errorf("%s (id %s): lean trail %v, want [true]", c.name, id, got)
			}
			if n := f.pol.n.Load() - n0; n != 1 {
				t.Errorf("%s (id %s): %d policy evaluations, want 1", c.name, id, n)
			}
			sst, sh, sb := modernPost(t, sdkBase, c.tool, body, nil)
			if c.echo {
				<-f.h.args
			}
			// The SDK streams the one message; the lean front writes it
			// alone as application/json (leanjson_test.go).
			sh, sb = asJSONAnswer(t, sh, sb)
			if lst != sst || !equalHeaders(lh, sh) || !bytes.Equal(lb, sb) {
				t.Errorf("%s (id %s):\nlean %d %v %s\nsdk  %d %v %s", c.name, id, lst, lh, lb, sst, sh, sb)
			}
		}
	}
	if n := f.h.count("die"); n != 0 {
		t.Fatalf("the denied tool ran %d times", n)
	}

	// Held, then approved: the same answer; held, then denied: the same
	// status, headers and kind of answer (the approval's id differs).
	for _, v := range []approval.Verdict{approval.VerdictApprove, approval.VerdictDeny} {
		body := modernCallBody("9", "up__big", `{"n":3}`, "")
		held := func(base string) (int, http.Header, []byte) {
			type answer struct {
				st int
				h  http.Header
				b  []byte
			}
			done := make(chan answer, 1)
			go func() {
				st, h, b := modernPost(t, base, "up__big", body, nil)
				done <- answer{st, h, b}
			}()
			f.reviewNext(t, v)
			a := <-done
			return a.st, a.h, a.b
		}
		n0 := f.pol.n.Load()
		lst, lh, lb := held(f.base)
		if got := f.trail.take(); !slices.Equal(got, []bool{true}) {
			t.Errorf("held (%s): lean trail %v, want [true]", v, got)
		}
		if n := f.pol.n.Load() - n0; n != 1 {
			t.Errorf("held (%s): %d policy evaluations, want 1", v, n)
		}
		sst, sh, sb := held(sdkBase)
		sh, sb = asJSONAnswer(t, sh, sb)
		same := bytes.Equal(lb, sb)
		if v == approval.VerdictDeny {
			same = bytes.Contains(lb, []byte(`"isError":true`)) && bytes.Contains(sb, []byte(`"isError":true`)) &&
				bytes.HasSuffix(bytes.TrimSpace(lb), []byte(`"resultType":"complete"}}`)) && bytes.HasSuffix(bytes.TrimSpace(sb), []byte(`"resultType":"complete"}}`))
		}
		// The held call is parked off net/http's connection (leanpark.go):
		// answered with a Content-Length and "Connection: close".
		// (net/http's client keeps "Connection" out of the headers: the
		// raw tests in leanpark_test.go check it.)
		if lh.Get("Content-Length") != strconv.Itoa(len(lb)) {
			t.Errorf("held (%s): parked answer's framing %v", v, lh)
		}
		for _, k := range []string{"Connection", "Content-Length", "Transfer-Encoding"} {
			lh.Del(k)
			sh.Del(k)
		}
		if lst != sst || !equalHeaders(lh, sh) || !same {
			t.Errorf("held (%s):\nlean %d %v %s\nsdk  %d %v %s", v, lst, lh, lb, sst, sh, sb)
		}
	}
	if n := f.h.count("big"); n != 2 {
		t.Errorf("the approved calls ran %d times, want 2", n)
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestLeanModernHandsOffWhatIsNotPlain: 2026-07-28 POSTs the lean front
// must not answer go to the SDK path, which answers them as before: a
// progress token the front would not give back as the SDK path does (a
// plain one is the front's since branch tok26: lean2026prog_test.go), a
// log level, an approval resume or another _meta key,
// requestState, inputResponses, a task, the Tasks extension or URL
// elicitation declared (MRTR rounds are off here, so URL elicitation alone
// stays lean), an Mcp-Name or Mcp-Method that does not match the body, a
// missing one, an Mcp-Param-* header, a _meta protocol version that is not
// the header's, an unknown tool, the policy tool, arguments that are not an
// object, a batch. A call the gate holds is handed over with its decision
// (one policy evaluation) and runs once approved.
func TestLeanModernHandsOffWhatIsNotPlain(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	// Connect the upstream's 2026 session.
	modernPost(t, f.base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args
	f.trail.take()

	echo := func(meta string) string { return modernCallBody("2", "up__echo", `{}`, meta) }
	for _, c := range []struct {
		name, tool, body string
		hdr              map[string]string
	}{
		{"progress token as a fraction", "up__echo", echo(`"progressToken":1.5`), nil},
		{"log level", "up__echo", echo(`"io.modelcontextprotocol/logLevel":"debug"`), nil},
		{"other _meta key", "up__echo", echo(`"vendor/x":1`), nil},
		{"approval resume", "up__echo", echo(`"toolgate/approval":"nope"`), nil},
		{"requestState", "up__echo", strings.Replace(echo(""), `"arguments"`, `"requestState":"x","arguments"`, 1), nil},
		{"inputResponses", "up__echo", strings.Replace(echo(""), `"arguments"`, `"inputResponses":{},"arguments"`, 1), nil},
		{"task", "up__echo", strings.Replace(echo(""), `"arguments"`, `"task":{},"arguments"`, 1), nil},
		{"tasks extension", "up__echo", strings.Replace(echo(""), `clientCapabilities":{}`, `clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1), nil},
		{"Mcp-Name mismatch", "up__echo", echo(""), map[string]string{"Mcp-Name": "up__die"}},
		{"Mcp-Name missing", "up__echo", echo(""), map[string]string{"Mcp-Name": ""}},
		{"Mcp-Method mismatch", "up__echo", echo(""), map[string]string{"Mcp-Method": "tools/list"}},
		{"Mcp-Method missing", "up__echo", echo(""), map[string]string{"Mcp-Method": ""}},
		{"Mcp-Param header", "up__echo", echo(""), map[string]string{"Mcp-Param-X": "1"}},
		{"_meta version differs", "up__echo", strings.Replace(echo(""), `"2026-07-28"`, `"2025-11-25"`, 1), nil},
		{"unknown tool", "up__nope", modernCallBody("2", "up__nope", `{}`, ""), nil},
		{"policy tool", PolicyToolName, modernCallBody("2", PolicyToolName, `{}`, ""), nil},
		{"arguments not an object", "up__echo", modernCallBody("2", "up__echo", `[1]`, ""), nil},
		{"batch", "up__echo", "[" + echo("") + "]", nil},
	} {
		st, _, b := modernPost(t, f.base, c.tool, c.body, c.hdr)
		// The echo tool sent its arguments before its answer came back.
		select {
		case <-f.h.args:
		default:
		}
		if got := f.trail.take(); !slices.Equal(got, []bool{false}) {
			t.Errorf("%s: lean trail %v, want [false]; answer %d %s", c.name, got, st, b)
		}
	}

	// Held on a Gatekeeper that cannot admit in place: handed to the SDK
	// path with the decision taken (TestLeanModernAnswersAsTheSDK: held by
	// the front otherwise).
	g2 := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(f.h))}}, unlessHeldOnly{f.gt}, nil)
	g2.leanHook = f.trail.hook
	sdkPath := serveHTTP(t, g2, nil)
	modernPost(t, sdkPath, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args
	f.trail.take()
	n0 := f.pol.n.Load()
	done := make(chan []byte, 1)
	go func() {
		_, _, b := modernPost(t, sdkPath, "up__big", modernCallBody("3", "up__big", `{"n":3}`, ""), nil)
		done <- b
	}()
	f.approveNext(t)
	b := <-done
	if !bytes.Contains(b, []byte(`"resultType":"complete"`)) || bytes.Contains(b, []byte(`"isError":true`)) {
		t.Fatalf("approved held call answered %s", b)
	}
	if got := f.trail.take(); !slices.Equal(got, []bool{false}) {
		t.Errorf("held call: lean trail %v, want [false]", got)
	}
	if n := f.pol.n.Load() - n0; n != 1 {
		t.Errorf("held call: %d policy evaluations, want 1", n)
	}
	if n := f.h.count("big"); n != 1 {
		t.Errorf("the approved call ran %d times, want 1", n)
	}
}

// TestLeanModernGoClient: a go-sdk client speaking 2026-07-28 gets its
// allowed and denied calls answered by the lean front with what the SDK
// path would give.
func TestLeanModernGoClient(t *testing.T) {
	verifyNoLeaks(t)
	f := newLeanFixture(t, nil)
	c := mcp.NewClient(&mcp.Implementation{Name: "agent-2026", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: f.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: aliceToken, next: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
		t.Fatalf("negotiated %s, want %s", v, modernVersion)
	}
	for i := range 3 {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"i":1}`)})
		if err != nil || res.IsError || textOf(t, res) != `{"i":1}` {
			t.Fatalf("echo %d: %+v %v", i, res, err)
		}
		<-f.h.args
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__die", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "no dying") {
		t.Fatalf("denied call: %+v %v", res, err)
	}
	got := f.trail.take()
	// server/discover goes to the SDK path.
	if n := len(got); n < 4 || !slices.Equal(got[n-4:], []bool{true, true, true, true}) {
		t.Fatalf("lean trail %v, want the four calls served by the lean front", got)
	}
	if f.h.count("die") != 0 {
		t.Fatal("the denied tool ran")
	}
}

// TestLeanModernDroppedPostCancels: an allowed lean 2026-07-28 call whose
// POST ends is cancelled at once as the caller's cancellation
// (context.Canceled, as PropagateRequestCancellation makes it on the SDK
// path), not after the drop grace as ErrClientGone; a held one's request
// becomes cancelled.
func TestLeanModernDroppedPostCancels(t *testing.T) {
	verifyNoLeaks(t)
	// A grace far longer than the test: only an immediate cancel ends it.
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	modernPost(t, f.base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args
	f.trail.take()

	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/mcp", strings.NewReader(modernCallBody("2", "up__sleep", `{}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": modernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "up__sleep"} {
		req.Header.Set(k, v)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	if got := <-f.h.started; got != "sleep" {
		t.Fatalf("started %q", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want its own cancellation", err)
	}
	select {
	case err := <-f.h.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("upstream call ended with %v, want context.Canceled", err)
		}
	case <-time.After(testWait):
		t.Fatal("the call was not cancelled when its POST ended (only the hour-long drop grace would end it)")
	}
	if got := f.trail.take(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("lean trail %v, want [true]", got)
	}

	// A held call whose POST ends: its request becomes cancelled at once
	// (the caller's cancellation), not after the grace.
	ctx, cancel = context.WithCancel(t.Context())
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, f.base+"/mcp", strings.NewReader(modernCallBody("3", "up__big", `{"n":1}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": modernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "up__big"} {
		req.Header.Set(k, v)
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	f.waitState(t, approval.StatePending, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want its own cancellation", err)
	}
	f.waitState(t, approval.StateCancelled, 1)
	if got := f.trail.take(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("held call: lean trail %v, want [true]", got)
	}
	if n := f.h.count("big"); n != 0 {
		t.Fatalf("the cancelled held call ran %d times", n)
	}
}

// unlessHeldOnly is the gate without AdmitTo: the lean front decides calls
// with it but cannot hold them (holdsLean is false).
type unlessHeldOnly struct{ gt *gate.Gate }

func (u unlessHeldOnly) Admit(ctx context.Context, c gate.Call) gate.Admission {
	return u.gt.Admit(ctx, c)
}

func (u unlessHeldOnly) AdmitUnlessHeld(ctx context.Context, c *gate.Call, adm *gate.Admission) *gate.HandOff {
	return u.gt.AdmitUnlessHeld(ctx, c, adm)
}

// TestPlainModernKeepsTheCapabilitiesAsSent: the relay round of a plain
// 2026-07-28 call (kept by a held call until its answer) carries the
// agent's client capabilities as the bytes it sent, not decoded into maps
// (a map[string]any and its entries per held call), and an invalid
// capabilities member still hands the call to the SDK path.
func TestPlainModernKeepsTheCapabilitiesAsSent(t *testing.T) {
	fx := newLeanFixture(t, nil)
	// Connect the upstream's 2026 session (plainModern wants the server up).
	modernPost(t, fx.base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-fx.h.args
	f := &httpFront{g: fx.g}
	caps := `{"elicitation":{"form":{}},"sampling":{},"roots":{"listChanged":true}}`
	body := strings.Replace(modernCallBody("2", "up__echo", `{"a":1}`, ""), `clientCapabilities":{}`, `clientCapabilities":`+caps, 1)
	h := http.Header{"Mcp-Name": {"up__echo"}}
	_, _, relay, _, ok := f.plainModern(h, []byte(body))
	if !ok || relay == nil {
		t.Fatal("plainModern: not plain")
	}
	raw, isRaw := relay.caps.(json.RawMessage)
	if !isRaw {
		t.Fatalf("relay caps are a %T, want the agent's bytes (json.RawMessage)", relay.caps)
	}
	if string(raw) != caps {
		t.Errorf("relay caps %s, want %s", raw, caps)
	}
	if out, err := json.Marshal(relay.meta(nil)); err != nil || !strings.Contains(string(out), caps) {
		t.Errorf("the round's _meta upstream: %s, %v; want the capabilities %s", out, err, caps)
	}
	bad := strings.Replace(modernCallBody("3", "up__echo", `{}`, ""), `clientCapabilities":{}`, `clientCapabilities":{"x":}`, 1)
	if _, _, _, _, ok := f.plainModern(h, []byte(bad)); ok {
		t.Error("invalid capabilities: plain, want handed to the SDK path")
	}
}

// TestLeanModernHeldKeepsOnlyTheID: a 2026-07-28 call the front holds keeps
// of its decoded request only the id it is answered with: not the params
// (the _meta's bytes, the name), which would stay on the heap for as long
// as the call is held.
func TestLeanModernHeldKeepsOnlyTheID(t *testing.T) {
	fx := newLeanFixture(t, nil)
	modernPost(t, fx.base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-fx.h.args
	f := &httpFront{g: fx.g}
	body := modernCallBody(`"held-7"`, "up__big", `{"n":3}`, "")
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": modernVersion, "Mcp-Method": "tools/call", "Mcp-Name": "up__big"} {
		req.Header.Set(k, v)
	}
	served, prior, held := f.serveLeanModern(httptest.NewRecorder(), req, []byte(body), approval.Principal{ID: "alice"})
	if !served || prior != nil || held == nil {
		t.Fatalf("serveLeanModern: served %v, prior %v, held %v; want held by the front", served, prior, held)
	}
	defer held.later.run()
	if held.m.Params != nil || held.m.JSONRPC != "" || held.m.Method != "" {
		t.Errorf("held call keeps %+v of its request, want only its id", held.m)
	}
	if string(held.m.ID) != `"held-7"` || string(held.call.Arguments) != `{"n":3}` {
		t.Errorf("held call: id %s, arguments %s; want \"held-7\" and {\"n\":3}", held.m.ID, held.call.Arguments)
	}
}
