package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tests of the lean front's application/json answers (issue 13): an
// answer that is all a response carries goes as one JSON body; anything
// written before it makes the response an event stream, as before.

// leanCall is a lean tools/call body for tool with args under id.
func leanCall(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// wantJSONAnswer checks that a response is one JSON-RPC message to id, as
// application/json with its Content-Length, and returns it.
func wantJSONAnswer(t *testing.T, what string, resp exchange, body []byte, id string) []byte {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
		resp.Header.Get("Cache-Control") != "no-cache, no-transform" ||
		len(resp.TransferEncoding) != 0 || resp.ContentLength != int64(len(body)) {
		t.Fatalf("%s: %d %v (transfer encoding %v, length %d), want 200 application/json with its Content-Length\n%s",
			what, resp.StatusCode, resp.Header, resp.TransferEncoding, resp.ContentLength, body)
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.JSONRPC != "2.0" || string(m.ID) != strconv.Quote(id) {
		t.Fatalf("%s: body %q (%v), want one JSON-RPC response to %q", what, body, err, id)
	}
	return body
}

// sseMessages is the data of each "message" event of an event stream, and
// the number of heartbeat comments before the first of them.
func sseMessages(t *testing.T, body []byte) (msgs []string, beatsBefore int) {
	t.Helper()
	for ev := range strings.SplitSeq(string(body), "\n\n") {
		switch {
		case ev == "":
		case ev == strings.TrimSpace(heartbeatComment):
			if len(msgs) == 0 {
				beatsBefore++
			}
		default:
			data, ok := strings.CutPrefix(ev, "event: message\ndata: ")
			if !ok || strings.Contains(data, "\n") {
				t.Fatalf("event %q is not one message event", ev)
			}
			msgs = append(msgs, data)
		}
	}
	return msgs, beatsBefore
}

// TestLeanAnswersAsJSONWithTheSDKPathsBytes: an allowed call, a denied
// one and one the upstream fails are each answered by the lean front as
// application/json with its Content-Length (nothing went before the
// answer), and the body is, byte for byte, the message the SDK path
// (DisableLeanCalls) sends as its event stream's one event.
func TestLeanAnswersAsJSONWithTheSDKPathsBytes(t *testing.T) {
	lean := newLeanFixture(t, nil)
	sdk := newLeanFixture(t, &HTTPOptions{DisableLeanCalls: true})
	lcs := connectHTTP(t, lean.base, aliceToken, nil, nil)
	waitInitialized(t, lean.g, lcs.ID())
	lean.trail.take()
	lsid, lver := lcs.ID(), lcs.InitializeResult().ProtocolVersion
	scs := connectHTTP(t, sdk.base, aliceToken, nil, nil)
	ssid, sver := scs.ID(), scs.InitializeResult().ProtocolVersion
	for _, c := range []struct{ name, id, tool, args string }{
		{"allowed", "a-1", "up__echo", `{"x":"y","n":[1,2.5e3]}`},
		{"numbers", "a-2", "up__numbers", `{}`},
		{"denied", "d-1", "up__die", `{}`},
		{"tool error", "e-1", "up__fifo", `{"path":"/nonexistent/toolgate-leanjson"}`},
	} {
		resp, body := sessionExchange(t, http.MethodPost, lean.base, aliceToken, lsid, lver, strings.NewReader(leanCall(c.id, c.tool, c.args)))
		got := wantJSONAnswer(t, c.name, resp, body, c.id)
		if tr := lean.trail.take(); len(tr) != 1 || !tr[0] {
			t.Fatalf("%s: lean trail %v, want it served by the lean front", c.name, tr)
		}
		sresp, sbody := sessionExchange(t, http.MethodPost, sdk.base, aliceToken, ssid, sver, strings.NewReader(leanCall(c.id, c.tool, c.args)))
		if sresp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s on the SDK path: %v", c.name, sresp.Header)
		}
		msgs, _ := sseMessages(t, sbody)
		if len(msgs) != 1 {
			t.Fatalf("%s on the SDK path: %d messages, want 1: %q", c.name, len(msgs), sbody)
		}
		if string(got) != msgs[0] {
			t.Errorf("%s:\n lean %s\n  SDK %s", c.name, got, msgs[0])
		}
	}
	if n := lean.h.count("echo"); n != 1 {
		t.Errorf("the allowed call ran %d times, want 1", n)
	}
}

// TestLeanGoClientGetsJSONAnswers: a go-sdk client's allowed and denied
// calls get their answers as application/json and read them as before.
func TestLeanGoClientGetsJSONAnswers(t *testing.T) {
	f := newLeanFixture(t, nil)
	var mu sync.Mutex
	var types []string
	cs := connectHTTP(t, f.base, aliceToken, nil, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			var call bool
			if r.Method == http.MethodPost && r.Body != nil {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					return nil, err
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
				call = bytes.Contains(b, []byte(`"tools/call"`))
			}
			resp, err := next.RoundTrip(r)
			if err == nil && call {
				mu.Lock()
				types = append(types, resp.Header.Get("Content-Type"))
				mu.Unlock()
			}
			return resp, err
		})
	})
	waitInitialized(t, f.g, cs.ID())
	f.trail.take()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__echo", Arguments: map[string]any{"go": 1}})
	if err != nil || res.IsError || textOf(t, res) != `{"go":1}` {
		t.Fatalf("allowed call: %v %+v", err, res)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "up__die", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "denied") {
		t.Fatalf("denied call: %v %+v", err, res)
	}
	if tr := f.trail.take(); len(tr) != 2 || !tr[0] || !tr[1] {
		t.Fatalf("lean trail %v, want both served by the lean front", tr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(types) != 2 || types[0] != "application/json" || types[1] != "application/json" {
		t.Errorf("tools/call answers' Content-Type %q, want application/json twice", types)
	}
}

// TestLeanLogBeforeResultStreams: an upstream that sends a log message
// before its result: the lean call's answer is an event stream with the
// log message, then the result, as before.
func TestLeanLogBeforeResultStreams(t *testing.T) {
	f := newRawHTTPFixture(t, false, ServerConfig{}, nil)
	if resp, b := sessionExchange(t, http.MethodPost, f.base, aliceToken, f.sid, f.ver,
		strings.NewReader(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"info"}}`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("logging/setLevel: %d %s", resp.StatusCode, b)
	}
	f.trail.take()
	logMsg := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"before the result"}}`
	result := `{"jsonrpc":"2.0","id":$ID,"result":{"content":[{"type":"text","text":"after the log"}]}}`
	f.up.set("plain", answerSSE(logMsg, result))
	resp, body := sessionExchange(t, http.MethodPost, f.base, aliceToken, f.sid, f.ver, strings.NewReader(leanCall("l-1", "up__plain", `{}`)))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("call with a log message: %d %v, want an event stream\n%s", resp.StatusCode, resp.Header, body)
	}
	msgs, _ := sseMessages(t, body)
	// The log message is re-encoded (its params' members in the SDK's
	// order); the result passes through as it came.
	want := []string{`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"before the result","level":"info"}}`, strings.ReplaceAll(result, "$ID", `"l-1"`)}
	if len(msgs) != 2 || msgs[0] != want[0] || msgs[1] != want[1] {
		t.Errorf("events %q, want %q", msgs, want)
	}
	if tr := f.trail.take(); len(tr) != 1 || !tr[0] {
		t.Errorf("lean trail %v, want the call served by the lean front", tr)
	}
	// Without the log message, the same call is answered as JSON.
	f.up.set("plain", answerSSE(result))
	resp, body = sessionExchange(t, http.MethodPost, f.base, aliceToken, f.sid, f.ver, strings.NewReader(leanCall("l-2", "up__plain", `{}`)))
	if got := wantJSONAnswer(t, "call without a log message", resp, body, "l-2"); string(got) != strings.ReplaceAll(result, "$ID", `"l-2"`) {
		t.Errorf("answer %s", got)
	}
}

