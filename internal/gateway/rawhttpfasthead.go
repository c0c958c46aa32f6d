package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
)

// The usual answer head of a lean exchange read without net/http's
// parser (issue 13, branch http26). http.ReadResponse reads the head
// through textproto: a string per line and per value, a canonical key per
// name, a transferReader, a LimitedReader or chunked reader and a body
// per answer (15 allocations for the go-sdk's event stream head), and it
// was ≈ 4–9 % of toolgate's CPU per call on an HTTP upstream
// (docs/performance.md). readH1HeadFast reads the heads an MCP upstream
// sends on nearly every call with one string for the whole head, one
// backing array for the values and one map, and returns exactly what
// http.ReadResponse returns for them; any other head, or one not
// wholly in the connection's buffer, is left to http.ReadResponse.
//
// Taken here (every condition checked, else http.ReadResponse reads it):
//   - the status line "HTTP/1.1 2xx" (not 204), with or without a reason
//     phrase;
//   - header lines "Name: value" ending in CRLF, each name a token, no
//     continuation lines, no CR or LF inside a line, every value byte
//     one textproto accepts, no name twice;
//   - no Pragma (fixPragmaCacheControl), no Trailer, no Connection that
//     mentions "close" in any case;
//   - either "Transfer-Encoding: chunked" (exactly) and no
//     Content-Length, or one Content-Length of 1–18 digits and no
//     Transfer-Encoding.
//
// The bodies read as net/http's do: a Content-Length body reports an
// early end as io.ErrUnexpectedEOF and its last bytes with io.EOF; a
// chunked body reads its trailer (or the final CRLF) at its end, the
// trailer's fields set as resp.Trailer.

// readH1HeadFast reads the answer head in br's buffer (reading once if
// it is empty) when it is one it takes; ok false: nothing was consumed,
// http.ReadResponse reads it. A read error before any byte is returned
// as http.ReadResponse returns it (io.EOF as io.ErrUnexpectedEOF).
func readH1HeadFast(br *bufio.Reader, req *http.Request) (resp *http.Response, ok bool, err error) {
	if req != nil && req.Method == http.MethodHead {
		return nil, false, nil // no body whatever the head says
	}
	if _, err := br.Peek(1); err != nil {
		// Peek consumed the reader's error: returned here as
		// ReadResponse's first ReadLine returns it.
		if err == io.EOF { //nolint:errorlint // as ReadResponse compares it
			err = io.ErrUnexpectedEOF
		}
		return nil, true, err
	}
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, false, nil
	}
	head := buf[:end+2] // the status line and header lines, each with its CRLF
	resp, chunked, n, ok := parseH1Head(head)
	if !ok {
		return nil, false, nil
	}
	resp.Request = req
	_, _ = br.Discard(end + 4)
	switch {
	case chunked:
		resp.ContentLength = -1
		resp.TransferEncoding = []string{"chunked"}
		resp.Body = &h1ChunkedBody{cr: httputil.NewChunkedReader(br), br: br, resp: resp}
	case n == 0:
		resp.ContentLength, resp.Body = 0, http.NoBody
	default:
		resp.ContentLength = n
		resp.Body = &h1LenBody{br: br, left: n}
	}
	return resp, true, nil
}

// parseH1Head parses head (lines with their CRLF, without the blank
// line) when readH1HeadFast takes it; n is its Content-Length when not
// chunked.
func parseH1Head(head []byte) (resp *http.Response, chunked bool, n int64, ok bool) {
	const proto = "HTTP/1.1 "
	if len(head) < len(proto)+5 || string(head[:len(proto)]) != proto {
		return nil, false, 0, false
	}
	// Count the lines first: one map and one backing array sized for them.
	lines := bytes.Count(head, []byte("\r\n"))
	if lines > 64 {
		return nil, false, 0, false
	}
	s := string(head) // every string below is a part of this one
	i := bytes.Index(head, []byte("\r\n"))
	status := s[len(proto):i]
	if !statusTaken(status) {
		return nil, false, 0, false
	}
	code := int(status[0]-'0')*100 + int(status[1]-'0')*10 + int(status[2]-'0')
	h := make(http.Header, lines-1)
	vals := make([]string, lines-1)
	var te, cl string
	haveTE, haveCL := false, false
	for pos := i + 2; pos < len(s); {
		e := bytes.Index(head[pos:], []byte("\r\n"))
		line := s[pos : pos+e]
		pos += e + 2
		key, value, good := h1HeaderLine(line)
		if !good {
			return nil, false, 0, false
		}
		if _, dup := h[key]; dup {
			return nil, false, 0, false
		}
		switch key {
		case "Pragma", "Trailer":
			return nil, false, 0, false
		case "Connection":
			if containsFoldASCII(value, "close") {
				return nil, false, 0, false
			}
		case "Transfer-Encoding":
			if haveTE {
				return nil, false, 0, false
			}
			te, haveTE = value, true
			continue // net/http keeps it out of the header (resp.TransferEncoding)
		case "Content-Length":
			cl, haveCL = value, true
		}
		vals[0] = value
		h[key] = vals[:1:1]
		vals = vals[1:]
	}
	switch {
	case haveTE && !haveCL && te == "chunked":
		chunked = true
	case haveCL && !haveTE:
		if len(cl) == 0 || len(cl) > 18 {
			return nil, false, 0, false
		}
		for j := 0; j < len(cl); j++ {
			if cl[j] < '0' || cl[j] > '9' {
				return nil, false, 0, false
			}
			n = n*10 + int64(cl[j]-'0')
		}
	default:
		return nil, false, 0, false
	}
	return &http.Response{
		Status:     status,
		StatusCode: code,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
	}, chunked, n, true
}

