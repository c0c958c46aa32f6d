package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// countingPolicy is a policy.Holder that counts its evaluations.
type countingPolicy struct {
	*policy.Holder
	n atomic.Int64
}

func (c *countingPolicy) Evaluate(pc policy.Call) (policy.Decision, error) {
	c.n.Add(1)
	return c.Holder.Evaluate(pc)
}

// leanTrail records what the lean front did with each POST it read.
type leanTrail struct {
	mu  sync.Mutex
	got []bool
}

func (l *leanTrail) hook(served bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, served)
}

// take returns what was recorded since the last take.
func (l *leanTrail) take() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// leanFixture is a gateway over the real gate and a SQLite store with a
// policy that allows up__echo, up__sleep and up__numbers, denies up__die
// and holds up__big for approval, served over HTTP with the lean front's
// trail recorded.
type leanFixture struct {
	g     *Gateway
	gt    *gate.Gate
	db    store.Store
	pol   *countingPolicy
	trail *leanTrail
	base  string
	h     *hooks
}

func newLeanFixture(t *testing.T, opts *HTTPOptions) *leanFixture {
	t.Helper()
	return newLeanFixtureWith(t, nil, opts)
}

// newLeanFixtureWith is newLeanFixture with the gateway's options gopts.
func newLeanFixtureWith(t *testing.T, gopts *Options, opts *HTTPOptions) *leanFixture {
	t.Helper()
	return newLeanFixtureGK(t, gopts, opts, func(gt *gate.Gate) Gatekeeper { return gt })
}

// newLeanFixtureGK is newLeanFixtureWith with the gateway's gatekeeper
// made by gk from the fixture's gate (a wrapper around it).
func newLeanFixtureGK(t *testing.T, gopts *Options, opts *HTTPOptions, gk func(*gate.Gate) Gatekeeper) *leanFixture {
	t.Helper()
	db := sqlitetest.Open(t)
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules: []policy.Rule{
			{Name: "no dying", Server: "up", Tools: []string{"die"}, Effect: policy.Deny},
			{Name: "big needs a human", Server: "up", Tools: []string{"big"}, Effect: policy.Approve},
		},
	})}
	gt := gate.New(db, pol, &gate.Options{})
	h := newHooks()
	f := &leanFixture{gt: gt, db: db, pol: pol, trail: &leanTrail{}, h: h}
	f.g = newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gk(gt), gopts)
	f.g.leanHook = f.trail.hook
	f.base = serveHTTP(t, f.g, opts)
	return f
}

// approveNext approves the one pending request.
func (f *leanFixture) approveNext(t *testing.T) {
	t.Helper()
	f.reviewNext(t, approval.VerdictApprove)
}

// doApproving sends req with c and, while the call waits for its
// approval, approves the one pending request (approveNext); it returns
// the answer's exchange and its whole body. An error sending or reading
// fails t.
func (f *leanFixture) doApproving(t *testing.T, c *http.Client, req *http.Request) (exchange, []byte) {
	t.Helper()
	type answer struct {
		ex   exchange
		body []byte
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		done <- answer{exchangeOf(resp), b, err}
	}()
	f.approveNext(t)
	a := <-done
	if a.err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, a.err)
	}
	return a.ex, a.body
}

