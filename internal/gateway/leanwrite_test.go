package gateway

import (
	"bytes"
	"errors"
	"net"
	"testing"
)

// TestParkedStreamHeldWriteDoesNotWait: while a parked call is held, what
// its stream flushes (a keep-alive from the gate's beat, a ": hb"
// comment) is written without waiting: once the client stopped reading
// and the connection's buffers are full, the write fails at once
// (errWouldBlock) instead of holding the beat, and the client is taken
// for gone, once; nothing is written after it.
func TestParkedStreamHeldWriteDoesNotWait(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = server.Close() }()
	_ = client.(*net.TCPConn).SetReadBuffer(4096)
	_ = server.(*net.TCPConn).SetWriteBuffer(4096)

	gone := 0
	s := &parkedStream{conn: server, kept: keepHeader(map[string][]string{"Content-Type": {"text/event-stream"}}), timeout: testWait,
		gone: func() { gone++ }, held: true}
	chunk := bytes.Repeat([]byte(": hb\n\n"), 200)
	var werr error
	for i := 0; i < 1<<16 && werr == nil; i++ { // at most 78 MiB: far more than any socket buffer
		if _, werr = s.Write(chunk); werr == nil {
			werr = s.FlushError()
		}
	}
	if !errors.Is(werr, errWouldBlock) {
		t.Fatalf("held writes to a client that does not read ended with %v, want errWouldBlock", werr)
	}
	if _, err := s.Write(chunk); err == nil || gone != 1 {
		t.Errorf("after the failed write: write error %v, gone called %d times; want an error and gone once", err, gone)
	}
}
