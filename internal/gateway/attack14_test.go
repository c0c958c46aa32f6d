package gateway

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Tests of branch attack14: what an agent is told when an HTTP upstream
// fails a call that may have reached it (httpreached.go).

// sdkCall POSTs tools/call up__<tool> with a progress token, which the
// lean front hands to the SDK path (the middleware, upstream.call and the
// go-sdk client's CallTool), and returns the answer.
func (f *rawHTTPFixture) sdkCall(t *testing.T, rid, tool, args string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"` + rid + `","method":"tools/call","params":{"name":"up__` + tool + `","arguments":` + args + `,"_meta":{"progressToken":"` + rid + `"}}}`
	resp, b := sessionExchange(t, http.MethodPost, f.base, aliceToken, f.sid, f.ver, strings.NewReader(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", rid, resp.StatusCode, b)
	}
	return string(b)
}

// TestHTTPUpstreamMayHaveRunIsNotNothingRun: an HTTP upstream that got a
// whole tools/call and then cut the connection before answering, or
// answered HTTP 500 (its tool failed while running) or 502 or 504 (a
// proxy in front of it passed the call on and got no valid or timely
// answer), may have run the call: the agent is told so, on the lean raw
// path and on the SDK path, and never "nothing was run" (an agent told
// that may send it again). The go-sdk client reports all of these as
// rejected by the transport, and the raw path took 502 and 504 for
// rejections. A 429 or 503 still says nothing was run. The upstream got
// each call once.
func TestHTTPUpstreamMayHaveRunIsNotNothingRun(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	status := func(code int) func(http.ResponseWriter, *http.Request, json.RawMessage) {
		return func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, http.StatusText(code), code)
		}
	}
	cases := []struct {
		tool   string
		answer func(http.ResponseWriter, *http.Request, json.RawMessage)
		want   string
	}{
		{"dies", func(_ http.ResponseWriter, r *http.Request, _ json.RawMessage) {
			_, _ = io.Copy(io.Discard, r.Body) // the whole call arrived
			panic(http.ErrAbortHandler)        // the connection is cut before any answer
		}, "may have run"},
		{"vendor", status(http.StatusInternalServerError), "may have run"},
		{"fails", status(http.StatusBadGateway), "may have run"},
		{"array", status(http.StatusGatewayTimeout), "may have run"},
		{"plain", status(http.StatusServiceUnavailable), "nothing was run"},
		{"notjson", status(http.StatusTooManyRequests), "nothing was run"},
	}
	for _, c := range cases {
		f.up.set(c.tool, c.answer)
	}
	for _, path := range []string{"raw", "sdk"} {
		for _, c := range cases {
			rid := path + "-" + c.tool
			var got string
			if path == "raw" {
				got = f.call(t, rid, c.tool, `{}`)
			} else {
				got = f.sdkCall(t, rid, c.tool, `{}`)
			}
			if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, c.want) {
				t.Errorf("%s %s: answer %q, want a failure saying %q", path, c.tool, got, c.want)
			}
			if n := len(f.up.takeCalls()); n != 1 {
				t.Errorf("%s %s: the upstream got %d tools/call POSTs, want 1", path, c.tool, n)
			}
		}
	}
	if got := f.sdkCall(t, "ok", "echo", `{"still":"works"}`); !strings.Contains(got, `{\"still\":\"works\"}`) {
		t.Errorf("call after the failures: %q", got)
	}
}

// TestH1FallbackMarksAWrittenRequest: a POST that goes through net/http's
// Transport (an https:// upstream, a proxy) and fails after the
// transport read its whole body may have reached the upstream; one that
// failed before (nothing listens) did not.
func TestH1FallbackMarksAWrittenRequest(t *testing.T) {
	verifyNoLeaks(t)
	var got atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(ts.Close)
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	h1 := &h1Transport{fallback: base} // no lean host: everything goes to the fallback
	_, err := h1Post(t, t.Context(), h1, ts.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	if err == nil || !reached(err) {
		t.Errorf("POST cut after the upstream read it: error %v, want it marked as may have reached", err)
	}
	if n := got.Load(); n != 1 {
		t.Errorf("the upstream got %d POSTs, want 1", n)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, err = h1Post(t, t.Context(), h1, "http://"+addr+"/", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	if err == nil || reached(err) {
		t.Errorf("POST to nothing: error %v, want one not marked as may have reached", err)
	}
}
