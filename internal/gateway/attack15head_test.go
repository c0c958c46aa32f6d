package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// errDialed is the dial error of transportAccepts' Transport: reaching
// the dial means the Transport took the request's headers.
var errDialed = errors.New("dialed")

// transportAccepts reports whether net/http's Transport (the SDK path's,
// and every request h1Transport does not take lean) would send req: it
// refuses header names that are not tokens and values with control
// characters before it dials.
func transportAccepts(t *testing.T, req *http.Request) bool {
	t.Helper()
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return nil, errDialed }}
	defer tr.CloseIdleConnections()
	r := req.Clone(context.Background())
	r.Body = http.NoBody
	r.ContentLength = 0
	resp, err := tr.RoundTrip(r)
	if err == nil {
		_ = resp.Body.Close()
	}
	return errors.Is(err, errDialed)
}

// checkLeanIsTransport is the property of the lean exchange: a request
// h1Transport takes lean is one net/http's Transport would send, and
// writeH1Request writes it byte for byte as Request.Write does.
func checkLeanIsTransport(t *testing.T, endpoint, key, value, body string) {
	t.Helper()
	if body == "" {
		body = "x"
	}
	h1 := newH1Transport(http.DefaultTransport, nil, endpoint, 2)
	mk := func() *http.Request {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			return nil
		}
		req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
		if key != "" {
			req.Header[key] = []string{value}
		}
		return req
	}
	req := mk()
	if req == nil || !h1.lean(req) {
		return
	}
	if !transportAccepts(t, req) {
		t.Fatalf("endpoint %q, header %q: %q: lean, but net/http's Transport refuses it", endpoint, key, value)
	}
	var want bytes.Buffer
	if err := mk().Write(&want); err != nil {
		t.Fatalf("endpoint %q, header %q: %q: lean, but Request.Write fails: %v", endpoint, key, value, err)
	}
	var got bytes.Buffer
	w := bufio.NewWriter(&got)
	if err := writeH1Request(w, req, req.Body); err != nil {
		t.Fatalf("writeH1Request: %v", err)
	}
	_ = w.Flush()
	if got.String() != want.String() {
		t.Fatalf("endpoint %q, header %q: %q: writeH1Request wrote\n%q\nRequest.Write writes\n%q", endpoint, key, value, got.String(), want.String())
	}
}

// leanHeadSeeds are requests the lean exchange must not write otherwise
// than net/http: header values with NUL, CR, LF or DEL (a configured
// servers.<name>.headers value from an environment variable or a secret
// with a line break), names that are not tokens (the config allows
// "X(y)"), names with a line break (header injection), IPv6 literals,
// userinfo, queries and escapes in the endpoint.
var leanHeadSeeds = []struct{ endpoint, key, value string }{
	{"http://127.0.0.1:8080/mcp", "Authorization", "Bearer tok"},
	{"http://127.0.0.1:8080/mcp", "Authorization", "Bearer tok\x00"},
	{"http://127.0.0.1:8080/mcp", "Authorization", "Bearer a\x00b"},
	{"http://127.0.0.1:8080/mcp", "Authorization", "Bearer tok\n"},
	{"http://127.0.0.1:8080/mcp", "Authorization", "Bearer tok\r\n"},
	{"http://127.0.0.1:8080/mcp", "X-Key", "a\r\nX-Admin: 1"},
	{"http://127.0.0.1:8080/mcp", "X-Key", "a\x7fb"},
	{"http://127.0.0.1:8080/mcp", "X-Key", "a\x1bb"},
	{"http://127.0.0.1:8080/mcp", "X-Key", "tab\tinside"},
	{"http://127.0.0.1:8080/mcp", "X-Key", "obs-text \xff\xfe"},
	{"http://127.0.0.1:8080/mcp", "X(y)", "v"},
	{"http://127.0.0.1:8080/mcp", "X-A\r\nX-Admin", "1"},
	{"http://127.0.0.1:8080/mcp", "X-A: b\r\nX-C", "1"},
	{"http://127.0.0.1:8080/mcp", "X Y", "v"},
	{"http://127.0.0.1:8080/mcp", "X-Ünï", "v"},
	{"http://[::1]:8080/mcp", "X-Key", "v"},
	{"http://[fe80::1%25eth0]:8080/mcp", "X-Key", "v"},
	{"http://user:pw@127.0.0.1:8080/mcp", "X-Key", "v"},
	{"http://127.0.0.1:8080/a%20b/c?x=1&y=%2F#frag", "X-Key", "v"},
	{"http://127.0.0.1:8080", "X-Key", "v"},
	{"http://127.0.0.1:8080?q", "X-Key", "v"},
	{"http://127.0.0.1:/mcp", "X-Key", "v"},
	{"http://EXAMPLE.test/mcp", "X-Key", "v"},
	{"http://xn--nxasmq6b.test/mcp", "X-Key", "v"},
	{"http://127.0.0.1:8080/%zz", "X-Key", "v"},
	{"http://a<b>:8080/mcp", "X-Key", "v"},
	{"http://a\"b/mcp", "X-Key", "v"},
	{"http://a{b}/mcp", "X-Key", "v"},
	{"http://a%41b/mcp", "X-Key", "v"},
	{"http://127.0.0.1:8080/mcp", "User-Agent", "ua\x00"},
	{"http://127.0.0.1:8080/mcp", "Content-Type", "application/json\r\nX: 1"},
	{"http://127.0.0.1:8080/mcp", "Transfer-Encoding", "chunked"},
	{"http://127.0.0.1:8080/mcp", "Host", "evil.test"},
}

// TestLeanHeadIsTransports: no request the lean exchange takes is one
// net/http's Transport refuses or writes otherwise. On 7e8d83f a header
// value with a NUL, DEL or escape went lean (the upstream got the byte
// raw; the SDK path's Transport refuses the request), and so did a name
// that is not a token (Request.Write drops it, the Transport refuses it),
// including one with CR LF in it: header injection.
func TestLeanHeadIsTransports(t *testing.T) {
	for _, s := range leanHeadSeeds {
		t.Run("", func(t *testing.T) { checkLeanIsTransport(t, s.endpoint, s.key, s.value, "") })
	}
}

func FuzzLeanHeadIsTransports(f *testing.F) {
	for _, s := range leanHeadSeeds {
		f.Add(s.endpoint, s.key, s.value, `{"jsonrpc":"2.0"}`)
	}
	f.Fuzz(func(t *testing.T, endpoint, key, value, body string) {
		checkLeanIsTransport(t, endpoint, key, value, body)
	})
}

// BenchmarkH1HeaderSendable: the lean check's cost per request for the
// headers of a raw POST with one configured header.
func BenchmarkH1HeaderSendable(b *testing.B) {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {"4FQGJ3OZ2D7VQ2YHLQ2TWSZ5CN"}, "Mcp-Protocol-Version": {"2025-06-18"},
		"Authorization": {"Bearer 0123456789abcdef0123456789abcdef"}}
	for b.Loop() {
		if !h1HeaderSendable(h) {
			b.Fatal("not sendable")
		}
	}
}