// TestLeanSlowCallStreamsItsHeartbeat: a call still running when the
// first heartbeat is due is answered on an event stream (the heartbeat
// went first), its result the stream's last event.
func TestLeanSlowCallStreamsItsHeartbeat(t *testing.T) {
	f := newLeanFixture(t, &HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour})
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	f.trail.take()
	resp := sessionRequest(t, http.MethodPost, f.base, aliceToken, sid, version, strings.NewReader(leanCall("s-1", "up__progress", `{}`)))
	defer func() { _ = resp.Body.Close() }()
	// The headers come with the heartbeat, while the tool still waits.
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("slow call: %d %v, want an event stream", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	beat := make([]byte, len(heartbeatComment))
	if _, err := io.ReadFull(br, beat); err != nil || string(beat) != heartbeatComment {
		t.Fatalf("stream begins %q (%v), want the heartbeat", beat, err)
	}
	close(f.h.release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := sseMessages(t, rest)
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], `{"jsonrpc":"2.0","id":"s-1","result":`) || !strings.Contains(msgs[0], `"text":"token \u003cnil\u003e"`) {
		t.Errorf("events after the heartbeat %q, want the result", msgs)
	}
}

// TestLeanHeldCallAnswers: a held call approved before its first
// heartbeat was due wrote nothing before its answer, which goes as JSON;
// one held past it streams its heartbeats, then the answer, as before.
func TestLeanHeldCallAnswers(t *testing.T) {
	t.Run("quick", func(t *testing.T) {
		f := newLeanFixture(t, &HTTPOptions{HeartbeatFirst: time.Hour})
		cs := connectHTTP(t, f.base, aliceToken, nil, nil)
		waitInitialized(t, f.g, cs.ID())
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.base+"/mcp", strings.NewReader(leanCall("h-1", "up__big", `{"n":3}`)))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Authorization": "Bearer " + aliceToken, "Mcp-Session-Id": cs.ID(),
			"Mcp-Protocol-Version": cs.InitializeResult().ProtocolVersion, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
			req.Header.Set(k, v)
		}
		ex, body := f.doApproving(t, http.DefaultClient, req)
		if got := wantJSONAnswer(t, "held then approved", ex, body, "h-1"); !strings.Contains(string(got), `"text":"abc"`) {
			t.Errorf("answer %s, want the upstream's result", got)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		f := newLeanFixture(t, &HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour})
		cs := connectHTTP(t, f.base, aliceToken, nil, nil)
		waitInitialized(t, f.g, cs.ID())
		lines := heldPOST(t, f.base, cs.ID(), cs.InitializeResult().ProtocolVersion) // checks the event stream's headers
		if l := <-lines; l != strings.TrimSpace(heartbeatComment) {
			t.Fatalf("first line %q, want the heartbeat", l)
		}
		f.approveNext(t)
		data, _ := answerOf(t, lines)
		if !strings.HasPrefix(data, `{"jsonrpc":"2.0","id":"h-1","result":`) || !strings.Contains(data, `"text":"ab"`) {
			t.Errorf("answer %s", data)
		}
	})
}

