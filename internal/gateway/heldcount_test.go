package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/procs"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// readPanicStore is a real SQLite store whose reads of one request panic
// while armed, as a bug in the store would.
type readPanicStore struct {
	store.Store
	armed atomic.Bool
}

func (s *readPanicStore) GetRequest(ctx context.Context, id approval.ID) (approval.Request, error) {
	if s.armed.Load() {
		panic("tidy15: in a held call's read")
	}
	return s.Store.GetRequest(ctx, id)
}

// postWatch wraps the agent handler and tells when no POST is being
// served: every count of Options.Load is then over.
type postWatch struct {
	n    atomic.Int64
	idle chan struct{}
}

func (p *postWatch) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		p.n.Add(1)
		defer func() {
			if p.n.Add(-1) == 0 {
				select {
				case p.idle <- struct{}{}:
				default:
				}
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// waitIdle waits until no POST is being served.
func (p *postWatch) waitIdle(t *testing.T) {
	t.Helper()
	for p.n.Load() != 0 {
		select {
		case <-p.idle:
		case <-time.After(testWait):
			t.Fatalf("%d POSTs still served", p.n.Load())
		}
	}
}

// countFixture is the lean fixture's gateway (big needs a human, echo is
// allowed) on a readPanicStore, counting its POSTs in load, served
// behind a postWatch with a drop grace of an hour (only what a test does
// ends a held call).
type countFixture struct {
	*leanFixture
	load  *procs.Load
	watch *postWatch
	db    *readPanicStore
}

func newCountFixture(t *testing.T) *countFixture {
	t.Helper()
	db := &readPanicStore{Store: sqlitetest.Open(t)}
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Hour, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Hour},
		Rules:    []policy.Rule{{Name: "big needs a human", Server: "up", Tools: []string{"big"}, Effect: policy.Approve}},
	})}
	gt := gate.New(db, pol, &gate.Options{})
	h := newHooks()
	f := &countFixture{leanFixture: &leanFixture{gt: gt, db: db, pol: pol, trail: &leanTrail{}, h: h},
		load: &procs.Load{}, watch: &postWatch{idle: make(chan struct{}, 1)}, db: db}
	f.g = newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}}, gt, &Options{Load: f.load})
	handler, err := f.g.Handler(testAuth, &HTTPOptions{DropGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(f.watch.wrap(handler))
	t.Cleanup(ts.Close)
	f.base = ts.URL
	return f
}

// inFlight is what Options.Load counts now once no POST is being served:
// zero unless a count was left behind.
func (f *countFixture) inFlight(t *testing.T) int64 {
	t.Helper()
	f.watch.waitIdle(t)
	n, _ := f.load.InFlight()
	return n
}

// waitUncounted waits until Options.Load counts no call in flight, as
// inFlight does, for when a held call's POST is still served (postWatch
// counts it; Options.Load does not).
func (f *countFixture) waitUncounted(t *testing.T) {
	t.Helper()
	waitLoadZero(t, f.load)
}

// waitLoadZero waits until load counts no call in flight: a POST is
// counted until its handler returns, a moment after its answer reached
// the client. A count left behind fails it (after testWait).
func waitLoadZero(t *testing.T, load *procs.Load) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		if n, _ := load.InFlight(); n == 0 {
			return
		}
		if time.Now().After(deadline) {
			n, _ := load.InFlight()
			t.Fatalf("%d calls still counted in flight", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdSDK starts a call of big with a progress token (the SDK path) on
// cs and returns once the gate holds it: its first progress notification
// (the wait's first keep-alive) has arrived, and the approval's id.
func (f *countFixture) holdSDK(t *testing.T, ctx context.Context, cs *mcp.ClientSession, ev *clientEvents, n int) (approval.ID, chan callResult) {
	t.Helper()
	done := make(chan callResult, 1)
	p := &mcp.CallToolParams{Name: "up__big", Arguments: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)}
	sdkPathToken(p, "held")
	go func() {
		res, err := cs.CallTool(ctx, p)
		done <- callResult{res, err}
	}()
	select {
	case pr := <-ev.progress:
		if !strings.Contains(pr.Message, "waiting for approval") {
			t.Fatalf("first progress of the held call: %q", pr.Message)
		}
	case r := <-done:
		t.Fatalf("the call was answered without being held: %+v %v", r.res, r.err)
	case <-time.After(testWait):
		t.Fatal("the held call got no progress notification")
	}
	rs, _, err := f.db.ListRequests(ctx, store.Filter{State: approval.StatePending})
	if err != nil || len(rs) != 1 {
		t.Fatalf("%d pending requests (%v), want 1", len(rs), err)
	}
	return rs[0].ID, done
}

// waitNoCalls waits until the gateway tracks no call in flight: every
// call's handler returned.
func waitNoCalls(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		g.calls.mu.Lock()
		n := len(g.calls.m)
		g.calls.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls of %d sessions still in flight", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSDKPathHeldCallLeavesTheLoad: a call held on the SDK path (a
// go-sdk client's call with a progress token) leaves Options.Load while
// it waits for a human, as a held call of the lean front does: the count
// is what it was before the call, and an allowed call made meanwhile is
// the only one in flight (procs.Follow goes to one P). Before, the held
// call's POST stayed counted for the whole hold: one held SDK-path call
// and one caller at C=1 were two calls in flight at every look, and
// Follow kept the default number of Ps. Once approved, the call is
// counted again while it runs, and nothing is left counted at the end.
func TestSDKPathHeldCallLeavesTheLoad(t *testing.T) {
	f := newCountFixture(t)
	ev := newClientEvents()
	cs := connectHTTP(t, f.base, aliceToken, ev, nil)
	waitInitialized(t, f.g, cs.ID())
	if n := f.inFlight(t); n != 0 {
		t.Fatalf("in flight before the call: %d, want 0", n)
	}
	_, done := f.holdSDK(t, t.Context(), cs, ev, 3)
	if n, _ := f.load.InFlight(); n != 0 {
		t.Fatalf("in flight while the SDK-path call is held: %d, want 0 (as before the call)", n)
	}
	other := connectHTTP(t, f.base, bobToken, nil, nil)
	// The most in flight is looked at over the allowed call's POST alone.
	// A client's next request can overlap its last one's POST in the
	// count: the handler counts until it returns, after its answer is
	// flushed (here bob's initialize and notifications/initialized, 12
	// runs in 200).
	f.waitUncounted(t)
	f.load.Look()
	res, err := other.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{"a":1}`)})
	if err != nil || res.IsError {
		t.Fatalf("allowed call while one is held: %v %+v", err, res)
	}
	if _, most := f.load.InFlight(); most != 1 {
		t.Fatalf("most in flight with one held call and one allowed caller: %d, want 1", most)
	}
	f.approveNext(t)
	r := <-done
	if r.err != nil || r.res.IsError || textOf(t, r.res) != bigText(3) {
		t.Fatalf("approved call: %v %+v", r.err, r.res)
	}
	if n := f.h.count("big"); n != 1 {
		t.Fatalf("big ran %d times, want 1", n)
	}
	waitNoCalls(t, f.g)
	if n := f.inFlight(t); n != 0 {
		t.Fatalf("in flight after the call: %d, want 0", n)
	}
}

// TestSDKPathHeldCallLeavesNoCount: whatever ends a held SDK-path call's
// hold (the agent cancelling it, a DELETE of its session, a denial, its
// rule revoked before the approval, a panic in the wait's read of the
// store), its POST's count is
// neither left behind nor taken twice: once nothing is served, nothing is
// counted, and the next call counts as one.
func TestSDKPathHeldCallLeavesNoCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, f *countFixture, cs *mcp.ClientSession, cancel context.CancelFunc, id approval.ID)
		want func(t *testing.T, r callResult) bool
	}{
		{"cancelled by the agent", func(_ *testing.T, _ *countFixture, _ *mcp.ClientSession, cancel context.CancelFunc, _ approval.ID) {
			cancel()
		}, func(_ *testing.T, r callResult) bool { return r.err != nil }},
		{"session deleted", func(t *testing.T, f *countFixture, cs *mcp.ClientSession, _ context.CancelFunc, _ approval.ID) {
			t.Helper()
			// The agent's DELETE of its session (the go-sdk client's Close
			// waits for its calls first).
			req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, f.base+"/mcp", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+aliceToken)
			req.Header.Set("Mcp-Session-Id", cs.ID())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}, func(_ *testing.T, r callResult) bool { return r.err != nil || r.res.IsError }},
		{"denied", func(t *testing.T, f *countFixture, _ *mcp.ClientSession, _ context.CancelFunc, _ approval.ID) {
			t.Helper()
			f.reviewNext(t, approval.VerdictDeny)
		}, func(t *testing.T, r callResult) bool {
			t.Helper()
			return r.err == nil && r.res.IsError && strings.Contains(textOf(t, r.res), "denied by carol")
		}},
		{"rule revoked, then approved", func(t *testing.T, f *countFixture, _ *mcp.ClientSession, _ context.CancelFunc, _ approval.ID) {
			t.Helper()
			// The policy moves to deny the tool while the call is held: the
			// approval's consume evaluates again and refuses it.
			p := *f.pol.Load()
			p.Rules = append([]policy.Rule{{Name: "big is gone", Server: "up", Tools: []string{"big"}, Effect: policy.Deny}}, p.Rules...)
			f.pol.Store(&p)
			f.approveNext(t)
		}, func(_ *testing.T, r callResult) bool { return r.err == nil && r.res.IsError }},
		{"panic in the wait", func(_ *testing.T, f *countFixture, _ *mcp.ClientSession, _ context.CancelFunc, id approval.ID) {
			f.db.armed.Store(true)
			f.gt.Wake(id) // a wake-up without a row: the wait reads the store
		}, func(t *testing.T, r callResult) bool {
			t.Helper()
			return r.err == nil && r.res.IsError && strings.Contains(textOf(t, r.res), "internal error")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCountFixture(t)
			ev := newClientEvents()
			cs := connectHTTP(t, f.base, aliceToken, ev, nil)
			waitInitialized(t, f.g, cs.ID())
			// The client's notifications/initialized POST is counted until
			// its handler returns, which can be after the hold below.
			if n := f.inFlight(t); n != 0 {
				t.Fatalf("in flight before the call: %d, want 0", n)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			id, done := f.holdSDK(t, ctx, cs, ev, 2)
			if n, _ := f.load.InFlight(); n != 0 {
				t.Fatalf("in flight while held: %d, want 0", n)
			}
			tc.end(t, f, cs, cancel, id)
			var r callResult
			select {
			case r = <-done:
			case <-time.After(testWait):
				t.Fatal("the held call was not answered")
			}
			if !tc.want(t, r) {
				t.Fatalf("answer: %+v %v", r.res, r.err)
			}
			f.db.armed.Store(false)
			waitNoCalls(t, f.g)
			if n := f.inFlight(t); n != 0 {
				t.Fatalf("in flight once nothing is served: %d, want 0", n)
			}
			if n := f.h.count("big"); n != 0 {
				t.Fatalf("big ran %d times, want 0", n)
			}
			next := connectHTTP(t, f.base, bobToken, nil, nil)
			if res, err := next.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: json.RawMessage(`{}`)}); err != nil || res.IsError {
				t.Fatalf("next call: %v %+v", err, res)
			}
			if n := f.inFlight(t); n != 0 {
				t.Fatalf("in flight after the next call: %d, want 0", n)
			}
		})
	}
}
