package gateway

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// idWatchListener's connections tell, at each write that carries an
// answer to the lean call id "same-1", whether that id was still in flight
// in the lean session sid (tracked).
type idWatchListener struct {
	net.Listener
	front   *httpFront
	sid     *atomic.Value // string
	tracked chan bool
}

func (l idWatchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return idWatchConn{Conn: c, l: l}, nil
}

type idWatchConn struct {
	net.Conn
	l idWatchListener
}

func (c idWatchConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"id":"same-1","result"`)) {
		sid, _ := c.l.sid.Load().(string)
		if s := c.l.front.lean.get(sid); s != nil {
			s.mu.Lock()
			_, in := s.inFlight["s:same-1"]
			s.mu.Unlock()
			select {
			case c.l.tracked <- in:
			default:
			}
		}
	}
	return c.Conn.Write(p)
}

// TestLeanJSONAnswerLeavesBeforeTheHandlerReturns: a lean call's JSON
// answer reaches the agent while the handler has not returned yet (its
// cleanups and net/http's end of the request run after it: leanflush.go),
// as the same bytes (one JSON body with its Content-Length), and a next
// call with the same id, sent as soon as the answer is read, is served,
// not refused as a duplicate: the id was free when the answer was written
// (leanCleanups.freeID). The handler is wrapped to wait, after the front's
// ServeHTTP returned, until the agent has read the answer.
func TestLeanJSONAnswerLeavesBeforeTheHandlerReturns(t *testing.T) {
	f := newLeanFixture(t, nil)
	h, err := f.g.Handler(testAuth, nil)
	if err != nil {
		t.Fatal(err)
	}
	const marker = "X-Toolgate-Test-Wait"
	read := make(chan struct{}, 1)
	returned := make(chan bool, 1) // whether the agent had read the answer by the handler's return
	hh, _ := h.(*http.ServeMux).Handler(httptest.NewRequest(http.MethodPost, "/mcp", nil))
	front := hh.(*httpFront)
	var sidv atomic.Value
	tracked := make(chan bool, 2)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.Header.Get(marker) == "" {
			return
		}
		select {
		case <-read:
			returned <- true
		case <-time.After(testWait): // only when the answer waits for the return
			returned <- false
		}
	}))
	ts.Listener = idWatchListener{Listener: ts.Listener, front: front, sid: &sidv, tracked: tracked}
	ts.Start()
	t.Cleanup(ts.Close)
	cs := connectHTTP(t, ts.URL, aliceToken, nil, nil)
	sidv.Store(cs.ID())
	waitInitialized(t, f.g, cs.ID())
	f.trail.take()
	sid, ver := cs.ID(), cs.InitializeResult().ProtocolVersion
	send := func(wait bool) (exchange, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/mcp", strings.NewReader(leanCall("same-1", "up__echo", `{"x":"y"}`)))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": ver,
			"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
			req.Header.Set(k, v)
		}
		if wait {
			req.Header.Set(marker, "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return exchangeOf(resp), b
	}
	resp, body := send(true)
	read <- struct{}{}
	first := wantJSONAnswer(t, "the first call", resp, body, "same-1")
	// The same id at once, on another connection of the client's pool
	// (the first one's handler may not have returned yet).
	resp2, body2 := send(false)
	second := wantJSONAnswer(t, "the next call with the same id", resp2, body2, "same-1")
	if string(first) != string(second) {
		t.Errorf("the two answers differ:\n %s\n %s", first, second)
	}
	if !<-returned {
		t.Errorf("the handler returned before the agent had read its answer: the answer waited for the handler's end")
	}
	for i := range 2 {
		select {
		case in := <-tracked:
			if in {
				t.Errorf("answer %d was written while its id was still in flight: an agent reusing the id at once could be refused as a duplicate", i+1)
			}
		default:
			t.Errorf("answer %d was not seen written", i+1)
		}
	}
	if tr := f.trail.take(); len(tr) != 2 || !tr[0] || !tr[1] {
		t.Errorf("lean trail %v, want both calls served by the lean front", tr)
	}
}
