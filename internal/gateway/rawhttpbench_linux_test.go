//go:build linux

package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkRawCallHTTP is one raw tools/call at a time on a shared
// Streamable HTTP upstream session, without the HTTP front: toolgate's
// upstream leg alone (the POST built and written, the answer's head and
// event stream read, the connection pooled). The upstream is the SDK's
// server for everything but the raw calls, which a handler answers with a
// fixed event stream as the SDK's server does (its headers, one event,
// the stream's end), so that the upstream's own work per call is small
// and the same for any build of toolgate. Besides ns/op it reports the
// process's CPU per call (user+sys from getrusage), which a busy machine
// disturbs less than the wall time.
func BenchmarkRawCallHTTP(b *testing.B) {
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newUpstreamServer(nil) }, nil)
	text := strings.Repeat("x", 100)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") == "" {
			sdk.ServeHTTP(w, r)
			return
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body.Bytes(), &m) != nil || m.Method != "tools/call" || !bytes.HasPrefix(m.ID, []byte(`"`+rawHTTPIDPrefix)) {
			r.Body = nopReadCloser{bytes.NewReader(body.Bytes())}
			sdk.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("Connection", "keep-alive")
		h.Set("Content-Type", "text/event-stream")
		h.Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
		_, _ = w.Write([]byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":` + string(m.ID) +
			`,"result":{"content":[{"type":"text","text":"` + text + `"}]}}` + "\n\n"))
		w.(http.Flusher).Flush()
	}))
	b.Cleanup(up.Close)
	g, err := New(b.Context(), []ServerConfig{{Name: "up", URL: up.URL}}, allowAll(), &Options{Logger: (&logBuffer{}).logger(), HealthInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	u := g.ups["up"]
	if _, ok, err := u.callRaw(b.Context(), "echo", json.RawMessage(`{}`)); !ok || err != nil {
		b.Fatal("first call: ", ok, err) // also waits for the session
	}
	args := json.RawMessage(`{"message":"` + text + `"}`)
	b.ReportAllocs()
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	b.ResetTimer()
	for b.Loop() {
		if _, ok, err := u.callRaw(b.Context(), "echo", args); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano() - r0.Utime.Nano() + r1.Stime.Nano() - r0.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

type nopReadCloser struct{ *bytes.Reader }

func (nopReadCloser) Close() error { return nil }
