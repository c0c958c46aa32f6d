package httpserve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener is an in-memory listener over net.Pipe, so that deadlines
// run on synctest's fake clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client end of a new connection.
func (l *pipeListener) dial(t *testing.T) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	select {
	case l.conns <- server:
	case <-l.done:
		t.Fatal("listener closed")
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// serveInBubble runs Serve on a pipe listener until the test's end.
func serveInBubble(t *testing.T, h http.Handler, opts *Options) *pipeListener {
	t.Helper()
	ln := newPipeListener()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return ln
}

// TestHeldRequestOutlivesReadTimeout: a handler that has read its body and
// then holds the request (a held tool call) keeps its context past the
// read timeout; with http.Server.ReadTimeout the context would be
// cancelled when the timeout fires.
func TestHeldRequestOutlivesReadTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ctxErr := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(r.Body); err != nil {
				t.Errorf("read body: %v", err)
			}
			<-release
			ctxErr <- r.Context().Err()
			_, _ = io.WriteString(w, "done")
		})
		ln := serveInBubble(t, h, &Options{ReadTimeout: time.Second})
		c := ln.dial(t)
		go func() {
			_, _ = io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
		}()
		synctest.Wait()
		time.Sleep(time.Minute) // fake time: far past the read timeout
		close(release)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if err := <-ctxErr; err != nil {
			t.Errorf("request context after a minute held: %v, want alive", err)
		}
		if resp.StatusCode != 200 || string(body) != "done" {
			t.Errorf("response %d %q", resp.StatusCode, body)
		}
	})
}

// TestGetWithoutBodyHasNoReadDeadline: an event stream (GET, no body)
// stays open past the read timeout.
func TestGetWithoutBodyHasNoReadDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		ctxErr := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("flush: %v", err)
			}
			<-release
			ctxErr <- r.Context().Err()
		})
		ln := serveInBubble(t, h, &Options{ReadTimeout: time.Second})
		c := ln.dial(t)
		go func() { _, _ = io.WriteString(c, "GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n") }()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("read response: %v", err)
		}
		defer resp.Body.Close()
		time.Sleep(time.Hour)
		close(release)
		if err := <-ctxErr; err != nil {
			t.Errorf("stream context after an hour: %v, want alive", err)
		}
	})
}

// TestSlowBodyTimesOut: a body that does not arrive within the read
// timeout fails the handler's read.
func TestSlowBodyTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		readErr := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			readErr <- err
		})
		ln := serveInBubble(t, h, &Options{ReadTimeout: 5 * time.Second})
		c := ln.dial(t)
		go func() {
			// Half of the promised body, then nothing.
			_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello")
		}()
		start := time.Now()
		err := <-readErr
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read of a stalled body = %v, want a timeout", err)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Errorf("the read failed after %v, want the read timeout 5s", got)
		}
	})
}

// TestIdleConnectionClosed: a keep-alive connection without a request is
// closed after the idle timeout, and so is a connection that sends
// nothing (its read-header timeout runs from its first byte:
// TestReadHeaderTimeoutFromFirstByte).
func TestIdleConnectionClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
		ln := serveInBubble(t, h, &Options{ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 30 * time.Second})

		silent := ln.dial(t)
		start := time.Now()
		if _, err := silent.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection that sent nothing got data")
		}
		if got := time.Since(start); got != 30*time.Second {
			t.Errorf("silent connection closed after %v, want the idle timeout 30s", got)
		}

		c := ln.dial(t)
		go func() { _, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") }()
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		start = time.Now()
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("an idle connection got data")
		}
		if got := time.Since(start); got != 30*time.Second {
			t.Errorf("idle connection closed after %v, want the idle timeout 30s", got)
		}
	})
}

// TestReadHeaderTimeoutFromFirstByte: the read-header timeout of a
// connection's first request runs from the request's first byte, as
// net/http runs it for the later ones. An agent that connects and, busy
// in a burst, writes its request later than the timeout is answered (it
// got EOF, or a reset, when net/http closed the connection first: issue
// 13, BenchmarkHeldCalls at N = 10,000), and headers that start and then
// stall are still cut at the timeout.
func TestReadHeaderTimeoutFromFirstByte(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
		// A cap too, as toolgate's listeners have one.
		ln := serveInBubble(t, h, &Options{ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 30 * time.Second, MaxConns: 4})

		late := ln.dial(t)
		time.Sleep(5 * time.Second) // the fake clock: past the read-header timeout
		go func() { _, _ = io.WriteString(late, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") }()
		resp, err := http.ReadResponse(bufio.NewReader(late), nil)
		if err != nil {
			t.Fatalf("a request sent 5s after connecting: %v; want it answered", err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Fatalf("a request sent 5s after connecting: %d %q; want 200 ok", resp.StatusCode, body)
		}

		stalled := ln.dial(t)
		time.Sleep(5 * time.Second)
		if _, err := io.WriteString(stalled, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil { // no end of headers
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := stalled.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection whose headers stalled got data")
		}
		if got := time.Since(start); got != 2*time.Second {
			t.Errorf("stalled headers cut after %v from their first byte, want the read-header timeout 2s", got)
		}
	})
}

// TestServeReturnsWhenContextEnds: Serve runs BeforeShutdown, closes the
// listener and returns nil.
func TestServeReturnsWhenContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, http.NotFoundHandler(), &Options{BeforeShutdown: func() { close(ran) }})
	}()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	<-ran
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		_ = c.Close()
		t.Error("the listener still accepts after Serve returned")
	}
}
