package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// writeH1Request writes the lean request req (h1Transport.lean) with body
// in place of req.Body to w, byte for byte as (*http.Request).Write writes
// it: the request line, Host, User-Agent (Go's default unless req has
// one; none if req's is empty), Content-Length, then req's other headers
// sorted by name, each value with its line breaks turned into spaces and
// its surrounding blanks trimmed, then the body. Request.Write formats
// the request line and Host with fmt, builds a transfer writer and a
// sorted copy of the headers per request (6 allocations per POST); this
// writes into w's buffer instead. body is closed, as Request.Write closes
// it; a body whose length is not req.ContentLength is an error (nothing
// may have been flushed yet, or part of it: the caller closes the
// connection either way).
func writeH1Request(w *bufio.Writer, req *http.Request, body io.ReadCloser) error {
	defer func() { _ = body.Close() }()
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	_, _ = w.WriteString(req.Method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(req.URL.RequestURI())
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(host)
	ua := "Go-http-client/1.1"
	if vv, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(vv) > 0 {
			ua = vv[0]
		}
	}
	if ua != "" {
		_, _ = w.WriteString("\r\nUser-Agent: ")
		writeH1Value(w, ua)
	}
	_, _ = w.WriteString("\r\nContent-Length: ")
	_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
	_, _ = w.WriteString("\r\n")
	var keys [16]string
	ks := keys[:0]
	for k := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			// Request.Write's own, or not lean.
		default:
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	for _, k := range ks {
		for _, v := range req.Header[k] {
			_, _ = w.WriteString(k)
			_, _ = w.WriteString(": ")
			writeH1Value(w, v)
			_, _ = w.WriteString("\r\n")
		}
	}
	_, _ = w.WriteString("\r\n")
	n, err := io.Copy(w, body)
	switch {
	case err != nil:
		return err
	case n != req.ContentLength:
		return fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
	}
	return nil
}

// writeH1Value writes the header value v as Request.Write does: CR and
// LF become spaces, and spaces, tabs, CRs and LFs around it are trimmed.
func writeH1Value(w *bufio.Writer, v string) {
	v = strings.Trim(v, " \t\r\n")
	for {
		i := strings.IndexAny(v, "\r\n")
		if i < 0 {
			_, _ = w.WriteString(v)
			return
		}
		_, _ = w.WriteString(v[:i])
		_ = w.WriteByte(' ')
		v = v[i+1:]
	}
}

// Media types of an HTTP upstream's answers.
const (
	mediaJSON        = "application/json"
	mediaEventStream = "text/event-stream"
)

// mediaTypeIs reports whether the Content-Type value v has the media type
// want (lower case ASCII), as mime.ParseMediaType(v) would report it: the
// part before any ';', case-insensitive, without surrounding space; the
// parameters are not read. ParseMediaType builds a map of them per call.
func mediaTypeIs(v, want string) bool {
	base, _, _ := strings.Cut(v, ";")
	base = strings.TrimSpace(base)
	if len(base) != len(want) {
		return false
	}
	for i := 0; i < len(base); i++ {
		c := base[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] {
			return false
		}
	}
	return true
}
