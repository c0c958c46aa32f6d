package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestWriteH1RequestIsRequestWrite: what writeH1Request writes is what
// (*http.Request).Write writes, for the requests h1Transport takes lean.
func TestWriteH1RequestIsRequestWrite(t *testing.T) {
	many := http.Header{}
	for i := range 20 {
		many.Set(fmt.Sprintf("X-H%02d", 19-i), fmt.Sprint(i))
	}
	cases := []struct {
		name   string
		url    string
		host   string
		header http.Header
		body   string
	}{
		{name: "sdk", url: "http://127.0.0.1:8080/mcp", header: http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Session-Id": {"ABC"}, "Mcp-Protocol-Version": {"2025-06-18"}}, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{name: "host set", url: "http://example.test/mcp", host: "example.test", header: http.Header{"Accept": {"*/*"}}, body: "x"},
		{name: "empty port", url: "http://example.test:/mcp", header: http.Header{}, body: "x"},
		{name: "query and escapes", url: "http://example.test/a%20b/c?x=1&y=%2F", header: http.Header{}, body: "xy"},
		{name: "multiple values", url: "http://h/", header: http.Header{"X-A": {"1", " 2 ", ""}, "X-B": {"v"}}, body: "b"},
		{name: "line breaks and blanks", url: "http://h/", header: http.Header{"X-A": {" a\r\nb\n\tc\r "}, "X-Cr": {"\r\n"}}, body: "b"},
		{name: "user agent", url: "http://h/", header: http.Header{"User-Agent": {" ua/1\r\nx "}}, body: "b"},
		{name: "empty user agent", url: "http://h/", header: http.Header{"User-Agent": {""}}, body: "b"},
		{name: "no user agent value", url: "http://h/", header: http.Header{"User-Agent": nil}, body: "b"},
		{name: "excluded keys", url: "http://h/", header: http.Header{"Host": {"other"}, "Content-Length": {"99"}, "Trailer": {"X"}, "X-Z": {"z"}}, body: "b"},
		{name: "non-canonical keys", url: "http://h/", header: http.Header{"x-lower": {"1"}, "X-Upper": {"2"}}, body: "b"},
		{name: "many headers", url: "http://h/", header: many, body: strings.Repeat("z", 5000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() *http.Request {
				req, err := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				if tc.host != "" {
					req.Host = tc.host
				}
				req.Header = tc.header.Clone()
				return req
			}
			var want bytes.Buffer
			if err := mk().Write(&want); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			w := bufio.NewWriterSize(&got, 4<<10)
			req := mk()
			if err := writeH1Request(w, req, req.Body); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("writeH1Request wrote\n%q\nRequest.Write writes\n%q", got.String(), want.String())
			}
		})
	}
}

// closeCounter is a body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestWriteH1RequestBodyOfAnotherLength: a body shorter or longer than
// ContentLength is an error, as in Request.Write, and the body is closed.
func TestWriteH1RequestBodyOfAnotherLength(t *testing.T) {
	for _, n := range []int64{3, 5} {
		req, err := http.NewRequest(http.MethodPost, "http://h/", strings.NewReader("four"))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = n
		body := &closeCounter{Reader: strings.NewReader("four")}
		if err := writeH1Request(bufio.NewWriter(io.Discard), req, body); err == nil || !strings.Contains(err.Error(), "ContentLength") {
			t.Errorf("ContentLength %d with a body of 4: err %v, want the length mismatch", n, err)
		}
		if body.closed != 1 {
			t.Errorf("ContentLength %d: body closed %d times, want 1", n, body.closed)
		}
	}
}

