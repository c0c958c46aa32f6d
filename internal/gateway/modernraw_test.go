package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// envRaw2025, set in the stdio-raw child's environment, makes it speak
// 2025-11-25 only (no server/discover).
const envRaw2025 = "TOOLGATE_TEST_RAW_2025"

// rawStdioServerEra is rawStdioServer speaking 2026-07-28 (and older) or,
// when only2025, 2025-11-25 only.
func rawStdioServerEra(name string, only2025 bool) ServerConfig {
	sc := rawStdioServer(name)
	if only2025 {
		sc.Env[envRaw2025] = "1"
	}
	return sc
}

// modernConnRaw returns u's session for 2026-07-28 agents and how many raw
// calls were sent on it (0 without a session or raw calls).
func modernConnRaw(u *upstream) (*upConn, uint64) {
	u.modern.mu.Lock()
	c := u.modern.conn
	u.modern.mu.Unlock()
	if c == nil || c.raw == nil {
		return c, 0
	}
	return c, c.raw.count()
}

// replyBody is a 2026-07-28 call of the stdio-raw upstream's reply tool
// that answers with result (a JSON object) under marker.
func replyBody(t *testing.T, marker, result string) string {
	t.Helper()
	args, err := json.Marshal(map[string]any{"marker": marker, "lines": []string{`{"jsonrpc":"2.0","id":$ID,"result":` + result + `}`}})
	if err != nil {
		t.Fatal(err)
	}
	return modernCallBody(`"`+marker+`"`, "up__reply", string(args), "")
}

// TestModernRawAnswersAsTheSDKPath: a lean 2026-07-28 call on a stdio
// upstream whose session for 2026 agents speaks 2025-11-25 is sent the raw
// way (one raw call each, none through the SDK), and its answer is the one
// the SDK path (the same gateway with DisableLeanCalls) gives for the same
// upstream answer: the same status, headers and bytes for plain results
// (text content, isError, structuredContent with numbers no float64 holds,
// the upstream's _meta with its own server info, which toolgate's
// replaces) and for results the SDK re-shapes (a member it does not know,
// annotations, another content type) or relays (inputRequests and
// requestState: refused here, as there is no key to wrap the state with).
func TestModernRawAnswersAsTheSDKPath(t *testing.T) {
	for _, only2025 := range []bool{false, true} {
		t.Run(fmt.Sprintf("only2025=%v", only2025), func(t *testing.T) { testModernRawAnswers(t, only2025) })
	}
}

