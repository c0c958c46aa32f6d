package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// review16Cases are answers a second reader of sdkbreak tried: valid
// answers in forms the go-sdk reads (want the whole result) and a content
// type whose parameters mime.ParseMediaType rejects, which the go-sdk
// reads as no content type at all, and keys in another case than the
// go-sdk's case-sensitive decoder reads (it ends its session on each of
// these "(bad)" answers); and a response with a null id on the stream
// before the answer (the go-sdk ends its session on that event too).
func review16Cases() []struct {
	name string
	raw  func(id string) string
} {
	result := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"whole"}]}}`
	}
	body := func(ct, b string) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", ct, len(b), b)
	}
	sse := func(ct string) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: " + ct + "\r\nConnection: close\r\n\r\n"
	}
	float := func(id string) string {
		if id != "" && id[0] >= '0' && id[0] <= '9' {
			return id + ".0"
		}
		return id
	}
	return []struct {
		name string
		raw  func(id string) string
	}{
		{"JSON answer id as a float", func(id string) string { return body("application/json", result(float(id))) }},
		{"JSON media type in upper case", func(id string) string { return body("Application/JSON; charset=UTF-8", result(id)) }},
		{"event answer id as a float", func(id string) string {
			return sse("text/event-stream") + "event: message\ndata: " + result(float(id)) + "\n\n"
		}},
		{"events before the answer, CRLF, data split", func(id string) string {
			r := result(id)
			return sse("text/event-stream") +
				": comment\r\n\r\n" +
				"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\r\n\r\n" +
				"data:{\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\r\n\r\n" +
				"id: 7\r\ndata: " + r[:25] + "\r\ndata: " + r[25:] + "\r\n\r\n"
		}},
		{"JSON answer with keys ID and JSONRPC (bad)", func(id string) string {
			return body("application/json", `{"JSONRPC":"2.0","ID":`+id+`,"result":{"content":[{"type":"text","text":"whole"}]}}`)
		}},
		{"event answer with key ID (bad)", func(id string) string {
			return sse("text/event-stream") + "data: " + `{"jsonrpc":"2.0","ID":` + id + `,"result":{"content":[{"type":"text","text":"whole"}]}}` + "\n\n"
		}},
		{"JSON error answer with a code in a string (bad)", func(id string) string {
			return body("application/json", `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":"5","message":"m"}}`)
		}},
		{"JSON error answer with keys Code and code", func(id string) string {
			return body("application/json", `{"jsonrpc":"2.0","id":`+id+`,"error":{"Code":"x","code":1,"message":"upstream's own error"}}`)
		}},
		{"event with a null id before the answer", func(id string) string {
			return sse("text/event-stream") + "data: " + `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}` + "\n\n" +
				"data: " + result(id) + "\n\n"
		}},
		{"stream with an event id ends before the answer (bad)", func(string) string {
			return sse("text/event-stream") + "id: 1\ndata: " + `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\n\n"
		}},
		{"202 with a JSON media type and no body (bad)", func(string) string {
			return "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
		}},
		{"201 event stream cut in an event (bad)", func(id string) string {
			return "HTTP/1.1 201 Created\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: " + result(id)[:20]
		}},
		{"JSON media type with a bad parameter (bad)", func(id string) string { return body("application/json; charset", result(id)) }},
		{"event stream media type with a bad parameter (bad)", func(id string) string {
			return sse("text/event-stream; a=1; a=2") + "event: message\ndata: " + result(id) + "\n\n"
		}},
	}
}

// TestReview16AnswersOnSDKPath: each answer above fails at most its own
// call (as "may have run") and a valid one gives the whole result, while
// a call in flight beside it and the next call work.
func TestReview16AnswersOnSDKPath(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	h1Of(t, f.g)
	for i, c := range review16Cases() {
		h := newHeld()
		f.up.set("hang", h.answer)
		f.up.set("vendor", answerBytes(t, false, c.raw))
		other := make(chan string, 1)
		go func() { other <- f.sdkCall(t, fmt.Sprintf("held-%d", i), "hang", `{}`) }()
		<-h.arrived
		got := f.sdkCall(t, fmt.Sprintf("broken-%d", i), "vendor", `{}`)
		whole := strings.Contains(got, `"text":"whole"`) && !strings.Contains(got, `"isError":true`)
		valid := !strings.HasSuffix(c.name, "(bad)")
		own := strings.Contains(c.name, "Code and code")
		if own && !strings.Contains(got, "upstream's own error") {
			t.Errorf("%s: got %q, want the upstream's own error", c.name, got)
		}
		if valid && !own && !whole {
			t.Errorf("%s: got %q, want the whole result", c.name, got)
		}
		if !valid && !strings.Contains(got, "may have run") {
			t.Errorf("%s: got %q, want a failure saying it may have run", c.name, got)
		}
		close(h.release)
		if a := <-other; !strings.Contains(a, "held answer") || strings.Contains(a, `"isError":true`) {
			t.Errorf("%s: the call in flight beside it got %q, want its result", c.name, a)
		}
		if a := f.sdkCall(t, fmt.Sprintf("next-%d", i), "echo", `{"n":1}`); !strings.Contains(a, `{\"n\":1}`) {
			t.Errorf("%s: the next call got %q, want its result", c.name, a)
		}
		f.up.takeCalls()
		if t.Failed() {
			f.untilWorks(t, f.sdkCall, fmt.Sprintf("recover-%d", i))
		}
	}
}

// TestReview16UpstreamErrorWithRejectedCode: an upstream's own JSON-RPC
// error answer to a call, with code -32005 (in the range JSON-RPC leaves
// to servers, and the go-sdk's code for "rejected by transport"), comes
// after the upstream had the call: the agent must never read "nothing was
// run" for it, on the SDK path or the lean path.
func TestReview16UpstreamErrorWithRejectedCode(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	h1Of(t, f.g)
	f.up.set("vendor", answerBytes(t, false, func(id string) string {
		b := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32005,"message":"quota exceeded after the write"}}`
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
	}))
	for name, call := range map[string]func(*testing.T, string, string, string) string{"sdk": f.sdkCall, "lean": f.call} {
		got := call(t, "rej-"+name, "vendor", `{}`)
		if strings.Contains(got, "nothing was run") {
			t.Errorf("%s path: got %q, which says nothing was run for a call the upstream answered", name, got)
		}
		f.up.takeCalls()
	}
}