// TestWriteH1RequestAllocatesNothing: the head goes into the writer's
// buffer (Request.Write: 6 allocations per request).
func TestWriteH1RequestAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: allocations differ")
	}
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {"ABC"}, "Mcp-Protocol-Version": {"2025-06-18"}}
	payload := []byte(`{"jsonrpc":"2.0","id":"tg-h1","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	req.ContentLength = int64(len(payload))
	w := bufio.NewWriterSize(io.Discard, 4<<10)
	body := &rawPostBody{}
	allocs := testing.AllocsPerRun(100, func() {
		body.Reset(payload)
		if err := writeH1Request(w, req, body); err != nil {
			t.Fatal(err)
		}
		_ = w.Flush()
	})
	if allocs != 0 {
		t.Errorf("writeH1Request: %.1f allocations per request, want 0", allocs)
	}
}

// TestSSETeeFirstAnswerNeedsNoGrowth: a sseTee starts with room for a
// tools/call answer of a few hundred bytes, so reading the first event of
// a fresh stream (each raw call's) allocates the tee only; its buffers
// used to grow from nothing (4–6 allocations more per call).
func TestSSETeeFirstAnswerNeedsNoGrowth(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: allocations differ")
	}
	ev := "event: message\nid: 1\ndata: " + `{"jsonrpc":"2.0","id":"tg-h7","result":{"content":[{"type":"text","text":"` +
		strings.Repeat("x", 100) + `"}]}}` + "\n\n"
	rc := io.NopCloser(repeatReader{[]byte(ev)})
	p := make([]byte, len(ev))
	log := slog.New(slog.DiscardHandler)
	allocs := testing.AllocsPerRun(100, func() {
		tee := (&sseTee{ReadCloser: rc, max: 1 << 20, log: log}).useBufs()
		if n, err := io.ReadFull(tee, p); err != nil || string(p[:n]) != ev {
			t.Fatalf("read %q, %v; want the event as it came", p[:n], err)
		}
	})
	if allocs > 1 {
		t.Errorf("%v allocations for a fresh stream's first event, want 1 (the tee)", allocs)
	}
}

// TestMediaTypeIsParseMediaType: mediaTypeIs tells the two media types of
// an upstream's answers as mime.ParseMediaType does.
func TestMediaTypeIsParseMediaType(t *testing.T) {
	values := []string{
		"", "text/event-stream", "application/json", "Text/Event-Stream", " application/JSON ; charset=utf-8",
		"application/json;", "application/json; charset", "application/json; =x", "text/event-stream;;",
		"application/json, text/event-stream", "application/jsonx", "application/json x", "application/ json",
		"application /json", "application\t/json", "\tapplication/json\t", "text/event-ſtream", "application/jſon",
		"text/event-stream; charset=\"utf-8", "APPLICATION/JSON", "application/json\x00", "\u00a0application/json",
		"application/json\u2028", "json", "text/event-stream\r\n", "application/json (comment)",
	}
	for _, v := range values {
		media, _, _ := mime.ParseMediaType(v)
		for _, want := range []string{mediaJSON, mediaEventStream} {
			if got := mediaTypeIs(v, want); got != (media == want) {
				t.Errorf("mediaTypeIs(%q, %q) = %v; ParseMediaType: %q", v, want, got, media)
			}
		}
	}
}

func FuzzMediaTypeIs(f *testing.F) {
	for _, v := range []string{"text/event-stream", " Application/JSON; charset=utf-8", "text/event-ſtream", "application/json;;"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		media, _, _ := mime.ParseMediaType(v)
		for _, want := range []string{mediaJSON, mediaEventStream} {
			if got := mediaTypeIs(v, want); got != (media == want) {
				t.Errorf("mediaTypeIs(%q, %q) = %v; ParseMediaType: %q", v, want, got, media)
			}
		}
	})
}

// TestRawHTTPHeadStaysAsBuilt: the raw POSTs of a session share one header
// map (rawHTTPHead); with configured headers added on the way (the round
// tripper's copy) and many calls at once, the shared map stays as it was
// built (under -race a change to it by any layer is a reported race).
func TestRawHTTPHeadStaysAsBuilt(t *testing.T) {
	f := newRawHTTPFixture(t, false, ServerConfig{Headers: map[string]string{"X-Upstream-Key": "k-1"}}, nil)
	u := f.g.ups["up"]
	const callers, calls = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, callers*calls)
	for range callers {
		wg.Go(func() {
			for range calls {
				if _, ok, err := u.callRaw(t.Context(), "echo", json.RawMessage(`{"message":"m"}`)); !ok || err != nil {
					errs <- fmt.Errorf("raw call: ok %v, %w", ok, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c, err := u.session()
	if err != nil {
		t.Fatal(err)
	}
	h := c.rawHead.Load()
	if h == nil {
		t.Fatal("no rawHTTPHead after raw calls")
	}
	want := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {c.cs.InitializeResult().ProtocolVersion}, "Mcp-Session-Id": {c.cs.ID()}}
	if !maps.EqualFunc(h.header, want, slices.Equal) {
		t.Errorf("the session's shared headers are now %v, want %v", h.header, want)
	}
	if !h.lean {
		t.Error("an http:// upstream without a proxy: its raw POSTs should go over the h1Transport")
	}
}
