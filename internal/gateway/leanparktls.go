package gateway

import (
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"time"
)

// Parking a held call that came over TLS (HTTP/1.1; issue 13). The
// connection net/http hands over (leanHold.park) is the *tls.Conn: the
// answer is written through it (encrypted), as net/http would have, and
// closed through it (close_notify). Three things differ from a plain
// connection:
//
//   - What the client sent after the POST may be, besides net/http's
//     buffer, inside the tls.Conn, decrypted and not read yet (net/http's
//     background read takes one byte of a record): drainTLS reads it at
//     park time, into the call's pending bytes.
//   - The drop watch sees the TCP socket under the TLS layer: its end is
//     the client gone, as on plain; a readable byte is a TLS record, which
//     may be the client's next request, a close_notify alert or a
//     post-handshake message, told apart only by decrypting it. The watch
//     then hands the connection to a one-byte read on a goroutine of its
//     own (connWatch, through the tls.Conn: a close_notify is io.EOF, the
//     client gone; a byte is the next request's, kept for serveRest), so
//     that a close_notify is never taken for a next request.
//   - A request served on the connection after the answer (serveRest)
//     has r.TLS, the connection's state, as net/http would have set it
//     (withTLSState).

// drainTLS reads what tc holds already, decrypted or as whole records in
// its buffer, without reading the socket (a read deadline in the past, as
// net/http aborts its background read of a TLS connection: the runtime
// fails the read before any system call, and a timeout leaves the TLS
// state usable). It returns those bytes and a non-nil error when a
// buffered record ended the connection (a close_notify: io.EOF) or was
// bad. What is in the socket is the drop watch's.
func drainTLS(tc *tls.Conn) ([]byte, error) {
	_ = tc.SetReadDeadline(time.Unix(1, 0))
	defer func() { _ = tc.SetReadDeadline(time.Time{}) }()
	var (
		got []byte
		b   [512]byte
	)
	for {
		n, err := tc.Read(b[:])
		got = append(got, b[:n]...)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return got, nil
			}
			return got, err
		}
	}
}

// withTLSState serves next with r.TLS set to tc's connection state: the
// requests served after a parked call's answer on a TLS connection
// (serveRest), which reads it under the TLS layer's wrapping.
func withTLSState(next http.Handler, tc *tls.Conn) http.Handler {
	st := tc.ConnectionState()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			r = r.WithContext(r.Context())
			r.TLS = &st
		}
		next.ServeHTTP(w, r)
	})
}

// goneWatch is the drop watch of a parked call whose client had ended the
// connection before it was parked (drainTLS): nothing to watch.
type goneWatch struct{}

func (goneWatch) stop() ([]byte, bool) { return nil, false }
