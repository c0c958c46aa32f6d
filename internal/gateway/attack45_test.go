package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"toolgate/internal/approval"
)

// attack45Fronts runs body (a tools/call) on the HTTP lean front of a
// 2025-11-25 session, the stdio front of a 2025-11-25 agent and (modern,
// when not "": its 2026-07-28 form, sent with Mcp-Name up__echo) the
// 2026-07-28 front, and calls check with each answer (its HTTP status; 0
// on stdio). The stdio answer is the first line under one of ids (raw
// JSON).
func attack45Fronts(t *testing.T, f *leanFixture, body, modern string, ids []string, check func(t *testing.T, front string, status int, answer []byte)) {
	t.Helper()
	cs := connectHTTP(t, f.base, aliceToken, nil, nil)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	waitInitialized(t, f.g, sid)
	a := serveRawStdio(t, f.g, approval.Principal{ID: "alice", Kind: "agent"})
	t.Run("http session", func(t *testing.T) {
		ex, b := sessionExchange(t, "POST", f.base, aliceToken, sid, version, strings.NewReader(body))
		check(t, "http session", ex.StatusCode, b)
	})
	t.Run("stdio", func(t *testing.T) {
		a.t = t
		a.send(body)
		check(t, "stdio", 0, a.lineUnder(ids...))
	})
	if modern != "" {
		t.Run("2026-07-28", func(t *testing.T) {
			status, _, b := modernPost(t, f.base, "up__echo", modern, nil)
			check(t, "2026-07-28", status, b)
		})
	}
}

// lineUnder reads lines until one whose id (raw JSON, as sent) is one of
// ids and returns it.
func (a *rawAgent) lineUnder(ids ...string) []byte {
	a.t.Helper()
	type read struct {
		line string
		err  error
	}
	for {
		got := make(chan read, 1)
		go func() {
			line, err := a.out.ReadString('\n')
			got <- read{line, err}
		}()
		var r read
		select {
		case r = <-got:
		case <-time.After(testWait):
			// The reader ends with the agent's pipes (serveRawStdio).
			a.t.Fatalf("no answer under %q", ids)
		}
		if r.err != nil {
			a.t.Fatalf("read: %v (waiting for an answer under %q)", r.err, ids)
		}
		var m struct{ ID json.RawMessage }
		if json.Unmarshal([]byte(r.line), &m) == nil && slices.Contains(ids, string(m.ID)) {
			return []byte(r.line)
		}
	}
}

// TestLeanFallbackReadsAsTheSDK (branch attack45): a tools/call body the
// lean fronts' scanner does not read (a member of the envelope or of its
// params repeated, or given under a key that differs only in case) is
// served as the SDK reads it: exact keys, the last of two, and only the
// last params object. On ca0a3f75 the fallback decode (encoding/json)
// read "Name" as name and merged two params objects: the lean fronts ran
// up__echo for a body the SDK reads as a call of up__die (denied by the
// policy), and sent echo the arguments of a params object the SDK drops;
// on a 2026-07-28 POST whose Mcp-Name named the folded name, the lean front
// ran it where the SDK refuses the header's mismatch (-32020).
func TestLeanFallbackReadsAsTheSDK(t *testing.T) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	t.Run("folded name", func(t *testing.T) {
		f := newLeanFixture(t, nil)
		attack45Fronts(t, f,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__die","Name":"up__echo","arguments":{}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__die","Name":"up__echo","arguments":{},`+meta+`}}`, []string{"1"},
			func(t *testing.T, front string, status int, b []byte) {
				t.Helper()
				if n := f.h.count("echo"); n != 0 {
					t.Fatalf("%s: up__echo ran (%d) for a call the SDK reads as up__die: %s", front, n, b)
				}
				if front == "2026-07-28" {
					if status != 400 || !strings.Contains(string(b), "-32020") {
						t.Errorf("%s: answered %d %s, want the SDK's 400 -32020 (Mcp-Name is not the body's name)", front, status, b)
					}
				} else if !strings.Contains(string(b), "no dying") {
					t.Errorf("%s: answered %s, want the denial of up__die", front, b)
				}
			})
	})
	t.Run("params twice", func(t *testing.T) {
		f := newLeanFixture(t, nil)
		attack45Fronts(t, f,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"secret":1}},"params":{"name":"up__echo"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"secret":1},`+meta+`},"params":{"name":"up__echo",`+meta+`}}`, []string{"1"},
			func(t *testing.T, front string, _ int, b []byte) {
				t.Helper()
				select {
				case args := <-f.h.args:
					if strings.Contains(string(args), "secret") {
						t.Errorf("%s: echo got %s, the arguments of the params object the SDK drops", front, args)
					}
				case <-time.After(testWait):
					t.Fatalf("%s: echo never ran; answered %s", front, b)
				}
			})
	})
}