// statusTaken reports whether status (the status line after "HTTP/1.1 ")
// is a 2xx code other than 204, alone or followed by a space and a
// reason phrase, with no CR or LF.
func statusTaken(status string) bool {
	if len(status) < 3 || status[0] != '2' || status[1] < '0' || status[1] > '9' || status[2] < '0' || status[2] > '9' || status[:3] == "204" {
		return false
	}
	if len(status) > 3 && status[3] != ' ' {
		return false
	}
	return !containsCRLF(status)
}

// h1HeaderLine splits a header line (without its CRLF) as textproto's
// readMIMEHeader does, when the line is one readH1HeadFast takes: a
// token name, canonical or made so, a colon, a value of bytes textproto
// accepts with the blanks around it trimmed.
func h1HeaderLine(line string) (key, value string, ok bool) {
	colon := -1
	for j := 0; j < len(line); j++ {
		if line[j] == ':' {
			colon = j
			break
		}
		if !h1TokenByte[line[j]] {
			return "", "", false
		}
	}
	if colon <= 0 {
		return "", "", false
	}
	key = line[:colon]
	if !canonicalKey(key) {
		key = textproto.CanonicalMIMEHeaderKey(key)
	}
	v := line[colon+1:]
	for j := 0; j < len(v); j++ {
		c := v[j]
		if c == '\r' || c == '\n' || (c < ' ' && c != '\t') || c == 0x7f {
			return "", "", false
		}
	}
	// textproto trims the line's trailing blanks, then the value's
	// leading ones.
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	return key, v, true
}

// canonicalKey reports whether the token k is in canonical MIME form:
// the first letter and each letter after a hyphen upper case, every
// other letter lower case.
func canonicalKey(k string) bool {
	upper := true
	for j := 0; j < len(k); j++ {
		c := k[j]
		switch {
		case upper && 'a' <= c && c <= 'z':
			return false
		case !upper && 'A' <= c && c <= 'Z':
			return false
		}
		upper = c == '-'
	}
	return true
}

func containsCRLF(s string) bool {
	for j := 0; j < len(s); j++ {
		if s[j] == '\r' || s[j] == '\n' {
			return true
		}
	}
	return false
}

// containsFoldASCII reports whether s contains sub (lower case ASCII) in
// any case.
func containsFoldASCII(s, sub string) bool {
	for j := 0; j+len(sub) <= len(s); j++ {
		k := 0
		for ; k < len(sub); k++ {
			c := s[j+k]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[k] {
				break
			}
		}
		if k == len(sub) {
			return true
		}
	}
	return false
}

// A h1LenBody is a Content-Length answer body, read as net/http reads
// one (its body over an io.LimitedReader).
type h1LenBody struct {
	br   *bufio.Reader
	left int64
}

func (b *h1LenBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	switch {
	case err == io.EOF && b.left > 0: //nolint:errorlint // as net/http's body compares it
		err = io.ErrUnexpectedEOF
	case err == nil && n > 0 && b.left == 0:
		err = io.EOF
	}
	return n, err
}

func (*h1LenBody) Close() error { return nil }

// errH1TrailerEOF is net/http's error for a chunked body cut inside its
// trailer.
var errH1TrailerEOF = errors.New("http: unexpected EOF reading trailer")

// A h1ChunkedBody is a chunked answer body, read as net/http reads one:
// at the last chunk the trailer, or the final CRLF, is read too.
type h1ChunkedBody struct {
	cr   io.Reader
	br   *bufio.Reader
	resp *http.Response
}

func (b *h1ChunkedBody) Read(p []byte) (int, error) {
	n, err := b.cr.Read(p)
	if err == io.EOF { //nolint:errorlint // as net/http's body compares it
		if e := b.readTrailer(); e != nil {
			err = e
		}
	}
	return n, err
}

func (*h1ChunkedBody) Close() error { return nil }

// readTrailer is net/http's (body).readTrailer.
func (b *h1ChunkedBody) readTrailer() error {
	buf, err := b.br.Peek(2)
	if bytes.Equal(buf, []byte("\r\n")) {
		_, _ = b.br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errH1TrailerEOF
	}
	if err != nil {
		return err
	}
	if !upcomingDoubleCRLF(b.br) {
		return errors.New("http: suspiciously long trailer after chunked body")
	}
	hdr, err := textproto.NewReader(b.br).ReadMIMEHeader()
	if err != nil {
		if err == io.EOF { //nolint:errorlint // as net/http's readTrailer compares it
			return errH1TrailerEOF
		}
		return err
	}
	if b.resp.Trailer == nil {
		b.resp.Trailer = http.Header(hdr)
		return nil
	}
	for k, vv := range hdr {
		b.resp.Trailer[k] = vv
	}
	return nil
}

// upcomingDoubleCRLF is net/http's seeUpcomingDoubleCRLF: whether a
// blank line comes within r's buffer.
func upcomingDoubleCRLF(r *bufio.Reader) bool {
	for size := 4; ; size++ {
		buf, err := r.Peek(size)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
}
