package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// goSDKHead is the head the go-sdk's Streamable HTTP server answers a
// tools/call with (its event stream), as echoserver -http sends it.
const goSDKHead = "HTTP/1.1 200 OK\r\nCache-Control: no-cache, no-transform\r\nConnection: keep-alive\r\n" +
	"Content-Type: text/event-stream\r\nDate: Sat, 05 Dec 2026 00:16:23 GMT\r\nTransfer-Encoding: chunked\r\n\r\n"

const goSDKEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"tg-h1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hi\"}]}}\n\n"

// chunk is s as one chunk of a chunked body.
func chunk(s string) string { return strconv.FormatInt(int64(len(s)), 16) + "\r\n" + s + "\r\n" }

// fastHeadCases are answers (head, body and what follows) on which
// readH1HeadFast must read as http.ReadResponse reads.
var fastHeadCases = []struct {
	name string
	raw  string
	fast bool // readH1HeadFast takes it (the rest go to http.ReadResponse)
}{
	{"go-sdk event stream", goSDKHead + chunk(goSDKEvent) + "0\r\n\r\n", true},
	{"go-sdk event stream, end not come", goSDKHead + chunk(goSDKEvent), true},
	{"JSON", "HTTP/1.1 200 OK\r\nCache-Control: no-cache, no-transform\r\nContent-Length: 13\r\nContent-Type: application/json\r\nDate: x\r\n\r\n{\"id\":\"tg-h\"}", true},
	{"JSON and the next answer", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\n", true},
	{"empty JSON", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true},
	{"202 empty", "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nDate: x\r\n\r\n", true},
	{"lower case names", "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: abc\r\ncontent-length: 2\r\nx-ODD-name: 1\r\n\r\n{}", true},
	{"names with odd tokens", "HTTP/1.1 200 OK\r\nX_Under: 1\r\nX.Dot~: 2\r\nContent-Length: 1\r\n\r\nx", true},
	{"blanks around values", "HTTP/1.1 200 OK\r\nX-A:\t v \t\r\nX-B:\r\nX-C:   \r\nContent-Length: 1\r\n\r\nx", true},
	{"obs-text value", "HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9 \xff\r\nContent-Length: 1\r\n\r\nx", true},
	{"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx", true},
	{"201", "HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", true},
	{"299 odd reason", "HTTP/1.1 299 \x01weird\r\nContent-Length: 1\r\n\r\nx", true},
	{"Connection keep-alive", "HTTP/1.1 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", true},
	{"leading zeros", "HTTP/1.1 200 OK\r\nContent-Length: 0002\r\n\r\nxyz", true},
	{"cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true},
	{"chunked with a trailer", goSDKHead + chunk("abc") + "0\r\nX-T: v\r\nX-U: w\r\n\r\nnext", true},
	{"chunked cut in the trailer", goSDKHead + chunk("abc") + "0\r\n", true},
	{"chunked cut in a chunk", goSDKHead + "10\r\nabc", true},
	{"chunked bad size", goSDKHead + "zz\r\nabc\r\n", true},
	{"chunked trailer bad", goSDKHead + "0\r\nX T: v\r\n\r\n", true},
	{"chunked trailer cut", goSDKHead + "0\r\nX-T: v\r\n", true},
	{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 999999999999999999\r\n\r\nabc", true},

	{"empty", "", true}, // the read error, as ReadResponse returns it
	{"head cut", "HTTP/1.1 200 OK\r\nContent-Le", false},
	{"204", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", false},
	{"404", "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found", false},
	{"100 then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", false},
	{"HTTP/2.0", "HTTP/2.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"status of four digits", "HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"status glued", "HTTP/1.1 200OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"two spaces", "HTTP/1.1  200 OK\r\nContent-Length: 1\r\n\r\nx", false},
	{"unbounded", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}", false},
	{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nhi", false},
	{"bare LF inside", "HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 2\r\n\r\nhi", false},
	{"CR inside a value", "HTTP/1.1 200 OK\r\nX-A: 1\r2\r\nContent-Length: 2\r\n\r\nhi", false},
	{"control byte", "HTTP/1.1 200 OK\r\nX-A: 1\x01\r\nContent-Length: 2\r\n\r\nhi", false},
	{"DEL", "HTTP/1.1 200 OK\r\nX-A: 1\x7f\r\nContent-Length: 2\r\n\r\nhi", false},
	{"no colon", "HTTP/1.1 200 OK\r\nX-A\r\nContent-Length: 2\r\n\r\nhi", false},
	{"empty name", "HTTP/1.1 200 OK\r\n: a\r\nContent-Length: 2\r\n\r\nhi", false},
	{"space before colon", "HTTP/1.1 200 OK\r\nX-A : a\r\nContent-Length: 2\r\n\r\nhi", false},
	{"continuation", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nhi", false},
	{"leading blank line", "HTTP/1.1 200 OK\r\n X-A: a\r\nContent-Length: 2\r\n\r\nhi", false},
	{"repeated name", "HTTP/1.1 200 OK\r\nSet-Cookie: a\r\nSet-Cookie: b\r\nContent-Length: 2\r\n\r\nhi", false},
	{"repeated in two cases", "HTTP/1.1 200 OK\r\nX-A: a\r\nx-a: b\r\nContent-Length: 2\r\n\r\nhi", false},
	{"Pragma", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nhi", false},
	{"Pragma with Cache-Control", "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nCache-Control: max-age=1\r\nContent-Length: 2\r\n\r\nhi", false},
	{"Trailer declared", "HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: v\r\n\r\n", false},
	{"Connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", false},
	{"Connection Close among others", "HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 2\r\n\r\nhi", false},
	{"Connection closed-ish", "HTTP/1.1 200 OK\r\nConnection: x-enclosed\r\nContent-Length: 2\r\n\r\nhi", false},
	{"length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", false},
	{"gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhi", false},
	{"Chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", false},
	{"chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", false},
	{"chunked, gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n2\r\nhi\r\n0\r\n\r\n", false},
	{"lengths alike", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi", false},
	{"lengths differ", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi", false},
	{"length empty", "HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\nhi", false},
	{"length signed", "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nhi", false},
	{"length not a number", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nhi", false},
	{"length of 19 digits", "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\nhi", false},
	{"length too big", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nhi", false},
}

// readBoth reads raw with http.ReadResponse and with readH1HeadFast (or
// http.ReadResponse when it does not take it) through readers of the
// h1Conn's buffer size over r, and reports the first difference in what
// they give: the head, the body read to its end, the trailer and the
// bytes left after it.
func readBoth(t *testing.T, raw string, wrap func(io.Reader) io.Reader) (fast bool, diff string) {
	t.Helper()
	req := &http.Request{Method: http.MethodPost}
	type result struct {
		resp       *http.Response
		err, rerr  string
		body, rest []byte
		noBody     bool
	}
	read := func(useFast bool) (result, bool) {
		br := bufio.NewReaderSize(wrap(strings.NewReader(raw)), 4<<10)
		var (
			resp *http.Response
			err  error
			took bool
		)
		if useFast {
			resp, took, err = readH1HeadFast(br, req) //nolint:bodyclose // closed below once read
		}
		if !took {
			resp, err = http.ReadResponse(br, req)
		}
		var r result
		if err != nil {
			r.err = err.Error()
			return r, took
		}
		r.resp, r.noBody = resp, resp.Body == http.NoBody
		b, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		r.body = b
		if rerr != nil {
			r.rerr = rerr.Error()
		}
		r.rest, _ = io.ReadAll(br)
		return r, took
	}
	want, _ := read(false)
	got, took := read(true)
	switch {
	case got.err != want.err:
		return took, "error " + got.err + ", ReadResponse's " + want.err
	case want.resp == nil:
		return took, ""
	case got.resp.Status != want.resp.Status || got.resp.StatusCode != want.resp.StatusCode ||
		got.resp.Proto != want.resp.Proto || got.resp.ProtoMajor != want.resp.ProtoMajor || got.resp.ProtoMinor != want.resp.ProtoMinor:
		return took, "status line"
	case !reflect.DeepEqual(got.resp.Header, want.resp.Header):
		return took, "header"
	case got.resp.ContentLength != want.resp.ContentLength || !reflect.DeepEqual(got.resp.TransferEncoding, want.resp.TransferEncoding) ||
		got.resp.Close != want.resp.Close || got.resp.Uncompressed != want.resp.Uncompressed || got.noBody != want.noBody || got.resp.Request != want.resp.Request:
		return took, "framing"
	case !bytes.Equal(got.body, want.body) || got.rerr != want.rerr:
		return took, "body " + got.rerr + ", ReadResponse's " + want.rerr
	case !reflect.DeepEqual(got.resp.Trailer, want.resp.Trailer):
		return took, "trailer"
	case !bytes.Equal(got.rest, want.rest):
		return took, "bytes after the body"
	}
	return took, ""
}

func identity(r io.Reader) io.Reader { return r }

// TestH1FastHeadAsReadResponse: every answer reads as http.ReadResponse
// reads it (head, body, trailer, what follows), whether readH1HeadFast
// takes it or leaves it; it takes the heads MCP upstreams send.
func TestH1FastHeadAsReadResponse(t *testing.T) {
	for _, c := range fastHeadCases {
		t.Run(c.name, func(t *testing.T) {
			took, diff := readBoth(t, c.raw, identity)
			if diff != "" {
				t.Errorf("%q: %s", c.raw, diff)
			}
			if took != c.fast {
				t.Errorf("%q: taken by readH1HeadFast: %v, want %v", c.raw, took, c.fast)
			}
			// A byte at a time: the head is never whole in the buffer,
			// http.ReadResponse reads it.
			if took, diff := readBoth(t, c.raw, iotest.OneByteReader); diff != "" || (took && len(c.raw) > 0) {
				t.Errorf("%q a byte at a time: taken %v, %s", c.raw, took, diff)
			}
			if _, diff := readBoth(t, c.raw, iotest.DataErrReader); diff != "" {
				t.Errorf("%q with its end in the last read: %s", c.raw, diff)
			}
		})
	}
}

func FuzzH1FastHead(f *testing.F) {
	for _, c := range fastHeadCases {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if _, diff := readBoth(t, raw, identity); diff != "" {
			t.Errorf("%q: %s", raw, diff)
		}
	})
}

// A bytesConn is a net.Conn whose reads come from r.
type bytesConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *bytesConn) Read(p []byte) (int, error)      { return c.r.Read(p) }
func (c *bytesConn) SetReadDeadline(time.Time) error { return nil }
func (c *bytesConn) SetDeadline(time.Time) error     { return nil }
func (c *bytesConn) Close() error                    { return nil }

// TestH1HeadAllocations: the go-sdk's event stream answer (head, event,
// end) is read on a lean connection with at most 9 allocations (8 here); through
// http.ReadResponse it took 14.
func TestH1HeadAllocations(t *testing.T) {
	raw := []byte(goSDKHead + chunk(goSDKEvent) + "0\r\n\r\n")
	c := &bytesConn{r: bytes.NewReader(nil)}
	lc := newH1Conn(c)
	req := &http.Request{Method: http.MethodPost}
	buf := make([]byte, 512)
	var failed error
	allocs := testing.AllocsPerRun(200, func() {
		c.r.Reset(raw)
		lc.br.Reset(&lc.lim)
		resp, err := lc.readHead(req)
		if err != nil {
			failed = err
			return
		}
		for {
			_, err := resp.Body.Read(buf)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					failed = err
				}
				break
			}
		}
		_ = resp.Body.Close()
	})
	if failed != nil {
		t.Fatal(failed)
	}
	t.Logf("%.0f allocations per answer", allocs)
	if allocs > 9 {
		t.Errorf("reading the go-sdk's event stream answer allocated %.0f times, want at most 9", allocs)
	}
}

// BenchmarkH1Head reads the go-sdk's event stream answer (head, event,
// end) on a lean connection, as TestH1HeadAllocations does.
func BenchmarkH1Head(b *testing.B) {
	raw := []byte(goSDKHead + chunk(goSDKEvent) + "0\r\n\r\n")
	c := &bytesConn{r: bytes.NewReader(nil)}
	lc := newH1Conn(c)
	req := &http.Request{Method: http.MethodPost}
	buf := make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		c.r.Reset(raw)
		lc.br.Reset(&lc.lim)
		resp, err := lc.readHead(req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		_ = resp.Body.Close()
	}
}