// TestIDsThatDecodeWithAReplacementRefused (branch attack45): a JSON-RPC
// id, or a notifications/cancelled requestId, that is a string with bytes
// that are not UTF-8 or an escaped half of a surrogate pair decodes with
// U+FFFD in its place (the SDK's decoder and encoding/json alike), so
// "a\xff", "a\xfe" and "a\ud800" are one id to the gateway. Such a message
// is refused (-32600), on every front, and nothing runs; a cancel naming
// one does not reach the call whose id is "a\ufffd" itself. On ca0a3f75
// the lean fronts ran such calls (a second in flight was refused as a
// duplicate of the first), the SDK answered under "a\ufffd", and a cancel
// naming "a\xfe" cancelled the call "a\ufffd".
func TestIDsThatDecodeWithAReplacementRefused(t *testing.T) {
	for _, id := range []string{"\"a\xff\"", `"a\ud800"`, `"a\udc00\udc00"`} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			f := newLeanFixture(t, nil)
			call := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"up__echo","arguments":{}}}`
			modern := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"up__echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
			// The refusal is under null (bytes that are not UTF-8) or the id
			// as sent; the SDK answered under "a\ufffd".
			ids := []string{"null", id, `"a\ufffd"`, "\"a\ufffd\""}
			attack45Fronts(t, f, call, modern, ids, func(t *testing.T, front string, status int, b []byte) {
				t.Helper()
				if n := f.h.count("echo"); n != 0 {
					t.Fatalf("%s: the call with id %q ran; answered %s", front, id, b)
				}
				if !strings.Contains(string(b), "-32600") || (status != 0 && status != 400) {
					t.Errorf("%s: answered %d %s, want 400 -32600", front, status, b)
				}
			})
		})
	}
}

// TestCancelOfAnIDThatDecodesWithAReplacementRefused (branch attack45): a
// notifications/cancelled whose requestId names no request exactly (a
// string that decodes with U+FFFD, or a number with a fraction, which the
// SDK's canceller turns into an int64: 1.5 is 1) is refused (-32600) and
// cancels nothing; the call it would have hit runs on until a cancel that
// names it. On ca0a3f75 the cancel naming "a\xfe" cancelled the call
// "a\ufffd", and one naming 7.5 the call 7, on the HTTP and stdio lean
// fronts.
func TestCancelOfAnIDThatDecodesWithAReplacementRefused(t *testing.T) {
	for _, c := range []struct{ id, bad string }{
		{`"a\ufffd"`, "\"a\xfe\""},
		{`"b\ufffd"`, `"b\udfff"`},
		{`7`, `7.5`},
	} {
		t.Run(fmt.Sprintf("%s by %q", c.id, c.bad), func(t *testing.T) {
			f := newLeanFixture(t, &HTTPOptions{DropGrace: time.Hour})
			cancel := func(rid string) string {
				return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + rid + `}}`
			}
			call := `{"jsonrpc":"2.0","id":` + c.id + `,"method":"tools/call","params":{"name":"up__sleep","arguments":{}}}`
			runsOn := func(t *testing.T) {
				t.Helper()
				// The cancel was answered before this look; a cancel
				// that reached the call ends it upstream within
				// milliseconds (on ca0a3f75: at once).
				select {
				case cause := <-f.h.ended:
					t.Fatalf("the cancel naming %s ended the call %s: %v", c.bad, c.id, cause)
				case <-time.After(300 * time.Millisecond):
				}
			}
			started := func(t *testing.T) {
				t.Helper()
				select {
				case <-f.h.started:
				case <-time.After(testWait):
					t.Fatal("the sleep call never reached the upstream")
				}
			}
			ended := func(t *testing.T) {
				t.Helper()
				select {
				case cause := <-f.h.ended:
					t.Logf("the call ended: %v", cause)
				case <-time.After(testWait):
					t.Fatalf("the cancel naming %s did not end the call", c.id)
				}
			}
			t.Run("http session", func(t *testing.T) {
				cs := connectHTTP(t, f.base, aliceToken, nil, nil)
				sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
				waitInitialized(t, f.g, sid)
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = sessionExchange(t, "POST", f.base, aliceToken, sid, version, strings.NewReader(call))
				}()
				started(t)
				ex, b := sessionExchange(t, "POST", f.base, aliceToken, sid, version, strings.NewReader(cancel(c.bad)))
				if ex.StatusCode != 400 || !strings.Contains(string(b), "-32600") {
					t.Errorf("the cancel naming %s was answered %d %s, want 400 -32600", c.bad, ex.StatusCode, b)
				}
				runsOn(t)
				if ex, _ := sessionExchange(t, "POST", f.base, aliceToken, sid, version, strings.NewReader(cancel(c.id))); ex.StatusCode != 202 {
					t.Errorf("the cancel naming %s was answered %d, want 202", c.id, ex.StatusCode)
				}
				ended(t)
				<-done
			})
			t.Run("stdio", func(t *testing.T) {
				a := serveRawStdio(t, f.g, approval.Principal{ID: "alice", Kind: "agent"})
				a.send(call)
				started(t)
				a.send(cancel(c.bad))
				runsOn(t)
				if b := a.lineUnder("null"); !strings.Contains(string(b), "-32600") {
					t.Errorf("the cancel naming %s was answered %s, want -32600", c.bad, b)
				}
				a.send(cancel(c.id))
				ended(t)
			})
		})
	}
}
