package gateway

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
)

// rawModernTokenRequest is rawModernRequest with the progress token tok
// (JSON) in the call's _meta.
func rawModernTokenRequest(host, id, tool, args, tok string) string {
	body := modernCallBody(id, tool, args, `"progressToken":`+tok)
	return fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: %s\r\nMcp-Method: tools/call\r\nMcp-Name: %s\r\n"+
		"Content-Length: %d\r\n\r\n%s", host, aliceToken, modernVersion, tool, len(body), body)
}

// upstreamTokenText matches a progress token of the gateway's progress
// routes (progressRoutes.start).
var upstreamTokenText = regexp.MustCompile(`toolgate-[0-9]+-[A-Z2-7]+`)

// metaExpiry matches the expiry toolgate's approval _meta names.
var metaExpiry = regexp.MustCompile(`"expires_at":"[^"]*"`)

// TestLeanModernTokenAsTheSDKPath (issue 13): a 2026-07-28 tools/call
// whose _meta carries a progress token is served by the lean front (one
// POST, one policy evaluation) and its raw HTTP/1.1 client reads the
// bytes the SDK path writes (the same gateway served with
// DisableLeanCalls), head and body chunk by chunk, but for the Date and
// the approval's id and expiry: an allowed call's upstream progress under
// the agent's token, then its result (HTTP and stdio upstreams); a held
// call's keep-alive at once, then, approved, the upstream's progress past
// it and the result, or, denied, the refusal. The held calls are parked
// off net/http's connection, which then serves the client's next request
// as net/http does.
func TestLeanModernTokenAsTheSDKPath(t *testing.T) {
	verifyNoLeaks(t)
	cases := []struct {
		name, up, tool, args, tok string
		held                      bool
		verdict                   approval.Verdict
		want                      []string // in the lean wire, in order
	}{
		{"allowed with progress", "http", "up__burst", `{"n":3}`, `"p-1"`, false, "",
			[]string{`"progressToken":"p-1","message":"step 1","progress":1,"total":3`, `"progressToken":"p-1","message":"step 3","progress":3,"total":3`, `"id":"c-1","result"`}},
		{"allowed with progress, stdio", "stdio", "up__burst", `{"n":3}`, `42`, false, "",
			[]string{`"progressToken":42,"message":"step 1","progress":1,"total":3`, `"id":"c-1","result"`}},
		{"held approved", "http", "up__progress", `{}`, `7`, true, approval.VerdictApprove,
			[]string{`"progressToken":7,"message":"waiting for approval <id>`, `"progressToken":7,"message":"working","progress":2,"total":4`, `"text":"token toolgate-`}},
		{"held denied", "http", "up__big", `{"n":2}`, `"d-1"`, true, approval.VerdictDeny,
			[]string{`"progressToken":"d-1","message":"waiting for approval <id>`, `"isError":true`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHooks()
			close(h.release)
			up := ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}
			if tc.up == "stdio" {
				up = stdioServer("up")
			}
			opts := HTTPOptions{DropGrace: time.Hour}
			f := newLeanProgFixture(t, up, h, time.Hour, &opts)
			waitUpstream(t, f.g, "up", nil)
			lean, parked := parkedFront(t, f, &opts)
			sdk := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true, DropGrace: time.Hour})
			var wires [2]string
			for i, base := range []string{lean, sdk} {
				f.trail.take()
				n0 := f.pol.n.Load()
				c, host := dialRaw(t, base)
				wr := newWireReader(c)
				if _, err := io.WriteString(c, rawModernTokenRequest(host, `"c-1"`, tc.tool, tc.args, tc.tok)); err != nil {
					t.Fatal(err)
				}
				var ids []string
				decided := false
				wr.response(t, func(l string) {
					if tc.held && !decided && strings.HasPrefix(l, "data: ") {
						// The first keep-alive: the call is held.
						decided = true
						ids = append(ids, string(f.waitState(t, approval.StatePending, 1)[0].ID))
						f.reviewNext(t, tc.verdict)
					}
				})
				if tc.held && !decided {
					t.Fatalf("path %d: the response ended before a keep-alive:\n%q", i, wr.raw.Bytes())
				}
				if i == 0 {
					if tr := f.trail.take(); !slices.Equal(tr, []bool{true}) {
						t.Errorf("lean trail %v, want [true] (served by the lean front)", tr)
					}
					if n := f.pol.n.Load() - n0; n != 1 {
						t.Errorf("%d policy evaluations, want 1", n)
					}
				}
				// The next request on the same connection: an allowed call
				// whose upstream sends progress (both paths stream it).
				if _, err := io.WriteString(c, rawModernTokenRequest(host, `"c-2"`, "up__burst", `{"n":1}`, `"next"`)); err != nil {
					t.Fatal(err)
				}
				wr.response(t, nil)
				// The upstream's token (the progress tool's answer names it)
				// is the gateway's, new for each call.
				// So is a refusal's expiry in its _meta (wireOf normalises
				// the keep-alives' "expires at").
				w := upstreamTokenText.ReplaceAllString(wireOf(t, wr.raw.Bytes(), ids), "toolgate-<n>-<rand>")
				wires[i] = metaExpiry.ReplaceAllString(w, `"expires_at":"<t>"`)
				_ = c.Close()
			}
			if diff := cmp.Diff(wires[1], wires[0]); diff != "" {
				t.Errorf("lean path (+) against the SDK path (-):\n%s", diff)
			}
			at := 0
			for _, w := range tc.want {
				k := strings.Index(wires[0][at:], w)
				if k < 0 {
					t.Fatalf("%q not in the wire after byte %d:\n%s", w, at, wires[0])
				}
				at += k + len(w)
			}
			if want := map[bool]int64{true: 1, false: 0}[tc.held]; parked.Load() != want {
				t.Errorf("%d calls parked, want %d", parked.Load(), want)
			}
		})
	}
}

