package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// attack17SDKCases are upstream answers to a call on the SDK path that
// toolgate's answer checks (sdkbreak.go, ssetee.go) passed on to the
// go-sdk v1.8.0 client as they were, and on which that client ended its
// whole session: an event on the call's stream that is a response whose
// id is neither a string nor a number the SDK's decoder takes (true, an
// object, an array, a number past float64), before the call's answer.
// The five "id" cases failed the call beside it and the next call before
// the fix; the others (empty 2xx answers, an answer twice, a media type
// with parameters, an event named "Message", a stream of only retry and
// id fields) failed only their call (or gave its result) before too:
// controls.
func attack17SDKCases() []struct {
	name string
	raw  func(id string) string
} {
	result := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"whole"}]}}`
	}
	sse := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
	stray := func(badID string) func(id string) string {
		return func(id string) string {
			return sse + "event: message\ndata: " + `{"jsonrpc":"2.0","id":` + badID + `,"result":{}}` + "\n\n" +
				"event: message\ndata: " + result(id) + "\n\n"
		}
	}
	return []struct {
		name string
		raw  func(id string) string
	}{
		{"event id true", stray("true")},
		{"event id object", stray(`{"a":1}`)},
		{"event id array", stray(`[1]`)},
		{"event id 1e400", stray(`1e400`)},
		{"202 empty JSON", func(string) string {
			return "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
		}},
		{"204 JSON", func(string) string {
			return "HTTP/1.1 204 No Content\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
		}},
		{"204 event stream", func(string) string {
			return "HTTP/1.1 204 No Content\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
		}},
		{"JSON answer twice", func(id string) string {
			b := result(id) + result(id)
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}},
		{"JSON type with parameters", func(id string) string {
			b := result(id)
			return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: Application/JSON ; charset=\"UTF-8\"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}},
		{"event name in capitals", func(id string) string { return sse + "event: Message\ndata: " + result(id) + "\n\n" }},
		{"event retry and id then cut", func(id string) string { return sse + "retry: 1\nid: 5\n\n" }},
		{"error event id false", func(id string) string {
			return sse + "event: message\ndata: " + `{"jsonrpc":"2.0","id":false,"error":{"code":1,"message":"x"}}` + "\n\n" +
				"event: message\ndata: " + result(id) + "\n\n"
		}},
	}
}

// TestSDKPathStrayResponseIDKeepsTheSession: on the SDK path, an event on
// a call's stream that answers an id the go-sdk cannot decode fails at
// most that call (it gets its whole result, or a failure saying it may
// have run), while the call in flight beside it on the same go-sdk
// session gets its result and the next call works. Before the fix the
// event went to the go-sdk as it came; it ended its session on it, and
// both other calls failed.
func TestSDKPathStrayResponseIDKeepsTheSession(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	h1Of(t, f.g)
	for i, c := range attack17SDKCases() {
		f.brokenBeside(t, i, c.name, "stray", answerBytes(t, false, c.raw))
	}
}

// TestSSETeeWithoutSlotPassesOnlyDecodableResponses: on an event stream
// without a call's slot (the standalone GET stream, or the POST of a
// request toolgate does not capture), the tee passed a response on
// without decoding it; one whose id the go-sdk cannot decode, or with no
// id, ended the go-sdk's session. Every event the tee hands on must be
// one jsonrpc.DecodeMessage (the go-sdk's own decoder) takes, and the
// valid response after them still goes through.
func TestSSETeeWithoutSlotPassesOnlyDecodableResponses(t *testing.T) {
	var stream strings.Builder
	for _, id := range []string{`true`, `{"a":1}`, `[1]`, `1e400`, `null`} {
		stream.WriteString("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + id + ",\"result\":{}}\n\n")
	}
	stream.WriteString("data: {\"jsonrpc\":\"2.0\",\"result\":{}}\n\n")
	stream.WriteString("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"ok\":1}}\n\n")
	tee := (&sseTee{ReadCloser: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream.String()))),
		max: 1 << 20, log: slog.New(slog.DiscardHandler)}).useBufs()
	out, err := io.ReadAll(tee)
	if err != nil {
		t.Fatal(err)
	}
	seven, _ := jsonrpc.MakeID(float64(7))
	var answered bool
	for _, line := range strings.Split(string(out), "\n") {
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		m, err := jsonrpc.DecodeMessage([]byte(strings.TrimSpace(data)))
		if err != nil {
			t.Errorf("the tee passed on %q, which the go-sdk cannot decode (%v): it ends its session on it", data, err)
			continue
		}
		if r, ok := m.(*jsonrpc.Response); ok && r.ID == seven {
			answered = true
		}
	}
	if !answered {
		t.Errorf("the valid response after them is gone: the tee gave %q", out)
	}
}

// TestSDKPathAnswerForAnotherSessionKeepsTheSession: an upstream that
// answers a call on the SDK path with another Mcp-Session-Id than the
// session's (a load balancer mixing up backends, or a restarted server)
// fails that call only, as "may have run", while the call beside it gets
// its result and the next call works. The go-sdk client took it for a
// write error ("mismatching session IDs") and its connection refused
// every later call.
func TestSDKPathAnswerForAnotherSessionKeepsTheSession(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	for i, ct := range []string{"application/json", "text/event-stream"} {
		before, err := f.g.ups["up"].session()
		if err != nil {
			t.Fatal(err)
		}
		h := newHeld()
		f.up.set("hang", h.answer)
		f.up.set("vendor", func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
			if r.Header.Get("Mcp-Session-Id") == "" {
				t.Error("the call came without a session id: the upstream is not stateful")
			}
			w.Header().Set("Mcp-Session-Id", "another-session")
			w.Header().Set("Content-Type", ct)
			msg := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":"whole"}]}}`
			if ct == "text/event-stream" {
				msg = "event: message\ndata: " + msg + "\n\n"
			}
			_, _ = io.WriteString(w, msg)
		})
		other := make(chan string, 1)
		go func() { other <- f.sdkCall(t, fmt.Sprintf("held-%d", i), "hang", `{}`) }()
		<-h.arrived
		got := f.sdkCall(t, fmt.Sprintf("mixed-%d", i), "vendor", `{}`)
		if strings.Contains(got, "nothing was run") || !strings.Contains(got, "may have run") {
			t.Errorf("%s: the call's answer %q, want a failure saying it may have run", ct, got)
		}
		close(h.release)
		if a := <-other; !strings.Contains(a, "held answer") || strings.Contains(a, `"isError":true`) {
			t.Errorf("%s: the call in flight beside it got %q, want its result", ct, a)
		}
		if a := f.sdkCall(t, fmt.Sprintf("next-%d", i), "echo", `{"n":1}`); !strings.Contains(a, `{\"n\":1}`) {
			t.Errorf("%s: the next call got %q, want its result", ct, a)
		}
		if after, err := f.g.ups["up"].session(); err != nil || after != before {
			t.Errorf("%s: the upstream session was replaced (%v): the go-sdk ended it", ct, err)
		}
		calls := map[string]int{}
		for _, sc := range f.up.takeCalls() {
			calls[sc.tool]++
		}
		if calls["vendor"] != 1 || calls["hang"] != 1 || calls["echo"] != 1 {
			t.Errorf("%s: the upstream got %v tools/call POSTs, want each call once", ct, calls)
		}
		if t.Failed() {
			f.untilWorks(t, f.sdkCall, fmt.Sprintf("recover-%d", i))
		}
	}
}
