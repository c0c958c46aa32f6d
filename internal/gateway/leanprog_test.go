package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// newLeanProgFixture is a gateway over the real gate (keep-alives every
// every) and a SQLite store, with one upstream up whose tools big and
// progress need a human; everything else is allowed.
func newLeanProgFixture(t *testing.T, up ServerConfig, h *hooks, every time.Duration, opts *HTTPOptions) *leanFixture {
	t.Helper()
	db := sqlitetest.Open(t)
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "needs a human", Server: "up", Tools: []string{"big", "progress"}, Effect: policy.Approve}},
	})}
	gt := gate.New(db, pol, &gate.Options{KeepAlive: every})
	f := &leanFixture{gt: gt, db: db, pol: pol, trail: &leanTrail{}, h: h}
	f.g = newGateway(t, []ServerConfig{up}, gt, nil)
	f.g.leanHook = f.trail.hook
	f.base = serveHTTP(t, f.g, opts)
	return f
}

// approvalWords normalises what a keep-alive's message says of its request
// (its id and expiry), which differ from run to run.
var approvalWords = regexp.MustCompile(`approval [^ ]+ |expires at [^ ]+$`)

// normalised is seen with the approval's id and expiry in its messages
// replaced.
func normalised(seen []progressSeen) []progressSeen {
	out := make([]progressSeen, len(seen))
	for i, s := range seen {
		s.Message = approvalWords.ReplaceAllString(s.Message, "<approval> ")
		out[i] = s
	}
	return out
}

// TestLeanHeldCallWithTokenAsTheSDKPath (issue 13): a held call with a
// progress token is served by the lean front (one POST, one policy
// evaluation) and its agent sees what the SDK path sends it: the first
// keep-alive at once, under its token, naming the approval; once approved
// the upstream's progress continues past the keep-alives, then the result.
func TestLeanHeldCallWithTokenAsTheSDKPath(t *testing.T) {
	var seen [2][]progressSeen
	for i, lean := range []bool{true, false} {
		h := newHooks()
		f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, time.Hour,
			&HTTPOptions{DisableLeanCalls: !lean, DropGrace: time.Hour})
		ev := newClientEvents()
		cs := connectHTTP(t, f.base, aliceToken, ev, nil)
		if lean {
			waitInitialized(t, f.g, cs.ID())
		}
		f.trail.take()
		before := f.pol.n.Load()

		params := &mcp.CallToolParams{Name: "up__progress"}
		params.SetProgressToken(7)
		done := make(chan callResult, 1)
		go func() {
			res, err := cs.CallTool(t.Context(), params)
			done <- callResult{res, err}
		}()
		got := receive(t, ev.progress, 1)
		id := string(f.waitState(t, approval.StatePending, 1)[0].ID)
		if !strings.Contains(got[0].Message, "waiting for approval "+id) {
			t.Errorf("lean %v: first keep-alive %q, want it to name approval %s", lean, got[0].Message, id)
		}
		f.approveNext(t)
		got = append(got, receive(t, ev.progress, 2)...)
		close(h.release)
		r := <-done
		if r.err != nil || r.res.IsError {
			t.Fatalf("lean %v: %+v %v", lean, r.res, r.err)
		}
		seen[i] = normalised(got)
		if lean {
			f.servedOnce(t, "held with a token", before)
		} else if tr := f.trail.take(); len(tr) != 0 {
			t.Errorf("lean off: trail %v", tr)
		}
	}
	want := []progressSeen{
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

// TestLeanHeldCallKeepAlivesEveryBeat: a held call with a progress token
// on the lean front gets a keep-alive at every beat of the gate's clock,
// under its token, values 1, 2, 3… and the same message, and its result
// once approved.
func TestLeanHeldCallKeepAlivesEveryBeat(t *testing.T) {
	verifyNoLeaks(t)
	h := newHooks()
	close(h.release)
	f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(h))}, h, 20*time.Millisecond, &HTTPOptions{DropGrace: time.Hour})
	ev := newClientEvents()
	cs := connectHTTP(t, f.base, aliceToken, ev, nil)
	waitInitialized(t, f.g, cs.ID())
	f.trail.take()
	before := f.pol.n.Load()

	params := &mcp.CallToolParams{Name: "up__big", Arguments: map[string]any{"n": 2}}
	params.SetProgressToken("agent-tok")
	done := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), params)
		done <- callResult{res, err}
	}()
	got := receive(t, ev.progress, 4)
	for i, p := range got {
		if p.Token != "agent-tok" || p.Progress != float64(i+1) || p.Message != got[0].Message || !strings.HasPrefix(p.Message, "waiting for approval ") {
			t.Errorf("keep-alive %d: %+v, want token agent-tok, progress %d and the first one's message", i, p, i+1)
		}
	}
	f.approveNext(t)
	r := <-done
	if r.err != nil || r.res.IsError || textOf(t, r.res) != bigText(2) {
		t.Fatalf("approved: %+v %v", r.res, r.err)
	}
	f.servedOnce(t, "held with keep-alives", before)
}