// reviewNext gives the one pending request verdict v.
func (f *leanFixture) reviewNext(t *testing.T, v approval.Verdict) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		rs, _, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StatePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 {
			if _, err := f.gt.Review(t.Context(), rs[0].ID, approval.Principal{ID: "carol", Kind: "human"}, v, "", ""); err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending requests, want 1", len(rs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeanFrontServesPlainCallsAndHandsOffTheRest: on one go-sdk client
// session, a plain allowed call and a denied one are answered by the lean
// front (one policy evaluation each), and so is a call with a lone
// progress token (leanprog.go); one with more in its _meta, an unknown
// tool and arguments that are not an object are handed to the SDK path; a call the policy holds is held by the lean front (one evaluation
// in all, one request: leanhold_test.go has the other answers), and each
// gets the answer the SDK path gives.
func TestLeanFrontServesPlainCallsAndHandsOffTheRest(t *testing.T) {
	f := newLeanFixture(t, nil)
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	ctx := t.Context()
	waitInitialized(t, f.g, cs.ID())
	f.trail.take()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"a":1}`)})
	if err != nil || res.IsError || textOf(t, res) != `{"a":1}` {
		t.Fatalf("allowed call: %v %+v", err, res)
	}
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Fatalf("allowed call: lean trail %v, want [true]", got)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__die", Arguments: json.RawMessage(`{}`)})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), `denied by policy rule "no dying"`) {
		t.Fatalf("denied call: %v %+v", err, res)
	}
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Fatalf("denied call: lean trail %v, want [true]", got)
	}
	if n := f.pol.n.Load(); n != 2 {
		t.Fatalf("%d policy evaluations for two calls, want 2", n)
	}

	handedOff := func(what string) {
		t.Helper()
		if got := f.trail.take(); len(got) != 1 || got[0] {
			t.Fatalf("%s: lean trail %v, want [false]", what, got)
		}
	}
	p := &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"b":2}`)}
	p.SetProgressToken("tok-1")
	if res, err = cs.CallTool(ctx, p); err != nil || textOf(t, res) != `{"b":2}` {
		t.Fatalf("call with a progress token: %v %+v", err, res)
	}
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Fatalf("call with a progress token: lean trail %v, want [true] (leanprog.go)", got)
	}
	p = &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"b":3}`), Meta: mcp.Meta{"progressToken": "tok-2", "x": 1}}
	if res, err = cs.CallTool(ctx, p); err != nil || textOf(t, res) != `{"b":3}` {
		t.Fatalf("call with a progress token and more _meta: %v %+v", err, res)
	}
	handedOff("progress token and more _meta")
	if _, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__nope", Arguments: json.RawMessage(`{}`)}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("unknown tool: %v, want the SDK path's unknown tool error", err)
	}
	handedOff("unknown tool")
	if _, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`[1]`)}); err == nil || !strings.Contains(err.Error(), "must be a JSON object") {
		t.Fatalf("array arguments: %v, want invalid params", err)
	}
	handedOff("array arguments")

	before := f.pol.n.Load()
	done := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__big", Arguments: json.RawMessage(`{"n":3}`)})
		if err == nil && (res.IsError || textOf(t, res) != bigText(3)) {
			err = errors.New("held call's result: " + textOf(t, res))
		}
		done <- err
	}()
	f.approveNext(t)
	if err := <-done; err != nil {
		t.Fatalf("held then approved call: %v", err)
	}
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Fatalf("held call: lean trail %v, want [true] (held by the lean front)", got)
	}
	if n := f.pol.n.Load() - before; n != 1 {
		t.Errorf("%d policy evaluations for a call held and approved on the lean front, want 1", n)
	}
	if rs, _, err := f.db.ListRequests(ctx, store.Filter{}); err != nil || len(rs) != 1 {
		t.Errorf("%d approval requests (%v), want 1", len(rs), err)
	}
}

// TestLeanCallCancelledByTheAgent: an agent's notifications/cancelled
// naming a lean call cancels it at once (the SDK does not know its id),
// long before the POST's drop grace would.
func TestLeanCallCancelledByTheAgent(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__sleep", Arguments: json.RawMessage(`{}`)})
		done <- err
	}()
	<-f.h.started
	cancel()
	select {
	case cause := <-f.h.ended:
		if cause == nil {
			t.Error("the upstream call ended without a cause, want it cancelled")
		}
	case <-time.After(testWait):
		t.Fatal("the upstream call was not cancelled")
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v, want context.Canceled", err)
	}
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Errorf("lean trail %v, want the sleep served by the lean front", got)
	}
}

// TestLeanFrontRawAnswers sends raw POSTs on a session: a lean call is
// answered with one JSON-RPC response under its id as application/json
// with its Content-Length (nothing went before it), the upstream's large
// numbers intact; an oversized body gets 413; a numeric id past
// 2^53-1 and a malformed request are handed to the SDK path.
func TestLeanFrontRawAnswers(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{MaxBody: 1 << 12})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	f.trail.take()
	post := func(body io.Reader) (int, http.Header, string) {
		t.Helper()
		resp, b := sessionExchange(t, http.MethodPost, f.base, aliceToken, sid, version, body)
		return resp.StatusCode, resp.Header, string(b)
	}
	status, h, body := post(strings.NewReader(`{"jsonrpc":"2.0","id":"n-1","method":"tools/call","params":{"name":"up__numbers","arguments":{}}}`))
	if status != http.StatusOK || h.Get("Content-Type") != "application/json" || !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":"n-1","result":{`) ||
		!strings.Contains(body, numbersStructured) || h.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("lean call: %d %v %q", status, h, body)
	}
	if got := f.trail.take(); len(got) != 1 || !got[0] {
		t.Fatalf("lean trail %v, want [true]", got)
	}
	big := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"x":"`),
		bytes.NewReader(bytes.Repeat([]byte("a"), 1<<13)), strings.NewReader(`"}}}`))
	if status, _, body = post(big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d %q, want 413", status, body)
	}
	// The SDK path answers this one (under the id as it decoded it).
	post(strings.NewReader(`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`))
	if status, _, _ = post(strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up__echo","arguments":{}}`)); status == http.StatusOK {
		t.Errorf("truncated JSON: %d, want the SDK's 400", status)
	}
	for i, served := range f.trail.take() {
		if served {
			t.Errorf("POST %d after the lean call was served by the lean front, want every one handed off", i)
		}
	}
}

