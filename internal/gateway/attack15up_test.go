package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Tests of branch attack15: an HTTP upstream that misbehaves at the byte
// level (rawhttpheadlimit.go, httpreached.go), on the raw path and the
// SDK path (both POST through the lean exchange).

// answerHead answers a scripted call on the hijacked connection with the
// head pre+"HTTP/1.1 200 OK" padded (an X-Pad header) to exactly size
// bytes, 1xx answers in pre included, then the JSON answer msg; each
// write of step bytes is flushed on its own (a TCP segment each: the
// connection has no Nagle delay). The answer says Connection: close, as
// the connection is closed after it: without it, toolgate could keep the
// connection and send the next call on it before the close arrived (a
// call that may have run, and never reached the upstream: 3 runs in 50
// under load).
func answerHead(t *testing.T, pre string, size, step int, msg string) func(http.ResponseWriter, *http.Request, json.RawMessage) {
	t.Helper()
	return func(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
		c, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = c.Close() }()
		body := strings.ReplaceAll(msg, "$ID", string(id))
		tail := fmt.Sprintf("Content-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", len(body))
		head := pre + "HTTP/1.1 200 OK\r\n"
		if size > 0 {
			pad := size - len(head) - len("X-Pad: \r\n") - len(tail)
			if pad < 1 {
				t.Errorf("head of %d bytes: too small", size)
				return
			}
			head += "X-Pad: " + strings.Repeat("p", pad) + "\r\n"
		}
		head += tail
		if size > 0 && len(head) != size {
			t.Errorf("head of %d bytes, want %d", len(head), size)
		}
		all := head + body
		if step <= 0 {
			step = len(all)
		}
		for i := 0; i < len(all); i += step {
			if _, err := io.WriteString(bw, all[i:min(i+step, len(all))]); err != nil {
				return
			}
			if err := bw.Flush(); err != nil {
				return // toolgate stopped reading
			}
		}
	}
}

// TestH1InformationalAndHeadBounds: the lean exchange reads answer heads
// as net/http's Transport bounds them. Five 1xx answers (100, 102 and
// 103 with headers) before the final one are passed over; a sixth fails
// the call, as does a 101 (not an upgrade toolgate asked for), as one
// that may have run (the upstream read it). A head of exactly 10 MiB (1xx
// answers included) is read; one byte more fails the call as one that may
// have run. A head arriving one byte per TCP segment is read. Raw path
// and SDK path; the upstream got each call once; the next call works.
func TestH1InformationalAndHeadBounds(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	h1Of(t, f.g)
	const result = `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"final-answer"}]}}`
	info := []string{
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 102 Processing\r\nX-Step: 1\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </c.css>; rel=preload\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\n",
	}
	five := strings.Join(info, "")
	cases := []struct {
		name, pre  string
		size, step int
		ok         bool
	}{
		{name: "five 1xx", pre: five, ok: true},
		{name: "six 1xx", pre: five + "HTTP/1.1 100 Continue\r\n\r\n"},
		{name: "101", pre: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"},
		{name: "one byte per segment", pre: info[2], step: 1, ok: true},
		{name: "head at the limit", pre: five, size: h1MaxHead, step: 64 << 10, ok: true},
		{name: "head one byte over", pre: five, size: h1MaxHead + 1, step: 64 << 10},
	}
	for _, path := range []string{"raw", "sdk"} {
		call := f.call
		if path == "sdk" {
			call = f.sdkCall
		}
		for _, c := range cases {
			f.up.set("vendor", answerHead(t, c.pre, c.size, c.step, result))
			got := call(t, path+"-"+strings.ReplaceAll(c.name, " ", "-"), "vendor", `{}`)
			if c.ok && (!strings.Contains(got, "final-answer") || strings.Contains(got, `"isError":true`)) {
				t.Errorf("%s, %s: answer %.300q, want the call's result", path, c.name, got)
			}
			if !c.ok && (!strings.Contains(got, `"isError":true`) || !strings.Contains(got, "may have run")) {
				t.Errorf("%s, %s: answer %.300q, want a failure saying the call may have run", path, c.name, got)
			}
			if got := call(t, path+"-next-"+strings.ReplaceAll(c.name, " ", "-"), "echo", `{"still":"works"}`); !strings.Contains(got, `{\"still\":\"works\"}`) {
				t.Errorf("%s, after %s: the next call: %.300q", path, c.name, got)
			}
			if n := len(f.up.takeCalls()); n != 2 {
				t.Errorf("%s, %s: the upstream got %d tools/call POSTs, want 2 (the call once, and the next)", path, c.name, n)
			}
		}
	}
}

// A tcpRelay forwards connections to an upstream until it is stopped;
// then its port refuses connections.
type tcpRelay struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newTCPRelay(t *testing.T, target string) *tcpRelay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{l: l, target: target}
	r.wg.Go(r.serve)
	t.Cleanup(r.stop)
	return r
}

func (r *tcpRelay) serve() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, u)
		r.mu.Unlock()
		r.wg.Go(func() { _, _ = io.Copy(u, c); _ = u.Close() })
		r.wg.Go(func() { _, _ = io.Copy(c, u); _ = c.Close() })
	}
}

// stop closes the listener and every relayed connection, and waits.
func (r *tcpRelay) stop() {
	_ = r.l.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// TestHTTPUpstreamGoneSaysNothingWasRun: once an HTTP upstream's port
// refuses connections (the process exited: its idle connections were
// closed and no new one is accepted), a call fails as one that never
// reached it, "nothing was run", not "may have run" (an agent told that
// must not send it again, when it safely could), on the raw path and the
// SDK path.
//
// (No goroutine leak check: the upstream's own session outlives the test
// server, since toolgate's DELETE cannot reach it once the relay stopped.)
func TestHTTPUpstreamGoneSaysNothingWasRun(t *testing.T) {
	up, url := newScriptedUpstream(t, true)
	target := strings.TrimPrefix(url, "http://")
	relay := newTCPRelay(t, target)
	f := rawHTTPFixtureOf(t, ServerConfig{URL: "http://" + relay.l.Addr().String()}, nil)
	f.up = up
	h1Of(t, f.g)
	for _, path := range []string{"raw", "sdk"} {
		call := f.call
		if path == "sdk" {
			call = f.sdkCall
		}
		if got := call(t, path+"-up", "echo", `{"up":1}`); !strings.Contains(got, `{\"up\":1}`) {
			t.Fatalf("%s: call while the upstream is up: %.300q", path, got)
		}
	}
	relay.stop()
	for _, path := range []string{"raw", "sdk"} {
		call := f.call
		if path == "sdk" {
			call = f.sdkCall
		}
		got := call(t, path+"-gone", "echo", `{"gone":1}`)
		if !strings.Contains(got, "nothing was run") || strings.Contains(got, "may have run") {
			t.Errorf("%s: answer once the upstream refuses connections %.300q, want a failure saying nothing was run", path, got)
		}
	}
	if n := len(up.takeCalls()); n != 2 {
		t.Errorf("the upstream got %d tools/call POSTs, want 2 (the calls before it went away)", n)
	}
}