// TestLeanProgressTokenBytes: the keep-alive of a held call carries the
// agent's token as the agent wrote it, in the message the SDK path writes
// (the same bytes but for the approval's id and expiry), on both paths.
func TestLeanProgressTokenBytes(t *testing.T) {
	for _, lean := range []bool{true, false} {
		f := newLeanProgFixture(t, ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}, nil, time.Hour,
			&HTTPOptions{DisableLeanCalls: !lean, DropGrace: time.Hour})
		cs := connectHTTP(t, f.base, aliceToken, nil, nil)
		if lean {
			waitInitialized(t, f.g, cs.ID())
		}
		sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
		for _, tok := range []string{`"t<&>/~"`, `12345`, `-9007199254740991`, `0`} {
			f.trail.take()
			body := `{"jsonrpc":"2.0","id":"h-1","method":"tools/call","params":{"_meta":{"progressToken":` + tok + `},"name":"up__big","arguments":{"n":2}}}`
			resp := sessionRequest(t, http.MethodPost, f.base, aliceToken, sid, version, strings.NewReader(body))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("lean %v, token %s: %d %v, want 200 and an event stream", lean, tok, resp.StatusCode, resp.Header)
			}
			sc := bufio.NewScanner(resp.Body)
			var data []string
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					data = append(data, d)
					if len(data) == 1 {
						f.approveNext(t)
					}
				}
			}
			_ = resp.Body.Close()
			want := regexp.MustCompile(`^\{"jsonrpc":"2.0","method":"notifications/progress","params":\{"progressToken":` +
				regexp.QuoteMeta(tok) + `,"message":"waiting for approval (?:[^"\\]|\\.)+","progress":1\}\}$`)
			if len(data) != 2 || !want.MatchString(data[0]) || !strings.HasPrefix(data[1], `{"jsonrpc":"2.0","id":"h-1","result":`) {
				t.Errorf("lean %v, token %s: data lines\n%s\nwant the keep-alive matching %s, then the result", lean, tok, strings.Join(data, "\n"), want)
			}
			if tr := f.trail.take(); lean && (len(tr) != 1 || !tr[0]) {
				t.Errorf("token %s: trail %v, want [true]", tok, tr)
			}
		}
	}
}

// TestLeanAllowedCallWithTokenRelaysProgress: an allowed call with a
// progress token is served by the lean front on a stdio and an HTTP
// upstream (the raw paths: the upstream gets a gateway token), and every
// progress notification the upstream sent before its result reaches the
// agent under its own token, in order, before the result.
func TestLeanAllowedCallWithTokenRelaysProgress(t *testing.T) {
	const n = 5
	for _, tt := range []struct {
		name string
		up   func(t *testing.T) ServerConfig
	}{
		{"http", func(t *testing.T) ServerConfig {
			t.Helper()
			return ServerConfig{Name: "up", URL: httpUpstream(t, newUpstreamServer(nil))}
		}},
		{"stdio", func(*testing.T) ServerConfig { return stdioServer("up") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newLeanProgFixture(t, tt.up(t), nil, time.Hour, nil)
			waitUpstream(t, f.g, "up", nil)
			capture := &tee{}
			cs := connectHTTP(t, f.base, aliceToken, nil, func(rt http.RoundTripper) http.RoundTripper {
				capture.next = rt
				return capture
			})
			waitInitialized(t, f.g, cs.ID())
			var want []progressSeen
			for i := 1; i <= n; i++ {
				want = append(want, progressSeen{Token: float64(42), Progress: float64(i), Total: n, Message: fmt.Sprintf("step %d", i)})
			}
			for call := range 3 {
				f.trail.take()
				before := len(capture.String())
				params := &mcp.CallToolParams{Name: "up__burst", Arguments: map[string]any{"n": n}}
				params.SetProgressToken(42)
				res, err := cs.CallTool(t.Context(), params)
				if err != nil || textOf(t, res) != "done" {
					t.Fatalf("call %d: %+v %v", call, res, err)
				}
				wire := capture.String()[before:]
				if diff := cmp.Diff(want, wireProgress(t, wire)); diff != "" {
					t.Errorf("call %d: progress before the result (-want +got):\n%s", call, diff)
				}
				if !strings.Contains(wire, `"progressToken":42,`) {
					t.Errorf("call %d: the agent's token 42 not on the wire as sent:\n%s", call, wire)
				}
				if tr := f.trail.take(); len(tr) != 1 || !tr[0] {
					t.Errorf("call %d: trail %v, want [true] (served by the lean front)", call, tr)
				}
			}
		})
	}
}

// failingWriter is a ResponseWriter whose writes fail.
type failingWriter struct {
	httptest.ResponseRecorder
	writes int
}

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("connection reset")
}

// TestLeanProgressWriteFailsClientGone: a keep-alive whose write fails
// tells the call its client is gone (once) and writes nothing after.
func TestLeanProgressWriteFailsClientGone(t *testing.T) {
	w := &failingWriter{}
	var gone int
	p := newLeanProgress(t.Context(), w, []byte(`"t"`), slog.New(slog.DiscardHandler), func() { gone++ })
	for range 3 {
		p.keepAlive(t.Context(), "")
	}
	if gone != 1 || w.writes != 1 {
		t.Errorf("gone %d times after %d writes, want once after 1", gone, w.writes)
	}
}

// sdkPathMetaKey is a _meta member that keeps a tools/call on the SDK
// path (the lean front takes a lone progress token since branch
// leanprog, which tests used to reach the SDK path); the SDK path ignores
// it.
const sdkPathMetaKey = "toolgate-test/sdk-path"

// sdkPathToken gives p progress token tok and sdkPathMetaKey: an SDK-path
// call with a progress token.
func sdkPathToken(p *mcp.CallToolParams, tok any) {
	if p.Meta == nil {
		p.Meta = mcp.Meta{}
	}
	p.Meta[sdkPathMetaKey] = true
	p.SetProgressToken(tok)
}
