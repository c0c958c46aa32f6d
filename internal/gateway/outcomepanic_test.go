package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/seal"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// panicOutcomeStore is a real SQLite store whose writes of a dispatch
// outcome panic while armed, before they write, as a bug in the store or
// in the ledger's record would (attack13).
type panicOutcomeStore struct {
	store.Store
	armed atomic.Bool
	hits  atomic.Int32
}

func (s *panicOutcomeStore) check() {
	if s.armed.Load() {
		s.hits.Add(1)
		panic("attack13: in the outcome's write")
	}
}

func (s *panicOutcomeStore) RecordOutcome(ctx context.Context, id approval.ID, o approval.Outcome, rec *store.Result, actor string) error {
	s.check()
	return s.Store.RecordOutcome(ctx, id, o, rec, actor)
}

func (s *panicOutcomeStore) RecordDispatch(ctx context.Context, r store.Result, actor string, fn func(*approval.Request) error) (approval.Request, error) {
	s.check()
	return s.Store.RecordDispatch(ctx, r, actor, fn)
}

// outcomePanicFixture is a lean fixture on a panicOutcomeStore whose
// HTTP front has opts; big needs an approval, the rest is allowed.
func outcomePanicFixture(t *testing.T, opts *HTTPOptions) (*leanFixture, *panicOutcomeStore, string) {
	t.Helper()
	return outcomePanicFixtureWith(t, &gate.Options{}, nil, opts)
}

// outcomePanicFixtureWith is outcomePanicFixture with the gate's options
// and, when tasks is set, the gate keeping the Tasks extension's tasks.
func outcomePanicFixtureWith(t *testing.T, gopts *gate.Options, tasks *bool, opts *HTTPOptions) (*leanFixture, *panicOutcomeStore, string) {
	t.Helper()
	db := &panicOutcomeStore{Store: sqlitetest.Open(t)}
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "big needs a human", Server: "up", Tools: []string{"big"}, Effect: policy.Approve}},
	})}
	gt := gate.New(db, pol, gopts)
	h := newHooks()
	f := &leanFixture{gt: gt, db: db, pol: pol, trail: &leanTrail{}, h: h}
	var gw *Options
	if tasks != nil && *tasks {
		gw = &Options{Tasks: gt}
	}
	f.g = newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gt, gw)
	f.g.leanHook = f.trail.hook
	return f, db, serveHTTP(t, f.g, opts)
}

// callBig calls up__big with n on cs in the background.
func callBig(t *testing.T, cs *mcp.ClientSession, n int) chan callResult {
	t.Helper()
	c := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__big", Arguments: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)})
		c <- callResult{res, err}
	}()
	return c
}

// checkOutcomePanicAnswer checks the answer r to a call whose outcome's
// write panicked once (db armed), and that the call ran once.
func checkOutcomePanicAnswer(t *testing.T, f *leanFixture, db *panicOutcomeStore, r callResult) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(r.err, &we) || we.Code != jsonrpc.CodeInternalError || !strings.Contains(we.Message, "may or may not have run") {
		t.Fatalf("answer after a panic in the outcome's write: %+v %v, want a JSON-RPC internal error", r.res, r.err)
	}
	if n := db.hits.Load(); n != 1 {
		t.Fatalf("the outcome's write ran %d times, want once", n)
	}
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("big ran %d times, want 1", n)
	}
}

// TestLeanHeldCallOutcomePanicAnswersAnError (attack13): a panic while
// recording the outcome of an approved call held by the lean front for a
// go-sdk client's 2025-11-25 session. answerLean recorded with FinishWith,
// which leaves the Admission's finish in place, so its recovery
// (answerPanicked, FinishOnce) ran the same write a second time, which
// panicked again inside the deferred recovery: the panic escaped to
// net/http, which dropped the connection (the client saw a transport
// error, not an answer). Now the first write is the only one: the client
// gets a JSON-RPC internal error saying the call may have run, the call
// ran once, and the session goes on.
func TestLeanHeldCallOutcomePanicAnswersAnError(t *testing.T) {
	f, db, base := outcomePanicFixture(t, &HTTPOptions{DropGrace: time.Hour})
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	waitInitialized(t, f.g, cs.ID())
	db.armed.Store(true)
	done := callBig(t, cs, 1)
	f.approveNext(t)
	r := <-done
	db.armed.Store(false)
	checkOutcomePanicAnswer(t, f, db, r)
	done = callBig(t, cs, 2)
	f.approveNext(t)
	if r := <-done; r.err != nil || r.res.IsError || textOf(t, r.res) != bigText(2) {
		t.Fatalf("the next call: %+v %v", r.res, r.err)
	}
}

// TestSDKPathOutcomePanicAnswersAnError (attack13): the same panic on
// the SDK path (a call the lean front does not serve: here all, with
// DisableLeanCalls; in use, every call with a progress token and every
// session the lean front does not know). The go-sdk runs the tool handler
// on a goroutine of its own with no recover, so the panic ended the
// process, every held call with it (the test binary died). Now answerCall
// recovers it as the lean paths do: a JSON-RPC internal error, the
// outcome's write tried once, and the process goes on.
func TestSDKPathOutcomePanicAnswersAnError(t *testing.T) {
	f, db, base := outcomePanicFixture(t, &HTTPOptions{DisableLeanCalls: true})
	cs := connectHTTP(t, base, aliceToken, nil, nil)
	db.armed.Store(true)
	done := callBig(t, cs, 1)
	f.approveNext(t)
	r := <-done
	db.armed.Store(false)
	checkOutcomePanicAnswer(t, f, db, r)
	done = callBig(t, cs, 2)
	f.approveNext(t)
	if r := <-done; r.err != nil || r.res.IsError || textOf(t, r.res) != bigText(2) {
		t.Fatalf("the next call: %+v %v", r.res, r.err)
	}
}

