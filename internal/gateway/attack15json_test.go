package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// rawAgentPost sends one POST of a tools/call of up__echo on session sid
// as bytes on a new TCP connection to the gateway at base, in protocol
// proto ("HTTP/1.0" or "HTTP/1.1") with accept as its Accept header, and
// reads the whole answer (the connection closed after it).
func rawAgentPost(t *testing.T, base, sid, version, proto, accept, rid string) (exchange, string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	body := `{"jsonrpc":"2.0","id":"` + rid + `","method":"tools/call","params":{"name":"up__echo","arguments":{"m":"` + rid + `"}}}`
	head := "POST /mcp " + proto + "\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + aliceToken +
		"\r\nMcp-Session-Id: " + sid + "\r\nMcp-Protocol-Version: " + version +
		"\r\nContent-Type: application/json\r\nAccept: " + accept + "\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodPost})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s answer's body: %v", proto, err)
	}
	return exchangeOf(resp), string(b)
}

// TestLeanJSONAnswerToOddAgents: what the lean front answers agents at the
// edges of the transport. An HTTP/1.0 agent gets the JSON answer whole,
// with its Content-Length (no chunked stream it could not read). An agent
// that accepts only text/event-stream gets the SDK's 400 and the call is
// not run: the 2025-06-18 transport requires a client to list both and
// to take either answer, and the SDK refuses it; the front leaves it to
// the SDK. An agent that lists application/json with q=0 is answered as
// one listing it (the SDK reads no parameters either; its JSONResponse
// mode would answer JSON the same). (attack15: no defect.)
func TestLeanJSONAnswerToOddAgents(t *testing.T) {
	f := newRawHTTPFixture(t, true, ServerConfig{}, nil)
	want := func(rid string) string {
		return `{"jsonrpc":"2.0","id":"` + rid + `","result":{"content":[{"type":"text","text":"{\"m\":\"` + rid + `\"}"}]}}`
	}
	for _, c := range []struct {
		name, proto, accept string
	}{
		{"http10", "HTTP/1.0", "application/json, text/event-stream"},
		{"http11", "HTTP/1.1", "application/json, text/event-stream"},
		{"q0", "HTTP/1.1", "application/json;q=0, text/event-stream"},
	} {
		resp, body := rawAgentPost(t, f.base, f.sid, f.ver, c.proto, c.accept, c.name)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
			resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 || body != want(c.name) {
			t.Errorf("%s: %d %v (length %d, %v) %q, want the JSON answer %q whole with its length", c.name, resp.StatusCode,
				resp.Header, resp.ContentLength, resp.TransferEncoding, body, want(c.name))
		}
	}
	if tr := f.trail.take(); len(tr) != 3 {
		t.Errorf("lean trail %v, want the three calls served lean", tr)
	}
	if n := len(f.up.takeCalls()); n != 3 {
		t.Errorf("the upstream got %d calls, want 3", n)
	}
	resp, body := rawAgentPost(t, f.base, f.sid, f.ver, "HTTP/1.1", "text/event-stream", "events-only")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Accept must contain both") {
		t.Errorf("Accept: text/event-stream alone: %d %q, want the SDK's 400", resp.StatusCode, body)
	}
	if n := len(f.up.takeCalls()); n != 0 {
		t.Errorf("the upstream got %d calls for the refused POST, want 0", n)
	}
}