func testModernRawAnswers(t *testing.T, only2025 bool) {
	t.Helper()
	g := newGateway(t, []ServerConfig{rawStdioServerEra("up", only2025)}, allowAll(), nil)
	waitUpstream(t, g, "up", nil)
	u := g.ups["up"]
	trail := &leanTrail{}
	g.leanHook = trail.hook
	lean := serveHTTP(t, g, nil)
	sdk := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: true})

	// The first call connects the session for 2026 agents.
	if st, _, b := modernPost(t, lean, "up__echo", modernCallBody("1", "up__echo", `{"warm":1}`, ""), nil); st != http.StatusOK || !bytes.Contains(b, []byte(`"resultType":"complete"`)) {
		t.Fatalf("first call: %d %s", st, b)
	}
	c, _ := modernConnRaw(u)
	if c == nil || c.modernEra() == only2025 || c.raw == nil {
		t.Fatalf("the session for 2026 agents: %+v; want a stdio session, 2025-era: %v", c, only2025)
	}
	trail.take()

	for i, tc := range []struct {
		name, result string
		sameJSON     bool // the same JSON after decode (escapes, key order), not the same bytes
	}{
		{"text", `{"content":[{"type":"text","text":"a <b> & é \u00e9"}]}`, true},
		{"isError", `{"content":[{"type":"text","text":"no"}],"isError":true}`, false},
		{"isError false", `{"content":[],"isError":false}`, false},
		{"structured", `{"content":[{"type":"text","text":"{}"}],"structuredContent":{"n":1e400,"m":12345678901234567890,"s":"<x>"}}`, false},
		{"structured null", `{"content":[],"structuredContent":null}`, false},
		{"meta", `{"_meta":{"vendor/z":{"n":1e400},"io.modelcontextprotocol/serverInfo":{"name":"up","version":"9"},"a":[1, 2]},"content":[]}`, false},
		{"meta null", `{"_meta":null,"content":[{"type":"text","text":"x"}]}`, false},
		{"spaced", "{ \"content\" : [ { \"text\" : \"t\" , \"type\" : \"text\" } ] ,\t\"isError\" : true }", true},
		{"unknown member", `{"content":[],"x-vendor":{"n":1}}`, false},
		{"annotations", `{"content":[{"type":"text","text":"x","annotations":{"priority":0.5}}]}`, false},
		{"item meta", `{"content":[{"type":"text","text":"x","_meta":{"k":12345678901234567890}}]}`, false},
		{"image", `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`, false},
		{"no content", `{"isError":true}`, false},
		{"input round", `{"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object"}}}},"requestState":"upstream-secret"}`, false},
		{"state only", `{"content":[],"requestState":"upstream-secret"}`, false},
		{"resultType complete", `{"content":[{"type":"text","text":"x"}],"resultType":"complete"}`, false},
		{"input required", `{"inputRequests":{"q":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object"}}}},"requestState":"upstream-secret","resultType":"input_required"}`, false},
	} {
		_, n0 := modernConnRaw(u)
		lst, lh, lb := modernPost(t, lean, "up__reply", replyBody(t, fmt.Sprintf("lean-%d", i), tc.result), nil)
		_, n1 := modernConnRaw(u)
		if tr := trail.take(); len(tr) != 1 || !tr[0] {
			t.Errorf("%s: lean trail %v, want served lean", tc.name, tr)
		}
		if n1-n0 != 1 {
			t.Errorf("%s: %d raw calls for the lean call, want 1", tc.name, n1-n0)
		}
		sst, sh, sb := modernPost(t, sdk, "up__reply", replyBody(t, fmt.Sprintf("sdk-%d", i), tc.result), nil)
		if _, n2 := modernConnRaw(u); n2 != n1 {
			t.Errorf("%s: the SDK path's call went the raw way", tc.name)
		}
		// The ids differ (the marker is the id): compare with the lean
		// call's id in the SDK's answer.
		sb = bytes.ReplaceAll(sb, []byte(fmt.Sprintf(`"sdk-%d"`, i)), []byte(fmt.Sprintf(`"lean-%d"`, i)))
		sh, sb = asJSONAnswer(t, sh, sb)
		for _, k := range []string{"Content-Length"} {
			lh.Del(k)
			sh.Del(k)
		}
		same := bytes.Equal(lb, sb)
		if tc.sameJSON {
			same = sameJSON(t, lb, sb)
		}
		if lst != sst || !equalHeaders(lh, sh) || !same {
			t.Errorf("%s:\nraw %d %v %s\nsdk %d %v %s", tc.name, lst, lh, lb, sst, sh, sb)
		}
		if strings.Contains(string(lb), "upstream-secret") {
			t.Errorf("%s: the upstream's requestState reached the agent: %s", tc.name, lb)
		}
	}
}

// sameJSON reports whether the answers a and b (one JSON-RPC message
// each) carry the same JSON after decode.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	dec := func(x []byte) any {
		var v any
		if err := json.Unmarshal(x, &v); err != nil {
			t.Fatalf("answer %q: %v", x, err)
		}
		return v
	}
	return reflect.DeepEqual(dec(a), dec(b))
}

// newRawModernFixture is newLeanFixture with the stdio-raw upstream "up"
// (its session for 2026 agents speaks 2025-11-25) and a policy that holds
// up__reply for approval and allows the rest.
func newRawModernFixture(t *testing.T, only2025 bool) *leanFixture {
	t.Helper()
	db := sqlitetest.Open(t)
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "reply needs a human", Server: "up", Tools: []string{"reply"}, Effect: policy.Approve}},
	})}
	gt := gate.New(db, pol, &gate.Options{})
	f := &leanFixture{gt: gt, db: db, pol: pol, trail: &leanTrail{}}
	f.g = newGateway(t, []ServerConfig{rawStdioServerEra("up", only2025)}, gt, nil)
	waitUpstream(t, f.g, "up", nil)
	f.g.leanHook = f.trail.hook
	f.base = serveHTTP(t, f.g, nil)
	return f
}

