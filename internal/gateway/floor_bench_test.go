package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkBareHTTPRoundTrip is the floor of one of toolgate's two HTTP
// legs (docs/performance.md, "hotpath5"): a bare net/http client POSTs a
// tools/call of the perf harness's size to a bare net/http server, which
// answers with one flushed event (as the go-sdk server does) and ends the
// stream; the client reads the body to its end. No MCP, no gate.
func BenchmarkBareHTTPRoundTrip(b *testing.B) {
	x := strings.Repeat("x", 100)
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + x + `"}}}`)
	ev := []byte("event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Echo: " + x + "\"}]}}\n\n")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(ev)
		w.(http.Flusher).Flush()
	}))
	b.Cleanup(ts.Close)
	c := ts.Client()
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, ts.URL+"/mcp", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}