// TestLeanModernTokenShortAsTheSDKPath: an allowed 2026-07-28 call with
// a progress token whose upstream sends no progress, and a denied one,
// are served by the lean front and answered with the SDK path's message,
// alone as application/json (the SDK streams it as its one event:
// asJSONAnswer), as a call without a token is.
func TestLeanModernTokenShortAsTheSDKPath(t *testing.T) {
	f := newLeanFixture(t, nil)
	sdk := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true})
	for _, c := range []struct{ tool, args string }{{"up__echo", `{"a":"<&>"}`}, {"up__die", `{}`}} {
		body := modernCallBody(`"s-1"`, c.tool, c.args, `"progressToken":"t-1"`)
		f.trail.take()
		lst, lh, lb := modernPost(t, f.base, c.tool, body, nil)
		if tr := f.trail.take(); !slices.Equal(tr, []bool{true}) {
			t.Errorf("%s: lean trail %v, want [true]", c.tool, tr)
		}
		sst, sh, sb := modernPost(t, sdk, c.tool, body, nil)
		sh, sb = asJSONAnswer(t, sh, sb)
		if lst != sst || !equalHeaders(lh, sh) || string(lb) != string(sb) {
			t.Errorf("%s:\nlean %d %v %s\nsdk  %d %v %s", c.tool, lst, lh, lb, sst, sh, sb)
		}
	}
	if n := f.h.count("die"); n != 0 {
		t.Fatalf("the denied tool ran %d times", n)
	}
}

// TestLeanModernTokenKeepsTheSDKPathForOthers: a 2026-07-28 call whose
// progress token the front could not give back as the SDK path does (a
// fraction, an exponent, -0, an escape, a non-ASCII string, null, an
// object), whose _meta repeats it or escapes a key, goes to the SDK path,
// and its answer is the SDK path's.
func TestLeanModernTokenKeepsTheSDKPathForOthers(t *testing.T) {
	f := newLeanFixture(t, nil)
	modernPost(t, f.base, "up__echo", modernCallBody("1", "up__echo", `{}`, ""), nil)
	<-f.h.args
	for _, meta := range []string{
		`"progressToken":1.5`, `"progressToken":1e3`, `"progressToken":-0`, `"progressToken":"a\u0041"`,
		`"progressToken":"é"`, `"progressToken":null`, `"progressToken":{}`, `"progressToken":9007199254740992`,
		`"progressToken":1,"progressToken":2`, `"progress\u0054oken":1`, `"progressToken":1,"x\u0041":1`,
	} {
		f.trail.take()
		st, _, b := modernPost(t, f.base, "up__echo", modernCallBody("2", "up__echo", `{"m":1}`, meta), nil)
		<-f.h.args
		if tr := f.trail.take(); !slices.Equal(tr, []bool{false}) {
			t.Errorf("_meta %s: lean trail %v, want [false] (the SDK path)", meta, tr)
		}
		if st != 200 || !strings.Contains(string(b), `"resultType":"complete"`) {
			t.Errorf("_meta %s: %d %s", meta, st, b)
		}
	}
	// And the plain ones are the front's.
	for _, tok := range []string{`0`, `-9007199254740991`, `"t<&>/~"`} {
		f.trail.take()
		modernPost(t, f.base, "up__echo", modernCallBody("3", "up__echo", `{}`, `"progressToken":`+tok), nil)
		<-f.h.args
		if tr := f.trail.take(); !slices.Equal(tr, []bool{true}) {
			t.Errorf("token %s: lean trail %v, want [true]", tok, tr)
		}
	}
}