// TestModernRawHeldCallsRunOnce: 2026-07-28 calls held, then approved, on
// an upstream whose session for 2026 agents speaks 2025-11-25: the lean
// front's is sent once the raw way (none through the SDK), answered as the
// SDK path answers the same held call, and recorded as run with its
// outcome (ok; an isError result: tool_error) and its result in the
// ledger.
func TestModernRawHeldCallsRunOnce(t *testing.T) {
	for _, only2025 := range []bool{false, true} {
		t.Run(fmt.Sprintf("only2025=%v", only2025), func(t *testing.T) { testModernRawHeld(t, only2025) })
	}
}

func testModernRawHeld(t *testing.T, only2025 bool) {
	t.Helper()
	f := newRawModernFixture(t, only2025)
	sdkBase := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true})
	u := f.g.ups["up"]
	if st, _, b := modernPost(t, f.base, "up__echo", modernCallBody("1", "up__echo", `{"warm":1}`, ""), nil); st != http.StatusOK {
		t.Fatalf("first call: %d %s", st, b)
	}
	if c, _ := modernConnRaw(u); c == nil || c.modernEra() == only2025 {
		t.Fatalf("the session for 2026 agents: 2025-era %v, want %v", c == nil || !c.modernEra(), only2025)
	}
	f.trail.take()
	held := func(base, marker, result string) (int, http.Header, []byte, approval.Request) {
		t.Helper()
		type answer struct {
			st int
			h  http.Header
			b  []byte
		}
		done := make(chan answer, 1)
		go func() {
			st, h, b := modernPost(t, base, "up__reply", replyBody(t, marker, result), nil)
			done <- answer{st, h, b}
		}()
		rs := f.pendingOne(t)
		if _, err := f.gt.Review(t.Context(), rs.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
		a := <-done
		r, err := f.db.GetRequest(t.Context(), rs.ID)
		if err != nil {
			t.Fatal(err)
		}
		return a.st, a.h, a.b, r
	}
	for i, tc := range []struct {
		result string
		want   approval.Outcome
	}{
		{`{"content":[{"type":"text","text":"done"}],"structuredContent":{"n":12345678901234567890}}`, approval.OutcomeOK},
		{`{"content":[{"type":"text","text":"failed"}],"isError":true}`, approval.OutcomeToolError},
		{`{"content":[],"x-vendor":1}`, approval.OutcomeOK},
	} {
		_, n0 := modernConnRaw(u)
		lst, lh, lb, lr := held(f.base, fmt.Sprintf("lean-%d", i), tc.result)
		_, n1 := modernConnRaw(u)
		if n1-n0 != 1 {
			t.Errorf("%d: %d raw calls for the approved lean call, want 1", i, n1-n0)
		}
		if tr := f.trail.take(); len(tr) != 1 || !tr[0] {
			t.Errorf("%d: lean trail %v, want served lean", i, tr)
		}
		sst, sh, sb, sr := held(sdkBase, fmt.Sprintf("sdk-%d", i), tc.result)
		if _, n2 := modernConnRaw(u); n2 != n1 {
			t.Errorf("%d: the SDK path's call went the raw way", i)
		}
		sb = bytes.ReplaceAll(sb, []byte(fmt.Sprintf(`"sdk-%d"`, i)), []byte(fmt.Sprintf(`"lean-%d"`, i)))
		sh, sb = asJSONAnswer(t, sh, sb)
		for _, k := range []string{"Connection", "Content-Length", "Transfer-Encoding"} {
			lh.Del(k)
			sh.Del(k)
		}
		if lst != sst || !equalHeaders(lh, sh) || !bytes.Equal(lb, sb) {
			t.Errorf("%d:\nraw %d %v %s\nsdk %d %v %s", i, lst, lh, lb, sst, sh, sb)
		}
		for _, r := range []approval.Request{lr, sr} {
			if r.DispatchOutcome != tc.want {
				t.Errorf("%d: request %s outcome %q, want %q", i, r.ID, r.DispatchOutcome, tc.want)
			}
		}
	}
}