// TestHeartbeatWriterDecidesAtTheFirstWrite: an undecided response is an
// event stream once anything but the answer (a heartbeat, a message, a
// flush, a status) went first, and then takes the answer as its last
// event; the answer alone is a JSON body, after which no heartbeat is
// written.
func TestHeartbeatWriterDecidesAtTheFirstWrite(t *testing.T) {
	ev := []byte(sseMessagePrefix + `{"jsonrpc":"2.0","id":1,"result":{}}` + sseMessageSuffix)
	for _, c := range []struct {
		name   string
		before func(h *heartbeatWriter)
		json   bool
	}{
		{"nothing", func(*heartbeatWriter) {}, true},
		{"message", func(h *heartbeatWriter) { writeSSE(h, []byte(`{"jsonrpc":"2.0","method":"notifications/message"}`)) }, false},
		{"flush", func(h *heartbeatWriter) { h.Flush() }, false},
		{"status", func(h *heartbeatWriter) { h.WriteHeader(http.StatusOK) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h := newHeartbeatWriter(rec, time.Hour, time.Hour)
			h.deferStream()
			c.before(h)
			writeLastEvent(h, ev)
			body := rec.Body.String()
			if c.json {
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" || body != string(ev[len(sseMessagePrefix):len(ev)-2]) ||
					rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
					t.Errorf("answer alone: %v %q, want the JSON body", rec.Header(), body)
				}
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" || !strings.HasSuffix(body, string(ev)) ||
				rec.Header().Get("Content-Length") != "" {
				t.Errorf("answer after %s: %v %q, want it the stream's last event", c.name, rec.Header(), body)
			}
		})
	}
	t.Run("heartbeat", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h := newHeartbeatWriter(rec, time.Second, time.Hour)
			h.deferStream()
			h.arm()
			time.Sleep(time.Second)
			synctest.Wait()
			writeLastEvent(h, ev)
			h.stop()
			if got, want := rec.Body.String(), heartbeatComment+string(ev); rec.Header().Get("Content-Type") != "text/event-stream" || got != want {
				t.Errorf("%v %q, want the heartbeat then the event %q", rec.Header(), got, want)
			}
		})
	})
	t.Run("no heartbeat after the JSON answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h := newHeartbeatWriter(rec, time.Second, time.Second)
			h.deferStream()
			h.arm()
			writeLastEvent(h, ev)
			time.Sleep(time.Minute)
			synctest.Wait()
			if got, want := rec.Body.String(), string(ev[len(sseMessagePrefix):len(ev)-2]); got != want {
				t.Errorf("body %q, want the JSON answer alone %q", got, want)
			}
		})
	})
}

// asJSONAnswer is the SDK path's answer (the headers modernPost keeps, and
// the body) as the lean front writes the same JSON-RPC response when it is
// all the response carries: an event stream of one message event becomes
// that message alone, as application/json with its Content-Length and no
// Connection or Transfer-Encoding header. Any other answer is returned as
// it came.
func asJSONAnswer(t *testing.T, h http.Header, b []byte) (http.Header, []byte) {
	t.Helper()
	if h.Get("Content-Type") != "text/event-stream" {
		return h, b
	}
	msgs, beats := sseMessages(t, b)
	if len(msgs) != 1 || beats != 0 {
		return h, b
	}
	h = h.Clone()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(msgs[0])))
	h.Del("Connection")
	h.Del("Transfer-Encoding")
	return h, []byte(msgs[0])
}
