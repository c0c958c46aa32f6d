package gateway

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// earlyBody gives head bytes, then, before the rest, waits until the
// upstream's answer has arrived on the client's connection and the
// poller has reported it (its readiness used up, as a read's wait uses
// it), then gives the rest.
type earlyBody struct {
	head, rest []byte
	rc         func() syscall.RawConn // the client's connection
	answer     chan<- struct{}        // closed: the upstream may answer
	waited     bool
}

func (b *earlyBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if !b.waited {
		b.waited = true
		asked := false
		// Wait for the answer as a read does: the readiness is reset,
		// then waited for; the answer is asked for only after the reset.
		_ = b.rc().Read(func(fd uintptr) bool {
			if peeked(fd) {
				return true
			}
			if !asked {
				asked = true
				close(b.answer)
			}
			return false
		})
	}
	if len(b.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// TestH1AnswerBeforeTheWholeBody (attack25): an upstream may answer a
// POST before it has read the whole body (an auth check that refuses at
// the head, a 413), keep the connection and read the rest. A request
// larger than the write buffer (4 KiB) wrote its first bytes before the
// answer came and its last ones from within the wait for the answer
// (h1Awaiter, httpup24); that wait begins with the connection's readiness
// reset and, the answer already there, waited for news that never came:
// the call hung until its context ended instead of getting the answer.
func TestH1AnswerBeforeTheWholeBody(t *testing.T) {
	if !h1Supported {
		t.Skip("no lean HTTP/1.1 exchange on this system")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	const size = 64 << 10
	answer := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer func() { _ = c.Close() }()
		br := bufio.NewReader(c)
		for { // the head
			line, err := br.ReadString('\n')
			if err != nil {
				served <- err
				return
			}
			if line == "\r\n" {
				break
			}
		}
		<-answer
		if _, err := io.WriteString(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 6\r\n\r\ndenied"); err != nil {
			served <- err
			return
		}
		_, err = io.CopyN(io.Discard, br, size) // the rest of the body, read after the answer
		served <- err
		_, _ = br.ReadByte() // keeps the connection until the client ends it
	}()

	h1 := newH1Transport(&h1RecordingRT{}, nil, "http://"+ln.Addr().String()+"/mcp", 4)
	t.Cleanup(h1.CloseIdleConnections)
	if h1.host == "" {
		t.Fatal("not lean")
	}
	var client syscall.RawConn
	h1.dialer.Control = func(_, _ string, rc syscall.RawConn) error { client = rc; return nil }
	body := bytes.Repeat([]byte("b"), size)
	req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/mcp", &earlyBody{
		head: body[:8<<10], rest: body[8<<10:], rc: func() syscall.RawConn { return client }, answer: answer})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	// A hang guard, not a timing: the answer is on the connection before
	// the request's last bytes are written.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := h1.RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("a POST whose upstream answered before reading its whole body: %v; want the answer (401)", err)
	}
	if b := h1ReadAll(t, resp); resp.StatusCode != http.StatusUnauthorized || !strings.EqualFold(b, "denied") {
		t.Errorf("answer %d %q, want 401 \"denied\"", resp.StatusCode, b)
	}
	if err := <-served; err != nil {
		t.Errorf("the upstream: %v", err)
	}
}