// TestTaskOutcomePanicKeepsTheProcess (attack13): the same panic on a
// task's runner (a 2026-07-28 Tasks client's held call, run on a
// goroutine of the gateway's once approved). Nothing above the runner
// recovered: the panic ended the process (the test binary died). Now the
// runner recovers it as the answer paths do; the call ran once and the
// gateway goes on.
func TestTaskOutcomePanicKeepsTheProcess(t *testing.T) {
	key, err := seal.NewKey(bytes.Repeat([]byte{7}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	tasks := true
	f, db, base := outcomePanicFixtureWith(t, &gate.Options{Key: key}, &tasks, nil)
	db.armed.Store(true)
	body := strings.Replace(modernCallBody("7", "up__big", `{"n":1}`, ""), `clientCapabilities":{}`,
		`clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1)
	st, _, b := modernPost(t, base, "up__big", body, nil)
	if st != http.StatusOK || !bytes.Contains(b, []byte(`"resultType":"task"`)) {
		t.Fatalf("task call: %d %s", st, b)
	}
	f.approveNext(t)
	deadline := time.Now().Add(testWait)
	for db.hits.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the task's outcome was never written")
		}
		time.Sleep(10 * time.Millisecond)
	}
	db.armed.Store(false)
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("big ran %d times, want 1", n)
	}
	st, _, b = modernPost(t, base, "up__echo", modernCallBody("8", "up__echo", `{"x":1}`, ""), nil)
	if st != http.StatusOK || bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("the next call: %d %s", st, b)
	}
	if err := f.g.Close(); err != nil {
		t.Fatal(err)
	}
	if n := db.hits.Load(); n != 1 {
		t.Fatalf("the outcome's write ran %d times, want once", n)
	}
}

// TestResourceAndPromptOutcomePanicAnswersAnError (attack13): the same
// panic in the record of an approved resources/read and prompts/get,
// answered on the SDK path (the go-sdk's handler goroutines have no
// recover), ended the process. Now each is answered a JSON-RPC internal
// error, the outcome's write runs once, and the session goes on.
func TestResourceAndPromptOutcomePanicAnswersAnError(t *testing.T) {
	db := &panicOutcomeStore{Store: sqlitetest.Open(t)}
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules: []policy.Rule{{Name: "reads need a human", Server: "up", Resources: []string{"test://static"}, Prompts: []string{"greet"},
			Effect: policy.Approve}},
	})}
	gt := gate.New(db, pol, &gate.Options{})
	f := &leanFixture{gt: gt, db: db, pol: pol}
	f.g = newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newFeatureServer("up", nil))}}, gt, nil)
	cs := connectHTTP(t, serveHTTP(t, f.g, nil), aliceToken, nil, nil)
	prompt := ""
	for p, err := range cs.Prompts(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p.Name, "greet") {
			prompt = p.Name
		}
	}
	uri := ""
	for r, err := range cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(r.URI, "static") {
			uri = r.URI
		}
	}
	if prompt == "" || uri == "" {
		t.Fatalf("prompt %q, resource %q not listed", prompt, uri)
	}
	get := func() error {
		_, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: prompt, Arguments: map[string]string{"name": "Ann"}})
		return err
	}
	read := func() error {
		_, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		return err
	}
	for i, do := range []func() error{read, get} {
		db.hits.Store(0)
		db.armed.Store(true)
		done := make(chan error, 1)
		go func() { done <- do() }()
		f.approveNext(t)
		err := <-done
		db.armed.Store(false)
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError || !strings.Contains(we.Message, "may or may not have run") {
			t.Fatalf("%d: answer after a panic in the outcome's write: %v, want a JSON-RPC internal error", i, err)
		}
		if n := db.hits.Load(); n != 1 {
			t.Fatalf("%d: the outcome's write ran %d times, want once", i, n)
		}
		done = make(chan error, 1)
		go func() { done <- do() }()
		f.approveNext(t)
		if err := <-done; err != nil {
			t.Fatalf("%d: the next one: %v", i, err)
		}
	}
}

// panicPromptGK allows everything, except that admitting a prompts/get
// panics, as a bug before the answer would.
type panicPromptGK struct{ allowAllGK }

func (panicPromptGK) Admit(ctx context.Context, c gate.Call) gate.Admission {
	if c.Kind == approval.KindPromptGet {
		panic("attack13: in the admission")
	}
	return allowAllGK{}.Admit(ctx, c)
}

// TestSDKHandlerPanicBeforeAdmissionAnswersAnError (attack13): a panic in
// an SDK-path request other than tools/call before anything was admitted
// (here in the admission of a prompts/get) ended the process: the go-sdk's
// handler goroutines have no recover. The middleware now answers it as a
// JSON-RPC internal error, and the session goes on. (tools/call is left
// out: its middleware frame is one its held calls park under; see
// middleware.)
func TestSDKHandlerPanicBeforeAdmissionAnswersAnError(t *testing.T) {
	g := newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newFeatureServer("up", nil))}}, panicPromptGK{}, nil)
	cs := connectHTTP(t, serveHTTP(t, g, nil), aliceToken, nil, nil)
	prompt := ""
	for p, err := range cs.Prompts(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompt = p.Name
	}
	_, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: prompt, Arguments: map[string]string{"name": "Ann"}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError {
		t.Fatalf("answer after a panic in the admission: %v, want a JSON-RPC internal error", err)
	}
	if tl, err := cs.ListTools(t.Context(), nil); err != nil || len(tl.Tools) == 0 {
		t.Fatalf("the next request: %+v %v", tl, err)
	}
}
