package gateway

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// Whether a failed POST to an HTTP upstream may have reached it (branch
// attack14). The go-sdk client wraps every error of its http.Client's Do
// in jsonrpc2.ErrRejected ("the request didn't reach the server"), and
// the HTTP statuses 500, 502, 503, 504 and 429 as well; callError turns
// that code into "nothing was run". That is true only when nothing of the
// call could have reached the upstream: a connection that failed after
// the whole request was written, an HTTP 500 (the tool failed while
// running), or a 502 or 504 from a proxy in front of the upstream (it
// passed the call on) all may have run it. Such failures are marked here,
// and callError reports them as "may have run" whatever code the SDK put
// on them.

// errMayHaveReached marks the error of an HTTP request to an upstream
// that failed after the transport had read its whole body: the upstream
// may have received all of it.
var errMayHaveReached = errors.New("the request may have reached the upstream")

// reached reports whether err is that of a request that may have reached
// the upstream whole: written on the lean exchange (errH1Sent), or its
// body read to its end by net/http's transport (errMayHaveReached).
func reached(err error) bool {
	return errors.Is(err, errH1Sent) || errors.Is(err, errMayHaveReached)
}

// mayHaveRunStatus reports whether an HTTP upstream's answer with status
// code to a tools/call may come after the call ran: 500 (the server
// failed while handling it), 502 and 504 (a gateway passed it on and got
// no valid or timely answer). 429 and 503 refuse a request before it is
// processed.
func mayHaveRunStatus(code int) bool {
	return code == http.StatusInternalServerError || code == http.StatusBadGateway || code == http.StatusGatewayTimeout
}

// fallbackRoundTrip sends req through t.fallback (net/http's Transport);
// an error after the transport read req's body to its end is marked
// errMayHaveReached: net/http does not tell how much of a request it
// wrote, and a body read whole may have been.
func (t *h1Transport) fallbackRoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return t.fallback.RoundTrip(req)
	}
	var whole atomic.Bool
	r := *req // a RoundTripper must not change req: the tracked body goes on a copy
	r.Body = &wholeBody{ReadCloser: req.Body, size: req.ContentLength, whole: &whole}
	if get := req.GetBody; get != nil {
		r.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil {
				return nil, err
			}
			return &wholeBody{ReadCloser: b, size: req.ContentLength, whole: &whole}, nil
		}
	}
	resp, err := t.fallback.RoundTrip(&r)
	if err != nil && whole.Load() {
		err = fmt.Errorf("%w: %w", errMayHaveReached, err)
	}
	return resp, err
}

// A wholeBody is a request body that sets whole once it has been read
// to its end (io.EOF, or size bytes when size > 0).
type wholeBody struct {
	io.ReadCloser
	size  int64
	n     int64
	whole *atomic.Bool
}

func (b *wholeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if errors.Is(err, io.EOF) || (b.size > 0 && b.n >= b.size) {
		b.whole.Store(true)
	}
	return n, err
}