// TestLeanRequestsKeepTheSessionAlive: the front's idle timer (which
// replaces the SDK's while the lean front is on) does not run while a
// request is in flight, however long, and starts again when the last one
// ends.
func TestLeanRequestsKeepTheSessionAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var expired atomic.Bool
		s := newLeanSession(nil, "alice", "2025-11-25", time.Minute, func() { expired.Store(true) })
		time.Sleep(50 * time.Second)
		end := s.start(time.Minute)
		time.Sleep(10 * time.Minute) // one long call
		synctest.Wait()
		if expired.Load() {
			t.Fatal("session expired while a request was in flight")
		}
		end()
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if expired.Load() {
			t.Fatal("session expired less than the idle timeout after its last request")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if !expired.Load() {
			t.Fatal("session did not expire after the idle timeout")
		}
	})
}

// waitInitialized waits until the lean front knows session sid finished its
// initialization (the SDK serves notifications/initialized after it
// answered the POST carrying it; until then calls are handed off).
func waitInitialized(t *testing.T, g *Gateway, sid string) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		ready := false
		g.leanRegs.Range(func(k, _ any) bool {
			if s := k.(*leanSessions).get(sid); s != nil && s.isInitialized() {
				ready = true
			}
			return !ready
		})
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never finished its initialization", sid)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPlainCallOnlyForPlainCalls: the lean front's classification of a
// body takes only one tools/call of a catalog tool with a keepable id,
// object (or no) arguments, no _meta other than a lone progress token
// the front gives back exactly (leanprog.go), and no task, inputResponses
// or requestState; everything else goes to the SDK path.
func TestPlainCallOnlyForPlainCalls(t *testing.T) {
	fx := newLeanFixture(t, nil)
	f := &httpFront{g: fx.g}
	call := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	for _, ok := range []string{
		call(`1`, `{"name":"up__echo","arguments":{"a":1}}`),
		call(`"s-1"`, `{"name":"up__echo"}`),
		" \n" + call(`-9007199254740991`, `{"name":"up__echo","arguments":{}}`),
	} {
		if _, _, tok, plain := f.plainCall([]byte(ok)); !plain || tok != nil {
			t.Errorf("%s: handed off (or a token %s), want it served", ok, tok)
		}
	}
	for params, want := range map[string]string{
		`{"name":"up__echo","_meta":{"progressToken":"p-1"}}`:                  `"p-1"`,
		`{"_meta": { "progressToken" : 7 } ,"name":"up__echo"}`:                `7`,
		`{"name":"up__echo","_meta":{"progressToken":-9007199254740991}}`:      `-9007199254740991`,
		`{"name":"up__echo","_meta":{"progressToken":"<&> ~"},"arguments":{}}`: `"<&> ~"`,
	} {
		_, _, tok, plain := f.plainCall([]byte(call(`1`, params)))
		if !plain || string(tok) != want {
			t.Errorf("%s: served %v with token %s, want served with %s", params, plain, tok, want)
		}
	}
	for name, body := range map[string]string{
		"batch":             `[` + call(`1`, `{"name":"up__echo"}`) + `]`,
		"other method":      `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		"notification":      `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"up__echo"}}`,
		"old jsonrpc":       `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"up__echo"}}`,
		"no params":         `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		"token and more":    call(`1`, `{"name":"up__echo","_meta":{"progressToken":"p","x":1}}`),
		"token twice":       call(`1`, `{"name":"up__echo","_meta":{"progressToken":"p","progressToken":"q"}}`),
		"token escaped":     call(`1`, `{"name":"up__echo","_meta":{"progressToken":"p\u0041"}}`),
		"token non-ASCII":   call(`1`, `{"name":"up__echo","_meta":{"progressToken":"pé"}}`),
		"token key escaped": call(`1`, `{"name":"up__echo","_meta":{"progress\u0054oken":"p"}}`),
		"token key folded":  call(`1`, `{"name":"up__echo","_meta":{"ProgressToken":"p"}}`),
		"meta key folded":   call(`1`, `{"name":"up__echo","_Meta":{"progressToken":"p"}}`),
		"meta twice":        call(`1`, `{"name":"up__echo","_meta":{"progressToken":"p"},"_meta":{"progressToken":"q"}}`),
		"token too big":     call(`1`, `{"name":"up__echo","_meta":{"progressToken":9007199254740993}}`),
		"token fraction":    call(`1`, `{"name":"up__echo","_meta":{"progressToken":1.0}}`),
		"token exponent":    call(`1`, `{"name":"up__echo","_meta":{"progressToken":1e3}}`),
		"token minus zero":  call(`1`, `{"name":"up__echo","_meta":{"progressToken":-0}}`),
		"token null":        call(`1`, `{"name":"up__echo","_meta":{"progressToken":null}}`),
		"token bool":        call(`1`, `{"name":"up__echo","_meta":{"progressToken":true}}`),
		"token object":      call(`1`, `{"name":"up__echo","_meta":{"progressToken":{}}}`),
		"empty meta":        call(`1`, `{"name":"up__echo","_meta":{}}`),
		"null meta":         call(`1`, `{"name":"up__echo","_meta":null}`),
		"array meta":        call(`1`, `{"name":"up__echo","_meta":[]}`),
		"resume":            call(`1`, `{"name":"up__echo","_meta":{"toolgate/approval":"apr_1"}}`),
		"task":              call(`1`, `{"name":"up__echo","task":{"ttl":1000}}`),
		"inputResponses":    call(`1`, `{"name":"up__echo","inputResponses":{}}`),
		"requestState":      call(`1`, `{"name":"up__echo","requestState":"x"}`),
		"array args":        call(`1`, `{"name":"up__echo","arguments":[1]}`),
		"policy tool":       call(`1`, `{"name":"`+PolicyToolName+`","arguments":{}}`),
		"unknown tool":      call(`1`, `{"name":"up__nope"}`),
		"fraction id":       call(`1.5`, `{"name":"up__echo"}`),
		"huge id":           call(`9007199254740992`, `{"name":"up__echo"}`),
		"object id":         call(`{"x":1}`, `{"name":"up__echo"}`),
		"null id":           call(`null`, `{"name":"up__echo"}`),
		"truncated":         call(`1`, `{"name":"up__echo"`),
		"trailing data":     call(`1`, `{"name":"up__echo"}`) + ` {}`,
	} {
		if _, _, _, plain := f.plainCall([]byte(body)); plain {
			t.Errorf("%s: %s served by the lean front, want it handed off", name, body)
		}
	}
}

// sessionRequest sends a request with method and body on agent session
// sid as token's principal, with the headers a 2025-era client sends (the
// negotiated version, JSON in, JSON and event streams accepted), and
// returns the response; the caller closes its body.
func sessionRequest(t *testing.T, method, base, token, sid, version string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+"/mcp", body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer " + token, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": version,
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// An exchange is what sessionExchange kept of a response.
type exchange struct {
	StatusCode       int
	ProtoMajor       int
	Header           http.Header
	TransferEncoding []string
	ContentLength    int64
}

// exchangeOf is the exchange of resp's answer.
func exchangeOf(resp *http.Response) exchange {
	return exchange{StatusCode: resp.StatusCode, ProtoMajor: resp.ProtoMajor, Header: resp.Header,
		TransferEncoding: resp.TransferEncoding, ContentLength: resp.ContentLength}
}

// sessionExchange is sessionRequest reading (and closing) the whole answer.
func sessionExchange(t *testing.T, method, base, token, sid, version string, body io.Reader) (exchange, []byte) {
	t.Helper()
	resp := sessionRequest(t, method, base, token, sid, version, body)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return exchangeOf(resp), b
}
