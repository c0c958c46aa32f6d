package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"toolgate/internal/approval"
)

// rawSessionPOST is a tools/call POST on the 2025-era session sid as an
// HTTP/1.1 client writes it; meta, when not empty, is its params' _meta.
func rawSessionPOST(host, sid, version, id, tool, args, meta string) string {
	params := `"name":"` + tool + `","arguments":` + args
	if meta != "" {
		params = `"_meta":` + meta + `,` + params
	}
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{` + params + `}}`
	return fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n"+
		"Content-Length: %d\r\n\r\n%s", host, aliceToken, sid, version, len(body), body)
}

// A wireReader reads responses from a raw connection, keeping every byte
// it read.
type wireReader struct {
	raw bytes.Buffer
	br  *bufio.Reader
}

func newWireReader(c net.Conn) *wireReader {
	w := &wireReader{}
	w.br = bufio.NewReader(io.TeeReader(c, &w.raw))
	return w
}

// response reads one response; until, when set, is called with each line
// of its body as it arrives.
func (w *wireReader) response(t *testing.T, until func(line string)) {
	t.Helper()
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if until != nil {
			until(sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

var (
	wireDate   = regexp.MustCompile(`(?m)^Date: [^\r\n]*`)
	wireExpiry = regexp.MustCompile(`expires at [0-9TZ:.+-]+`)
)

// wireOf is raw, responses as they went on the wire, in a form that
// compares across runs: each response's head (Date and the approval's
// id normalised), then its body chunk by chunk as sent ("[chunk]"), or
// whole ("[body]") with its Content-Length, each checked against its
// framing; ids are the approvals' ids to normalise.
func wireOf(t *testing.T, raw []byte, ids []string) string {
	t.Helper()
	norm := func(s string) string {
		for _, id := range ids {
			s = strings.ReplaceAll(s, id, "<id>")
		}
		return wireExpiry.ReplaceAllString(s, "expires at <t>")
	}
	var out strings.Builder
	for len(raw) > 0 {
		head, rest, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
		if !ok {
			t.Fatalf("no end of head in %q", raw)
		}
		h := wireDate.ReplaceAllString(string(head), "Date: <date>")
		out.WriteString(norm(h) + "\r\n\r\n")
		m := regexp.MustCompile(`(?m)^Content-Length: (\d+)\r$`).FindStringSubmatch(string(head))
		if m != nil {
			n, _ := strconv.Atoi(m[1])
			out.WriteString("[body]" + norm(string(rest[:n])))
			raw = rest[n:]
			continue
		}
		if !strings.Contains(string(head), "\r\nTransfer-Encoding: chunked") {
			t.Fatalf("neither Content-Length nor chunked: %q", head)
		}
		for {
			line, after, _ := bytes.Cut(rest, []byte("\r\n"))
			n, err := strconv.ParseInt(string(line), 16, 32)
			if err != nil {
				t.Fatalf("chunk size %q: %v", line, err)
			}
			if n == 0 {
				if !bytes.HasPrefix(after, []byte("\r\n")) {
					t.Fatalf("no end after the last chunk: %q", after)
				}
				out.WriteString("[end]\n")
				raw = after[2:]
				break
			}
			if !bytes.HasPrefix(after[n:], []byte("\r\n")) {
				t.Fatalf("chunk of %d bytes not ended: %q", n, after)
			}
			out.WriteString("[chunk]" + norm(string(after[:n])))
			rest = after[n+2:]
		}
	}
	return out.String()
}

// TestLeanParkedStreamAsBefore (issue 13): a held call of a 2025-era
// session, from a raw HTTP/1.1 client, is parked off net/http's
// connection (the hook counts it) and the client reads the same bytes,
// head and body chunk by chunk, as from the same call held on the
// connection's goroutine (but for the Date and the approval's id and
// expiry): streamed after a heartbeat, answered as one JSON body when
// approved before any, and with a progress token its keep-alive at once;
// and the connection then serves the client's next request as net/http
// would (keep-alive).
func TestLeanParkedStreamAsBefore(t *testing.T) {
	verifyNoLeaks(t)
	cases := []struct {
		name string
		opts HTTPOptions
		meta string
		// pipelined: the client sends its next request right after the
		// held call's, before any answer.
		pipelined bool
		// closing: the held call's request says "Connection: close"; the
		// connection ends after its answer.
		closing bool
		n       int // the size of the held call's result (up__big)
		// ready is whether the client read what the held call writes
		// before it is approved (nil: approve once it is pending).
		ready func(line string) bool
	}{
		{"heartbeat", HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}, "", false, false, 0,
			func(l string) bool { return l == strings.TrimSpace(heartbeatComment) }},
		{"json", HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Hour}, "", false, false, 0, nil},
		{"json-big", HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Hour}, "", false, false, 5000, nil},
		{"stream-big", HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}, "", false, false, 5000,
			func(l string) bool { return l == strings.TrimSpace(heartbeatComment) }},
		{"token", HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Hour}, `{"progressToken":"p-7"}`, false, false, 0,
			func(l string) bool { return strings.HasPrefix(l, "data: ") }},
		{"pipelined", HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}, "", true, false, 0,
			func(l string) bool { return l == strings.TrimSpace(heartbeatComment) }},
		{"close-heartbeat", HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}, "", false, true, 0,
			func(l string) bool { return l == strings.TrimSpace(heartbeatComment) }},
		{"close-json", HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Hour}, "", false, true, 0, nil},
		{"close-pipelined", HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Hour, DropGrace: time.Hour}, "", true, true, 0,
			func(l string) bool { return l == strings.TrimSpace(heartbeatComment) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHooks()
			close(h.release)
			f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, time.Hour, &tc.opts)
			base, parked := parkedFront(t, f, &tc.opts)
			f.g.noPark = true
			onConn := serveHTTP(t, f.g, &tc.opts)
			f.g.noPark = false
			var wires [2]string
			for i, b := range []string{base, onConn} {
				cs := connectHTTP(t, b, aliceToken, nil, nil)
				waitInitialized(t, f.g, cs.ID())
				c, host := dialRaw(t, b)
				wr := newWireReader(c)
				sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
				// A ping: answered at once, no heartbeat (HeartbeatFirst is a
				// millisecond in some cases).
				ping := `{"jsonrpc":"2.0","id":"a-1","method":"ping"}`
				next := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
					"Accept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n"+
					"Content-Length: %d\r\n\r\n%s", host, aliceToken, sid, version, len(ping), ping)
				req := rawSessionPOST(host, sid, version, "h-1", "up__big", `{"n":`+strconv.Itoa(max(tc.n, 2))+`}`, tc.meta)
				if tc.closing {
					req = strings.Replace(req, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
				}
				if tc.pipelined {
					req += next
				}
				if _, err := io.WriteString(c, req); err != nil {
					t.Fatal(err)
				}
				id := string(f.waitState(t, approval.StatePending, 1)[0].ID)
				approved := false
				approve := func() {
					if !approved {
						approved = true
						f.approveNext(t)
					}
				}
				if tc.ready == nil {
					approve()
				}
				wr.response(t, func(l string) {
					if tc.ready != nil && tc.ready(l) {
						approve()
					}
				})
				if !approved {
					t.Fatalf("the response ended before the call was approved:\n%q", wr.raw.Bytes())
				}
				f.waitState(t, approval.StateConsumed, i+1)
				if tc.closing {
					// The connection ends after the answer; a pipelined
					// request is not served.
					if b, err := io.ReadAll(wr.br); err != nil || len(b) != 0 {
						t.Fatalf("after the answer to a call that asked to close: %q, %v; want the connection's end", b, err)
					}
					wires[i] = wireOf(t, wr.raw.Bytes(), []string{id, sid})
					_ = c.Close()
					continue
				}
				// The next request on the same connection: an allowed call.
				if !tc.pipelined {
					if _, err := io.WriteString(c, next); err != nil {
						t.Fatal(err)
					}
				}
				wr.response(t, nil)
				wires[i] = wireOf(t, wr.raw.Bytes(), []string{id, sid})
				_ = c.Close()
			}
			if n := parked.Load(); n != 1 {
				t.Errorf("%d calls parked, want 1", n)
			}
			if diff := cmp.Diff(wires[1], wires[0]); diff != "" {
				t.Errorf("parked (+) against held on the connection's goroutine (-):\n%s", diff)
			}
			if tc.closing {
				if !strings.Contains(wires[0], `"id":"h-1","result"`) || !strings.Contains(wires[0], "\r\nConnection: close\r\n") {
					t.Errorf("want the held call's answer saying Connection: close:\n%s", wires[0])
				}
				return
			}
			if !strings.Contains(wires[0], `"id":"h-1","result"`) || !strings.Contains(wires[0], `"id":"a-1","result":{}`) {
				t.Errorf("want both answers on the wire:\n%s", wires[0])
			}
		})
	}
}

// TestLeanParkedStreamNoCommentWithKeepAlives (issue 13): a held call
// with a progress token, parked or on the connection's goroutine, gets
// the gate's keep-alives and no ": hb" comment besides while it is held
// (the heartbeat every millisecond of silence would write one after
// each keep-alive); its answer follows as before.
func TestLeanParkedStreamNoCommentWithKeepAlives(t *testing.T) {
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Millisecond, Heartbeat: time.Millisecond, DropGrace: time.Hour}
	h := newHooks()
	close(h.release)
	f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, 20*time.Millisecond, &opts)
	base, parked := parkedFront(t, f, &opts)
	f.g.noPark = true
	onConn := serveHTTP(t, f.g, &opts)
	f.g.noPark = false
	for i, b := range []string{base, onConn} {
		cs := connectHTTP(t, b, aliceToken, nil, nil)
		waitInitialized(t, f.g, cs.ID())
		c, host := dialRaw(t, b)
		if _, err := io.WriteString(c, rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, "h-1", "up__big", `{"n":2}`,
			`{"progressToken":1}`)); err != nil {
			t.Fatal(err)
		}
		wr := newWireReader(c)
		keepAlives, comments := 0, 0
		var answer string
		wr.response(t, func(l string) {
			switch {
			case l == strings.TrimSpace(heartbeatComment) && keepAlives < 3:
				comments++
			case strings.HasPrefix(l, `data: {"jsonrpc":"2.0","method":"notifications/progress"`):
				if keepAlives++; keepAlives == 3 {
					f.approveNext(t)
				}
			case strings.HasPrefix(l, "data: "):
				answer = l
			}
		})
		if comments != 0 || keepAlives < 3 || !strings.Contains(answer, `"id":"h-1","result"`) {
			t.Errorf("front %d: %d comments among the first 3 keep-alives (want none), %d keep-alives, answer %q", i, comments, keepAlives, answer)
		}
		f.waitState(t, approval.StateConsumed, i+1)
		_ = c.Close()
	}
	if n := parked.Load(); n != 1 {
		t.Errorf("%d calls parked, want 1", n)
	}
}

// TestLeanParkedStreamDrop (issue 13): a parked 2025-era held call whose
// client drops its connection is cancelled as the end of its POST
// cancels one held on the connection's goroutine: ErrClientGone after the
// drop grace, which leaves the approval pending and releases its hold.
func TestLeanParkedStreamDrop(t *testing.T) {
	t.Run("keep-alive", func(t *testing.T) { testLeanParkedStreamDrop(t, false) })
	// A call whose request said "Connection: close" is parked too (since
	// branch tlspark32), and its drop noticed alike.
	t.Run("close", func(t *testing.T) { testLeanParkedStreamDrop(t, true) })
}

func testLeanParkedStreamDrop(t *testing.T, closing bool) {
	t.Helper()
	verifyNoLeaks(t)
	opts := HTTPOptions{HeartbeatFirst: time.Hour, Heartbeat: time.Hour, DropGrace: time.Millisecond}
	f := newLeanFixture(t, &opts)
	base, parked := parkedFront(t, f, &opts)
	f.g.noPark = true
	onConn := serveHTTP(t, f.g, &opts)
	f.g.noPark = false
	for i, b := range []string{base, onConn} {
		cs := connectHTTP(t, b, aliceToken, nil, nil)
		waitInitialized(t, f.g, cs.ID())
		c, host := dialRaw(t, b)
		req := rawSessionPOST(host, cs.ID(), cs.InitializeResult().ProtocolVersion, "h-1", "up__big", `{"n":`+strconv.Itoa(2+i)+`}`, "")
		if closing {
			req = strings.Replace(req, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		id := f.waitState(t, approval.StatePending, i+1)
		if i == 0 {
			waitParkedCount(t, parked, 1)
		}
		_ = c.Close()
		deadline := time.Now().Add(testWait)
		for released := false; !released; {
			released = true
			for _, r := range f.waitState(t, approval.StatePending, i+1) {
				released = released && r.LeaseLapsed(time.Now())
			}
			if !released && time.Now().After(deadline) {
				t.Fatalf("front %d: the dropped call's hold was not released: %+v", i, id)
			}
		}
	}
	if n := parked.Load(); n != 1 {
		t.Errorf("%d calls parked, want 1", n)
	}
}
