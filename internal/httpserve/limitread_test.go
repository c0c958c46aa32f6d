package httpserve

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A pauseListener's connections stop once, in the Read that returns their
// first bytes, after those bytes left the socket and before they reach
// the reader: read is told, and the Read returns when proceed is closed.
type pauseListener struct {
	net.Listener
	read    chan struct{}
	proceed chan struct{}
	armed   chan struct{} // holds one token: the first connection pauses
}

func (l *pauseListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pc := &pauseConn{TCPConn: c.(*net.TCPConn)}
	select {
	case <-l.armed:
		pc.l = l
	default:
	}
	return pc, nil
}

type pauseConn struct {
	*net.TCPConn
	l *pauseListener // nil: does not pause
}

func (c *pauseConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	if n > 0 && c.l != nil {
		l := c.l
		c.l = nil
		l.read <- struct{}{}
		<-l.proceed
	}
	return n, err
}

// TestCapSparesRequestBeingRead (fixes36): a connection whose request's
// first bytes were read from its socket, but which the Listener still
// counted as idle (net/http had not called it active yet), is not evicted
// to make room: a new connection is refused 503 and the request is
// answered. Before fixes36, Read took the connection out of the idle list
// after the bytes had left the socket, so an Accept in between found it
// idle with nothing unread and closed it while net/http read its request.
func TestCapSparesRequestBeingRead(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pl := &pauseListener{Listener: inner, read: make(chan struct{}), proceed: make(chan struct{}), armed: make(chan struct{}, 1)}
	pl.armed <- struct{}{}
	shed := &shedLog{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok "+r.URL.Query().Get("who"))
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	// headerGrace: a's request counts as still coming however long this
	// machine takes to get b in (else a, its bytes out of its socket and
	// none coming, could be closed as stalled: TestCapStalledBytesGoNowhere).
	go func() {
		done <- Serve(ctx, pl, h, &Options{Name: "test", MaxConns: 1, OnShed: shed.add, headerGrace: time.Hour})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	addr := inner.Addr().String()

	a := dial(t, addr)
	send(t, a, "/?who=a")
	<-pl.read // a's request left its socket; net/http has not seen it yet

	b := dial(t, addr)
	send(t, b, "/?who=b")
	resp, err := http.ReadResponse(bufio.NewReader(b), nil)
	if err != nil {
		close(pl.proceed)
		t.Fatalf("b: %v, want 503 (a carries a request)", err)
	}
	_ = resp.Body.Close()
	got := resp.StatusCode
	close(pl.proceed)
	if got != http.StatusServiceUnavailable {
		t.Errorf("b: %d, want 503 (a carries a request)", got)
	}
	readOK(t, bufio.NewReader(a), "a")
	if got := strings.Join(shed.get(), ","); got != "refused" {
		t.Errorf("shed = %q, want refused", got)
	}
}