// TestLeanModernTokenGoClient: the go-sdk's own 2026-07-28 client, which
// sends its progress token in _meta, is served by the lean front: an
// allowed call gets the upstream's progress under its token, a held one
// its keep-alives every beat (values 1, 2, 3…, naming the approval),
// and, once approved, the upstream's progress past them and the result;
// the same as on the SDK path.
func TestLeanModernTokenGoClient(t *testing.T) {
	var seen [2][]progressSeen
	for i, lean := range []bool{true, false} {
		h := newHooks()
		f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, time.Hour,
			&HTTPOptions{DisableLeanCalls: !lean, DropGrace: time.Hour})
		ev := newClientEvents()
		cs := connectEra(t, f.base, aliceToken, ev, true)
		f.trail.take()

		burst := &mcp.CallToolParams{Name: "up__burst", Arguments: map[string]any{"n": 2}}
		burst.SetProgressToken("b-1")
		if res, err := cs.CallTool(t.Context(), burst); err != nil || textOf(t, res) != "done" {
			t.Fatalf("lean %v: allowed: %+v %v", lean, res, err)
		}
		got := receive(t, ev.progress, 2)
		before := f.pol.n.Load()
		params := &mcp.CallToolParams{Name: "up__progress"}
		params.SetProgressToken(7)
		done := make(chan callResult, 1)
		go func() {
			res, err := cs.CallTool(t.Context(), params)
			done <- callResult{res, err}
		}()
		got = append(got, receive(t, ev.progress, 1)...)
		f.approveNext(t)
		got = append(got, receive(t, ev.progress, 2)...)
		close(h.release)
		r := <-done
		if r.err != nil || r.res.IsError {
			t.Fatalf("lean %v: held: %+v %v", lean, r.res, r.err)
		}
		seen[i] = normalised(got)
		if lean {
			if tr := f.trail.take(); !slices.Equal(tr, []bool{true, true}) {
				t.Errorf("lean trail %v, want [true true] (both calls served by the lean front)", tr)
			}
			if n := f.pol.n.Load() - before; n != 1 {
				t.Errorf("held: %d policy evaluations, want 1", n)
			}
		} else if tr := f.trail.take(); len(tr) != 0 {
			t.Errorf("lean off: trail %v", tr)
		}
	}
	want := []progressSeen{
		{Token: "b-1", Progress: 1, Total: 2, Message: "step 1"},
		{Token: "b-1", Progress: 2, Total: 2, Message: "step 2"},
		{Token: float64(7), Progress: 1, Message: "waiting for <approval> (rule \"needs a human\"); the request <approval> "},
		{Token: float64(7), Progress: 2, Total: 4, Message: "working"},
		{Token: float64(7), Progress: 3, Total: 4, Message: "working"},
	}
	if diff := cmp.Diff(want, seen[0]); diff != "" {
		t.Errorf("lean path (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(seen[1], seen[0]); diff != "" {
		t.Errorf("lean path (+) against the SDK path (-):\n%s", diff)
	}
}

// TestLeanModernTokenKeepAlivesEveryBeat: a held 2026-07-28 call with a
// progress token, parked, gets a keep-alive at every beat of the gate's
// clock, under its token, values 1, 2, 3… with the first one's message,
// and its result once approved.
func TestLeanModernTokenKeepAlivesEveryBeat(t *testing.T) {
	verifyNoLeaks(t)
	h := newHooks()
	close(h.release)
	opts := HTTPOptions{DropGrace: time.Hour}
	f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, 20*time.Millisecond, &opts)
	base, parked := parkedFront(t, f, &opts)
	c, host := dialRaw(t, base)
	if _, err := io.WriteString(c, rawModernTokenRequest(host, `"k-1"`, "up__big", `{"n":2}`, `"beat"`)); err != nil {
		t.Fatal(err)
	}
	wr := newWireReader(c)
	var keepAlives []string
	var answer string
	wr.response(t, func(l string) {
		switch {
		case strings.HasPrefix(l, `data: {"jsonrpc":"2.0","method":"notifications/progress"`):
			keepAlives = append(keepAlives, l)
			if len(keepAlives) == 4 {
				f.approveNext(t)
			}
		case strings.HasPrefix(l, "data: "):
			answer = l
		case l != "" && l != "event: message":
			t.Errorf("unexpected line %q (no SSE comments on 2026-07-28 POSTs)", l)
		}
	})
	if len(keepAlives) < 4 {
		t.Fatalf("%d keep-alives, want at least 4", len(keepAlives))
	}
	for i, k := range keepAlives {
		want := strings.Replace(keepAlives[0], `"progress":1}`, fmt.Sprintf(`"progress":%d}`, i+1), 1)
		if k != want || !strings.Contains(k, `"progressToken":"beat","message":"waiting for approval `) {
			t.Errorf("keep-alive %d: %s, want %s", i, k, want)
		}
	}
	if !strings.Contains(answer, `"id":"k-1","result"`) || !strings.Contains(answer, bigText(2)) {
		t.Errorf("answer %s", answer)
	}
	if n := parked.Load(); n != 1 {
		t.Errorf("%d calls parked, want 1", n)
	}
	if n := f.h.count("big"); n != 1 {
		t.Errorf("the approved call ran %d times, want 1", n)
	}
}

