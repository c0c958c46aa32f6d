package gateway

import (
	"bufio"
	"fmt"
	"net/http"
)

// The answer head of a lean exchange (rawhttpconn.go), read within the
// bounds net/http's Transport keeps (branch attack14): at most
// h1MaxHead bytes for all of it, informational (1xx) answers before the
// final one skipped. http.ReadResponse alone reads a header of any size
// into memory (an upstream sending an endless header line took toolgate's
// memory with it), and the lean exchange used to fail a call answered
// after a 100 Continue or a 103 Early Hints, which net/http's Transport
// passes over, although the call had run.

// h1MaxHead bounds the bytes of an answer's head, 1xx answers included:
// net/http's Transport's default (MaxResponseHeaderBytes unset).
const h1MaxHead = 10 << 20

// h1Max1xx is how many informational answers may come before the final
// one (net/http's Transport: 5).
const h1Max1xx = 5

// An h1HeadLimit is the reader under an h1Conn's bufio.Reader: while on,
// it lets at most left more bytes through.
type h1HeadLimit struct {
	lc   *h1Conn
	on   bool
	left int64
}

func (l *h1HeadLimit) Read(p []byte) (int, error) {
	if !l.on {
		return l.lc.c.Read(p)
	}
	if l.left <= 0 {
		return 0, fmt.Errorf("the upstream's answer head is over %d bytes", h1MaxHead)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.lc.c.Read(p)
	l.left -= int64(n)
	return n, err
}

// readHead reads the final answer to req on lc, passing over informational
// answers (not 101), within h1MaxHead bytes for them all.
func (lc *h1Conn) readHead(req *http.Request) (*http.Response, error) {
	lc.lim.on, lc.lim.left = true, h1MaxHead-int64(lc.br.Buffered())
	defer func() { lc.lim.on = false }()
	for range h1Max1xx + 1 {
		resp, err := http.ReadResponse(lc.br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		_ = resp.Body.Close() // a 1xx answer has no body
	}
	return nil, fmt.Errorf("more than %d informational answers", h1Max1xx)
}

// newH1Reader returns the bufio.Reader of lc, reading through its head
// limit.
func newH1Reader(lc *h1Conn) *bufio.Reader {
	lc.lim.lc = lc
	return bufio.NewReaderSize(&lc.lim, 4<<10)
}