// pendingOne waits for the one pending request and returns it.
func (f *leanFixture) pendingOne(t *testing.T) approval.Request {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		rs, _, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 {
			return rs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending requests, want 1", len(rs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestModernRawUpstreamDiesMidCall: the upstream process of the session
// for 2026 agents exits during a lean 2026-07-28 call sent the raw way:
// the agent gets the answer the SDK path gives (the upstream is
// unavailable, the call may have run), the call is not sent again, and the
// next call goes to a new session.
func TestModernRawUpstreamDiesMidCall(t *testing.T) {
	for _, only2025 := range []bool{false, true} {
		t.Run(fmt.Sprintf("only2025=%v", only2025), func(t *testing.T) {
			g := newGateway(t, []ServerConfig{rawStdioServerEra("up", only2025)}, allowAll(), nil)
			waitUpstream(t, g, "up", nil)
			u := g.ups["up"]
			lean := serveHTTP(t, g, nil)
			sdk := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: true})
			answers := map[string][]byte{}
			for _, base := range []string{lean, sdk} {
				if st, _, b := modernPost(t, base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil); st != http.StatusOK {
					t.Fatalf("warm-up: %d %s", st, b)
				}
				c, n0 := modernConnRaw(u)
				st, h, b := modernPost(t, base, "up__die", modernCallBody("2", "up__die", `{}`, ""), nil)
				if st != http.StatusOK {
					t.Fatalf("die: %d %s", st, b)
				}
				_, answers[base] = asJSONAnswer(t, h, b)
				// The session ends; the next call opens a new one and
				// nothing of the first is sent on it.
				deadline := time.Now().Add(testWait)
				for {
					c2, n := modernConnRaw(u)
					if c2 != c {
						if c2 != nil && n != 0 {
							t.Errorf("the new session got %d raw calls before any was made", n)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the session for 2026 agents was not dropped after its process exited")
					}
					time.Sleep(10 * time.Millisecond)
				}
				want := n0 // the SDK path's call
				if base == lean {
					want = n0 + 1 // sent once the raw way
				}
				if n := c.raw.count(); n != want {
					t.Errorf("raw calls on the session that died: %d, want %d", n, want)
				}
			}
			lb, sb := answers[lean], answers[sdk]
			if !bytes.Contains(lb, []byte(`"isError":true`)) || !bytes.Contains(lb, []byte("its process ended during the call")) || !bytes.Equal(lb, sb) {
				t.Errorf("answers:\nraw %s\nsdk %s", lb, sb)
			}
			if st, _, b := modernPost(t, lean, "up__echo", modernCallBody("3", "up__echo", `{"after":1}`, ""), nil); st != http.StatusOK || !bytes.Contains(b, []byte(`after`)) {
				t.Errorf("call after the restart: %d %s", st, b)
			}
		})
	}
}

// TestModernRawOnA2025HTTPUpstream: on an HTTP upstream that speaks
// 2025-11-25 only, a lean 2026-07-28 call is sent as one raw POST (none
// through the SDK) and answered with the bytes the SDK path gives (as
// application/json: asJSONAnswer): text
// content with HTML characters, structuredContent and _meta with numbers no
// float64 holds, the upstream's own server info replaced by toolgate's.
func TestModernRawOnA2025HTTPUpstream(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	addUpstreamTools(s, nil)
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, s)}}, allowAll(), nil)
	waitUpstream(t, g, "up", nil)
	u := g.ups["up"]
	lean := serveHTTP(t, g, nil)
	sdk := serveHTTP(t, g, &HTTPOptions{DisableLeanCalls: true})
	for i, c := range []struct{ tool, args string }{
		{"up__echo", `{"warm":1}`},
		{"up__echo", `{"a":"<b>&","n":12345678901234567890}`},
		{"up__numbers", `{}`},
		{"up__numbers", `{"huge":true}`},
	} {
		body := modernCallBody("7", c.tool, c.args, "")
		n0 := u.rawHTTPSeq.Load()
		lst, lh, lb := modernPost(t, lean, c.tool, body, nil)
		n1 := u.rawHTTPSeq.Load()
		if i == 0 {
			if mc, _ := modernConnRaw(u); mc == nil || mc.modernEra() || mc.hc == nil {
				t.Fatalf("the session for 2026 agents: %+v; want a 2025-era HTTP session", mc)
			}
		}
		sst, sh, sb := modernPost(t, sdk, c.tool, body, nil)
		sh, sb = asJSONAnswer(t, sh, sb)
		if n2 := u.rawHTTPSeq.Load(); n1 != n0+1 || n2 != n1 {
			t.Errorf("%s %s: raw POSTs %d → %d (lean) → %d (SDK path); want one, for the lean call", c.tool, c.args, n0, n1, n2)
		}
		if lst != sst || !equalHeaders(lh, sh) || !bytes.Equal(lb, sb) {
			t.Errorf("%s %s:\nraw %d %v %s\nsdk %d %v %s", c.tool, c.args, lst, lh, lb, sst, sh, sb)
		}
	}
}
