package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRawHTTPCallFollowsRedirect: a raw call's POST, sent without
// http.Client.Do (doLean), still follows an upstream's 307 within its
// origin, as the client does, and the call gets the answer of the URL it
// was redirected to. Without doLean's fallback the call fails with "the
// upstream answered HTTP 307".
func TestRawHTTPCallFollowsRedirect(t *testing.T) {
	for _, mode := range []string{"json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			f := newRawHTTPFixture(t, mode == "json", ServerConfig{}, nil)
			vendor := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"moved"}]}}`
			answer := answerSSE(vendor)
			if mode == "json" {
				answer = answerJSON(vendor)
			}
			f.up.set("vendor", func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
				if r.URL.Query().Get("moved") == "" {
					w.Header().Set("Location", "/?moved=1")
					w.WriteHeader(http.StatusTemporaryRedirect)
					return
				}
				answer(w, r, id)
			})
			got := f.call(t, "r-1", "vendor", `{}`)
			if want := `{"jsonrpc":"2.0","id":"r-1","result":{"content":[{"type":"text","text":"moved"}]}}`; got != want {
				t.Errorf("answer\n got %q\nwant %q", got, want)
			}
			if tr := f.trail.take(); len(tr) != 1 || !tr[0] {
				t.Errorf("lean trail %v, want the call served lean", tr)
			}
			calls := f.up.takeCalls()
			if len(calls) < 2 || calls[len(calls)-1].id != calls[0].id {
				t.Errorf("upstream got %d tools/call POSTs (%v), want the redirected one sent again under its id", len(calls), calls)
			}
			// The next call on the session works and reuses the pool.
			if got := f.call(t, "n-1", "echo", `{"i":1}`); !strings.Contains(got, `{\"i\":1}`) {
				t.Errorf("next call: %q", got)
			}
		})
	}
}

// TestDoLeanFailsAsClientDo: a raw POST doLean could not send fails with
// the error http.Client.Do gives for it (a *url.Error naming the POST and
// the endpoint), so what callError and the logs make of it is unchanged.
func TestDoLeanFailsAsClientDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	_ = ln.Close() // nothing listens: the dial is refused
	hc := newUpstreamHTTPClient(newH1Transport(http.DefaultTransport, nil, endpoint, 4), slog.New(slog.DiscardHandler))
	post := func() *http.Request {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, endpoint, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	_, lerr := doLean(hc, post())
	_, derr := hc.Do(post()) //nolint:bodyclose // it fails
	var ue *url.Error
	if lerr == nil || derr == nil || !errors.As(lerr, &ue) || ue.Op != "Post" || ue.URL != endpoint || lerr.Error() != derr.Error() {
		t.Errorf("doLean: %v; Client.Do: %v; want the same *url.Error", lerr, derr)
	}
}

// answerRT answers every request with a fixed 200 JSON answer without
// a network: for counting doLean's own allocations.
type answerRT struct{ resp http.Response }

func (rt *answerRT) RoundTrip(req *http.Request) (*http.Response, error) {
	_ = req.Body.Close()
	return &rt.resp, nil
}

// TestDoLeanAllocatesNothing: doLean adds no allocation to a raw POST's
// round trip; http.Client.Do, which it replaces on this path, copies the
// request's headers for redirects and keeps the requests sent (five or
// more allocations per call).
func TestDoLeanAllocatesNothing(t *testing.T) {
	rt := &answerRT{resp: http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: http.NoBody}}
	hc := newUpstreamHTTPClient(rt, slog.New(slog.DiscardHandler))
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1:1/mcp", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {"s"}}
	body, payload := &rawPostBody{}, []byte(`{}`)
	run := func(do func(*http.Request) (*http.Response, error)) float64 {
		return testing.AllocsPerRun(200, func() {
			body.Reset(payload)
			req.Body = body
			resp, err := do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%v %v", resp, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	if n := run(func(r *http.Request) (*http.Response, error) { return doLean(hc, r) }); n != 0 {
		t.Errorf("doLean: %.1f allocations per POST, want 0", n)
	}
	if n := run(hc.Do); n < 3 {
		t.Logf("http.Client.Do: %.1f allocations per POST (the test's premise: it allocates)", n)
	}
}
