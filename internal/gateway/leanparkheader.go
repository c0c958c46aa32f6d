package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
)

// parkedHeader is the response header a parked call keeps while it is
// held (leanHold.park), in its wire form: "Key: value\r\n" lines as
// http.Header.Write writes them, in one byte slice of its exact size. A
// cloned http.Header is a map, its groups and a slice of values, ≈ 0.8 KB
// per held call in the heap profile; the handful of lines the front set
// are a few hundred bytes, and the map is rebuilt once, at answer time
// (docs/performance.md, "Smaller held calls").
type parkedHeader []byte

// keepHeader returns h in its wire form (see parkedHeader).
func keepHeader(h http.Header) parkedHeader {
	var b bytes.Buffer
	_ = h.Write(&b)                             // a bytes.Buffer does not fail
	return parkedHeader(bytes.Clone(b.Bytes())) // not the buffer's spare capacity
}

// header rebuilds the header kept, keys canonical as net/http keeps them,
// or an error when p is not a header block (it always is: keepHeader made
// it).
func (p parkedHeader) header() (http.Header, error) {
	r := textproto.NewReader(bufio.NewReaderSize(io.MultiReader(bytes.NewReader(p), strings.NewReader("\r\n")), max(len(p)+2, 16)))
	m, err := r.ReadMIMEHeader()
	if err != nil {
		return http.Header{}, fmt.Errorf("parked response header: %w", err)
	}
	return http.Header(m), nil
}
