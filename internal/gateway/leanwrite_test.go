package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestParkedStreamHeldWriteDoesNotWait: while a parked call is held, what
// its stream flushes (a keep-alive from the gate's beat, a ": hb"
// comment) is written without waiting: once the client stopped reading
// and the connection's buffers are full, the write fails at once
// (errWouldBlock) instead of holding the beat, and the client is taken
// for gone, once; nothing is written after it.
func TestParkedStreamHeldWriteDoesNotWait(t *testing.T) {
	server, client := tcpPair(t)
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

// TestParkedStreamKeepsNothingWhileHeld: a held call's parked stream keeps
// neither its header (once it went out) nor the bytes of its last
// keep-alive between keep-alives: ten thousand held calls kept ≈ 1 KB each
// of them (docs/performance.md, "held25c"). What goes out is unchanged:
// the head, a chunk per keep-alive, and a ": hb" comment after them.
func TestParkedStreamKeepsNothingWhileHeld(t *testing.T) {
	server, client := tcpPair(t)
	s := &parkedStream{conn: server, kept: keepHeader(http.Header{"Mcp-Session-Id": {"s1"}}), timeout: testWait, held: true}
	hw := newHeartbeatWriter(nil, time.Hour, time.Hour)
	hw.parkOn(s)
	hw.deferStream()
	for i := range 2 {
		if err := writeSSEErr(hw, []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":`+strconv.Itoa(i+1)+`}}`)); err != nil {
			t.Fatal(err)
		}
		if s.h != nil || s.kept != nil {
			t.Errorf("keep-alive %d: the stream keeps its header after it went out", i+1)
		}
		if s.buf != nil {
			t.Errorf("keep-alive %d: the stream keeps a buffer of %d bytes between keep-alives", i+1, cap(s.buf))
		}
	}
	hw.arm()
	hw.beat()
	hw.stop()
	_ = server.Close()
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HTTP/1.1 200 OK\r\n", "Content-Type: text/event-stream\r\n", "Mcp-Session-Id: s1\r\n",
		`"progress":1}}`, `"progress":2}}`, "6\r\n: hb\n\n\r\n"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("the wire lacks %q:\n%s", want, got)
		}
	}
}

// TestParkedStreamWritesNothingAfterItsEnd: once a parked call's response
// ended (finish), its connection serves the client's next request, so a
// late write on the stream (a keep-alive, a comment, another finish) must
// not reach the wire, where it would open the next response (attack22).
func TestParkedStreamWritesNothingAfterItsEnd(t *testing.T) {
	server, client := tcpPair(t)
	s := &parkedStream{conn: server, kept: keepHeader(http.Header{"Content-Type": {"text/event-stream"}}), timeout: testWait}
	if _, err := s.Write([]byte("data: {}\n\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.FlushError(); err != nil {
		t.Fatal(err)
	}
	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte(": hb\n\n")); !errors.Is(err, errParkedFinished) {
		t.Errorf("a write after the end returned %v, want errParkedFinished", err)
	}
	if err := s.FlushError(); !errors.Is(err, errParkedFinished) {
		t.Errorf("a flush after the end returned %v, want errParkedFinished", err)
	}
	if err := s.finish(); !errors.Is(err, errParkedFinished) {
		t.Errorf("a second end returned %v, want errParkedFinished", err)
	}
	_ = server.Close()
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(got, []byte("0\r\n\r\n")) || bytes.Contains(got, []byte(": hb")) {
		t.Errorf("the wire after the end: want it to end with the last chunk and hold no later write:\n%q", got)
	}
}

// TestLateKeepAliveAfterParkedAnswerIsNotTheClientGone (attack23): a
// keep-alive written on a parked call's stream after its response ended
// (finish: the connection already serves the client's next request) is
// refused by the stream (errParkedFinished), which is not the client
// going away: the call's progress must not call gone for it, as it did
// for any failed write (harmless while the call is answered, but it armed
// the drop grace's cancel of a call that was over and took a client that
// is still there for gone).
func TestLateKeepAliveAfterParkedAnswerIsNotTheClientGone(t *testing.T) {
	server, client := tcpPair(t)
	s := &parkedStream{conn: server, kept: keepHeader(http.Header{"Mcp-Session-Id": {"s1"}}), timeout: testWait, held: true}
	hw := newHeartbeatWriter(nil, time.Hour, time.Hour)
	hw.parkOn(s)
	hw.deferStream()
	gone := 0
	p := newLeanProgress(t.Context(), hw, json.RawMessage(`"tok-1"`), slog.New(slog.DiscardHandler), func() { gone++ })
	p.keepAlive(t.Context(), "waiting for approval") // the head and the first event
	hw.answering(s)
	hw.stop()
	if err := hw.finishParked(s); err != nil {
		t.Fatal(err)
	}
	p.keepAlive(t.Context(), "waiting for approval") // late: after the response ended
	if gone != 0 {
		t.Errorf("a keep-alive after the parked call's answer called gone %d times, want none: the client did not go away", gone)
	}
	_ = server.Close()
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(got, []byte("0\r\n\r\n")) || bytes.Count(got, []byte(`"progress":`)) != 1 {
		t.Errorf("the wire: want one keep-alive, then the end, and nothing after it:\n%q", got)
	}
}
