package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// held is a scripted tool answer that tells arrived when its POST came
// and answers with a JSON result only once release is closed.
type held struct {
	arrived chan struct{}
	release chan struct{}
}

func newHeld() *held { return &held{arrived: make(chan struct{}, 1), release: make(chan struct{})} }

func (h *held) answer(w http.ResponseWriter, _ *http.Request, id json.RawMessage) {
	h.arrived <- struct{}{}
	<-h.release
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[{"type":"text","text":"held answer"}]}}`)
}

// sdkBreakCases are the answers of TestH1MisbehavingAnswers that carry no
// whole result, and those the go-sdk client ends its session on besides:
// a JSON body or an event that is not a JSON-RPC message, an answer to
// another id, a line that is not an event field, a status the SDK takes
// for a broken connection, a content type it cannot read. "chunked and a
// length", "switching protocols", "not HTTP", "reset" and "plain text 200"
// failed only their call before the fix too (controls); every other case
// failed the call beside it and the next call (or, "another id", hung).
func sdkBreakCases() []struct {
	name string
	rst  bool
	raw  func(id string) string
} {
	result := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"whole"}]}}`
	}
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	sse := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
	body := func(ct, b string) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", ct, len(b), b)
	}
	return []struct {
		name string
		rst  bool
		raw  func(id string) string
	}{
		{"chunked and a length", false, func(id string) string {
			r := result(id)
			return fmt.Sprintf("%sContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", head, len(r), r)
		}},
		{"bad chunk size", false, func(id string) string {
			return head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + result(id) + "\r\n0\r\n\r\n"
		}},
		{"body shorter than its length", false, func(id string) string {
			return fmt.Sprintf("%sContent-Length: %d\r\n\r\n%s", head, len(result(id))+50, result(id))
		}},
		{"stream cut in an event", false, func(id string) string {
			return sse + "event: message\ndata: " + result(id)[:20]
		}},
		{"switching protocols", false, func(string) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		}},
		{"not HTTP", false, func(string) string { return "SSH-2.0-OpenSSH_9.6\r\n" }},
		{"reset", true, func(string) string { return "" }},
		{"JSON body not JSON", false, func(id string) string { return body("application/json", result(id)[:30]) }},
		{"JSON body another id", false, func(string) string { return body("application/json", result(`"other"`)) }},
		{"JSON body jsonrpc 1.0", false, func(id string) string {
			return body("application/json", strings.Replace(result(id), `"2.0"`, `"1.0"`, 1))
		}},
		{"event not JSON", false, func(id string) string { return sse + "event: message\ndata: " + result(id)[:30] + "\n\n" }},
		{"event line without a colon", false, func(id string) string { return sse + "garbage\n\ndata: " + result(id) + "\n\n" }},
		{"plain text 200", false, func(string) string { return body("text/plain", "all good") }},
		{"plain text 400", false, func(string) string {
			return "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbad"
		}},
	}
}

// TestSDKPathBrokenAnswerFailsOnlyItsCall: on the SDK path (calls with a
// progress token), an HTTP upstream's broken answer to one call fails that
// call only, as "may have run" (never "nothing was run"), while another
// call in flight on the same go-sdk client session gets its result and the
// very next call works: the go-sdk client ended its session on these
// answers, failing every call on it until toolgate reconnected. Each call
// reaches the upstream once.
func TestSDKPathBrokenAnswerFailsOnlyItsCall(t *testing.T) {
	verifyNoLeaks(t)
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	h1Of(t, f.g)
	for i, c := range sdkBreakCases() {
		f.brokenBeside(t, i, c.name, "broken", answerBytes(t, c.rst, c.raw))
	}
}

// brokenBeside runs case i (name): a tools/call of tool "vendor"
// answered by answer (tagged tag) while a call of "hang" is in flight. The
// call gets its whole result or a failure saying it may have run, the
// call beside it its result, the next call works, and the upstream got
// each call once.
func (f *rawHTTPFixture) brokenBeside(t *testing.T, i int, name, tag string, answer func(http.ResponseWriter, *http.Request, json.RawMessage)) {
	t.Helper()
	h := newHeld()
	f.up.set("hang", h.answer)
	f.up.set("vendor", answer)
	other := make(chan string, 1)
	go func() { other <- f.sdkCall(t, fmt.Sprintf("held-%d", i), "hang", `{}`) }()
	<-h.arrived
	got := f.sdkCall(t, fmt.Sprintf("%s-%d", tag, i), "vendor", `{}`)
	whole := strings.Contains(got, `"text":"whole"`) && !strings.Contains(got, `"isError":true`)
	if strings.Contains(got, "nothing was run") || (!whole && !strings.Contains(got, "may have run")) {
		t.Errorf("%s: the %s call's answer %q, want a failure saying it may have run (or the whole result)", name, tag, got)
	}
	close(h.release)
	if a := <-other; !strings.Contains(a, "held answer") || strings.Contains(a, `"isError":true`) {
		t.Errorf("%s: the call in flight beside it got %q, want its result", name, a)
	}
	if a := f.sdkCall(t, fmt.Sprintf("next-%d", i), "echo", `{"n":1}`); !strings.Contains(a, `{\"n\":1}`) {
		t.Errorf("%s: the next call got %q, want its result", name, a)
	}
	calls := map[string]int{}
	for _, sc := range f.up.takeCalls() {
		calls[sc.tool]++
	}
	if calls["vendor"] != 1 || calls["hang"] != 1 || calls["echo"] != 1 {
		t.Errorf("%s: the upstream got %v tools/call POSTs, want each call once", name, calls)
	}
	if t.Failed() {
		f.untilWorks(t, f.sdkCall, fmt.Sprintf("recover-%d", i))
	}
}
