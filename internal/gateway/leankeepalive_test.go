package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKeepAliveEventAsMarshalWire: the keep-alive events framed without
// encoding/json (appendKeepAliveEvent) are, byte for byte, what
// leanProgressMessage and writeSSEErr make of them, and every message it
// does not take is left to them.
func TestKeepAliveEventAsMarshalWire(t *testing.T) {
	tokens := []string{`"t1"`, `"a b/c:~"`, `""`, `7`, `-42`, `9007199254740991`}
	msgs := []string{"", keepAliveMessage, "waiting for approval 01JBX9 (t · echo_raw)", "<&>'%", `say "hi"`, `a\b\"c"\`,
		`waiting for approval 01KBNX4DN7Q7JDKBV9SAGM3CGE (rule "scale"); an approver can review it at https://tg.example/inbox?id=01KB&x=<1>; the request expires at 2026-12-04T13:41:07Z`,
		`approval 01KBNX4DN7Q7JDKBV9SAGM3CGE (rule "a \"quoted\" rule") was granted; running the call`}
	values := []float64{1, 2, 15, 1e6, 1e15, maxSafeProgress - 1}
	for _, tok := range tokens {
		for _, msg := range msgs {
			for _, v := range values {
				want, err := leanProgressMessage(json.RawMessage(tok), v, 0, msg)
				if err != nil {
					t.Fatal(err)
				}
				bp, ok := appendKeepAliveEvent(json.RawMessage(tok), v, 0, msg)
				if !ok {
					if isASCIIText(msg) {
						t.Errorf("token %s, %v, %q: not taken", tok, v, msg)
					}
					continue
				}
				if got, w := string(*bp), sseMessagePrefix+string(want)+sseMessageSuffix; got != w {
					t.Errorf("token %s, %v, %q:\n got %q\nwant %q", tok, v, msg, got, w)
				}
				putEventBuf(bp)
			}
		}
	}
	for _, c := range []struct {
		tok          string
		value, total float64
		msg          string
	}{
		{`"t"`, 1, 10, ""},                  // a total
		{`"t"`, 1.5, 0, ""},                 // a fraction
		{`"t"`, 0, 0, ""},                   // not after a keep-alive
		{`"t"`, -1, 0, ""},                  // negative
		{`"t"`, maxSafeProgress, 0, ""},     // beyond 2^53
		{`"t"`, math.NaN(), 0, ""},          // NaN
		{`"t"`, math.Inf(1), 0, ""},         // +Inf
		{`"t"`, 1, 0, "two\nlines"},         // a control character
		{`"t"`, 1, 0, "caf\u00e9"},          // beyond ASCII
		{`"t"`, 1, 0, "del\x7f"},            // DEL
		{`"caf` + "\u00e9" + `"`, 1, 0, ""}, // a token beyond ASCII
	} {
		if bp, ok := appendKeepAliveEvent(json.RawMessage(c.tok), c.value, c.total, c.msg); ok {
			t.Errorf("token %s, %v/%v, %q: taken as %q, want it left to encoding/json", c.tok, c.value, c.total, c.msg, *bp)
		}
	}
}

// isASCIIText reports whether msg is printable ASCII.
func isASCIIText(msg string) bool {
	for i := range len(msg) {
		if c := msg[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// TestHeldKeepAliveAllocatesNothing: a keep-alive of a parked 2025-era
// held call with a progress token (the gate's beat calls one every 15 s
// for each of thousands of held calls) allocates nothing but net's 8-byte
// rawConn once the stream's head went out: its event, its chunk and its
// write are framed in pooled buffers. It used to allocate the encoded message, the event,
// the stream's body buffer and the raw write's closure (≈ 1 KB in 5
// allocations each), the garbage the collector ran for while 10,000 calls
// sat idle. The wire is what it was.
func TestHeldKeepAliveAllocatesNothing(t *testing.T) {
	server, client := tcpPair(t) // the socket's buffers take the 100 keep-alives (≈ 15 KB) unread
	s := &parkedStream{conn: server, kept: keepHeader(http.Header{"Mcp-Session-Id": {"s1"}}), timeout: testWait, held: true}
	hw := newHeartbeatWriter(nil, time.Hour, time.Hour)
	hw.parkOn(s)
	hw.deferStream()
	gone := func() { t.Error("the client went away") }
	p := newLeanProgress(t.Context(), hw, json.RawMessage(`"tok-1"`), slog.New(slog.DiscardHandler), gone)
	// the gate's message, the rule named in quotes
	msg := `waiting for approval 01KBNX4DN7Q7JDKBV9SAGM3CGE (rule "scale"); the request expires at 2026-12-04T13:41:07Z`
	p.keepAlive(t.Context(), msg) // the head
	p.keepAlive(t.Context(), msg) // pools filled
	runs := 0
	n := testing.AllocsPerRun(100, func() {
		runs++
		p.keepAlive(t.Context(), msg)
	})
	// One is left: net's SyscallConn makes an 8-byte rawConn per call.
	if n > 1 && !raceEnabled { // -race: sync.Pool drops a share of what is put back
		t.Errorf("%v allocations per keep-alive, want at most 1 (net.TCPConn.SyscallConn's)", n)
	}
	hw.stop()
	_ = server.Close()
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	last := 2 + runs
	for _, want := range []string{"HTTP/1.1 200 OK\r\n", "Content-Type: text/event-stream\r\n", "Transfer-Encoding: chunked\r\n",
		`"progress":1}}`, `"progress":2}}`, `"progress":` + strconv.Itoa(last) + `}}`} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("the wire lacks %q", want)
		}
	}
	m, err := leanProgressMessage(json.RawMessage(`"tok-1"`), float64(last), 0, msg)
	if err != nil {
		t.Fatal(err)
	}
	ev := sseMessagePrefix + string(m) + sseMessageSuffix
	if chunk := strconv.FormatInt(int64(len(ev)), 16) + "\r\n" + ev + "\r\n"; !bytes.HasSuffix(got, []byte(chunk)) {
		t.Errorf("the wire ends %q, want the last keep-alive as one chunk %q", got[max(0, len(got)-len(chunk)):], chunk)
	}
}

// TestHeldHeartbeatAllocatesNothing: the ": hb" comment of a parked
// 2025-era held call without a token (one every 10 s for each) allocates
// nothing but net's 8-byte rawConn once the stream's head went out; it
// used to copy the comment and the stream's body buffer on each.
func TestHeldHeartbeatAllocatesNothing(t *testing.T) {
	server, client := tcpPair(t) // the socket's buffers take the 100 comments unread
	s := &parkedStream{conn: server, kept: keepHeader(http.Header{"Mcp-Session-Id": {"s1"}}), timeout: testWait, held: true}
	hw := newHeartbeatWriter(nil, time.Hour, time.Hour)
	hw.parkOn(s)
	hw.deferStream()
	hw.arm()
	hw.beat() // the head
	hw.beat() // pools filled
	if n := testing.AllocsPerRun(100, hw.beat); n > 1 && !raceEnabled {
		t.Errorf("%v allocations per comment, want at most 1 (net.TCPConn.SyscallConn's)", n)
	}
	hw.stop()
	_ = server.Close()
	got, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\r\n" + strings.Repeat("6\r\n: hb\n\n\r\n", 103); !bytes.HasSuffix(got, []byte(want)) || !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Errorf("the wire is %q, want the head and 103 comments", got)
	}
}