// TestLeanModernTokenCancelAndDrop: a held 2026-07-28 call with a
// progress token whose client gives up, by cancelling the go-sdk client's
// call or by dropping its raw connection after the first keep-alive, is
// cancelled at once (the POST's end, as PropagateRequestCancellation
// makes it on the SDK path), on the lean front (parked) as on the SDK
// path: its approval is cancelled, nothing runs.
func TestLeanModernTokenCancelAndDrop(t *testing.T) {
	verifyNoLeaks(t)
	for _, how := range []string{"cancel", "drop"} {
		t.Run(how, func(t *testing.T) {
			opts := HTTPOptions{DropGrace: time.Hour}
			h := newHooks()
			f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, time.Hour, &opts)
			lean, parked := parkedFront(t, f, &opts)
			sdk := serveHTTP(t, f.g, &HTTPOptions{DisableLeanCalls: true, DropGrace: time.Hour})
			var states [2]approval.State
			for i, base := range []string{lean, sdk} {
				f.trail.take()
				switch how {
				case "cancel":
					ev := newClientEvents()
					cs := connectEra(t, base, aliceToken, ev, true)
					ctx, cancel := context.WithCancel(t.Context())
					params := &mcp.CallToolParams{Name: "up__big", Arguments: map[string]any{"n": 2 + i}}
					params.SetProgressToken("c-1")
					done := make(chan error, 1)
					go func() {
						_, err := cs.CallTool(ctx, params)
						done <- err
					}()
					receive(t, ev.progress, 1)
					cancel()
					if err := <-done; err == nil {
						t.Errorf("path %d: the cancelled call returned no error", i)
					}
				case "drop":
					c, host := dialRaw(t, base)
					if _, err := io.WriteString(c, rawModernTokenRequest(host, `"d-1"`, "up__big", fmt.Sprintf(`{"n":%d}`, 2+i), `"d-1"`)); err != nil {
						t.Fatal(err)
					}
					wr := newWireReader(c)
					line, err := wr.br.ReadString('\n')
					for err == nil && !strings.HasPrefix(line, "data: ") {
						line, err = wr.br.ReadString('\n')
					}
					if err != nil {
						t.Fatalf("path %d: no keep-alive: %v\n%q", i, err, wr.raw.Bytes())
					}
					_ = c.Close()
				}
				states[i] = f.waitState(t, approval.StateCancelled, i+1)[0].State
				if i == 0 {
					if tr := f.trail.take(); !slices.Contains(tr, true) {
						t.Errorf("lean trail %v, want the call served by the lean front", tr)
					}
				}
			}
			if states[0] != states[1] {
				t.Errorf("lean %s, sdk %s", states[0], states[1])
			}
			if n := parked.Load(); n != 1 {
				t.Errorf("%d calls parked, want 1", n)
			}
			if n := h.count("big"); n != 0 {
				t.Errorf("the cancelled calls ran %d times", n)
			}
		})
	}
}

// TestMetaToken: the progress token of a _meta as each era's lean path
// takes it (metaToken): alone (2025, only) or beside other members
// (2026-07-28), never with an escaped key or repeated, and only a value
// the front gives back as the SDK path does.
func TestMetaToken(t *testing.T) {
	for _, c := range []struct {
		meta       string
		only, want string // the token taken with only true and false; "" none
	}{
		{`{"progressToken":7}`, `7`, `7`},
		{`{ "progressToken" : "a-b" }`, `"a-b"`, `"a-b"`},
		{`{"progressToken":7,"x":1}`, ``, `7`},
		{`{"x":{"progressToken":1},"progressToken":-3}`, ``, `-3`},
		{`{"progressToken":1,"progressToken":1}`, ``, ``},
		{`{"progress\u0054oken":1}`, ``, ``},
		{`{"progressToken":1,"\u0078":1}`, ``, ``},
		{`{"x":1}`, ``, ``},
		{`{}`, ``, ``},
		{`{"progressToken":1.0}`, ``, ``},
		{`{"progressToken":"\u0041"}`, ``, ``},
		{`{"progressToken":true}`, ``, ``},
		{`{"progressToken":1`, ``, ``},
	} {
		for _, only := range []bool{true, false} {
			want := c.want
			if only {
				want = c.only
			}
			tok, ok := metaToken([]byte(c.meta), only)
			if ok != (want != "") || string(tok) != want {
				t.Errorf("metaToken(%s, only %v) = %s, %v; want %q", c.meta, only, tok, ok, want)
			}
		}
	}
}
