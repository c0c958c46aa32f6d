package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
)

// testWait bounds how long a test waits for an event before failing.
const testWait = 30 * time.Second

// nearDeadline is when a wait of t that should be over at once gives up,
// failing with its own message rather than hanging until the test binary
// is killed: a tenth of the time left before the test's deadline (testWait
// from now when it has none).
func nearDeadline(t *testing.T) time.Time {
	t.Helper()
	d, ok := t.Deadline()
	if !ok {
		return time.Now().Add(testWait)
	}
	return d.Add(-time.Until(d) / 10)
}

// envUpstream switches the test binary into a stdio upstream server
// (see TestMain): the stdio tests run the test binary itself as the child.
const envUpstream = "TOOLGATE_GATEWAY_TEST_UPSTREAM"

func TestMain(m *testing.M) {
	switch os.Getenv(envUpstream) {
	case "stdio-features":
		if err := newFeatureServer("stdio", nil).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "stdio-raw":
		if err := runRawUpstream(); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "stdio-roots-at-start":
		if err := rootsAtStartServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "stdio-lingering":
		if err := runLingeringUpstream(); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "stdio-stall":
		if err := runStallUpstream(); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "stdio":
		s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, nil)
		addUpstreamTools(s, nil)
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hooks lets a test observe and steer an in-process upstream. Nil channels
// are not used.
type hooks struct {
	// calls counts tool executions, by tool name.
	mu    sync.Mutex
	calls map[string]int
	args  chan json.RawMessage // receives echo's raw arguments
	// started receives the name of a blocking tool when it starts; ended
	// receives context.Cause of its ctx when it stops.
	started chan string
	ended   chan error
	release chan struct{} // the progress tool returns when it is closed
}

func newHooks() *hooks {
	return &hooks{
		calls:   map[string]int{},
		args:    make(chan json.RawMessage, 16),
		started: make(chan string, 16),
		ended:   make(chan error, 16),
		release: make(chan struct{}),
	}
}

func (h *hooks) count(tool string) int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[tool]
}

func (h *hooks) record(tool string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.calls[tool]++
	h.mu.Unlock()
}

var objectSchema = map[string]any{"type": "object"}

// numbersStructured and numbersMeta are what the numbers tool returns, as
// raw JSON; the SDK's float64 decoding would change every one of them.
// With {"huge":true} the tool returns numbersHuge, which a go-sdk client
// cannot decode at all (1e400 overflows float64).
const (
	numbersStructured = `{"max":9223372036854775807,"u64":18446744073709551615,"dec":0.1000000000000000055511151231257827}`
	numbersHuge       = `{"max":9223372036854775807,"huge":1e400}`
	numbersMeta       = `12345678901234567890`
)

// addUpstreamTools adds the test tools to s. h may be nil (stdio child).
func addUpstreamTools(s *mcp.Server, h *hooks) {
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "returns its raw arguments", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h.record("echo")
			if h != nil {
				h.args <- append(json.RawMessage(nil), req.Params.Arguments...)
			}
			return text(string(req.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "numbers", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h.record("numbers")
			var a struct{ Huge bool }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			sc := numbersStructured
			if a.Huge {
				sc = numbersHuge
			}
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "numbers"}},
				StructuredContent: json.RawMessage(sc),
				Meta: mcp.Meta{
					"big":                 json.RawMessage(numbersMeta),
					mcp.MetaKeyServerInfo: map[string]any{"name": "test-upstream"},
				},
			}, nil
		})
	s.AddTool(&mcp.Tool{Name: "big", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h.record("big")
			var a struct{ N int }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return text(bigText(a.N)), nil
		})
	s.AddTool(&mcp.Tool{Name: "sleep", Description: "blocks until cancelled", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h.record("sleep")
			if h != nil {
				h.started <- "sleep"
			}
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "sleeping"})
			}
			<-ctx.Done()
			if h != nil {
				h.ended <- context.Cause(ctx)
			}
			return nil, context.Cause(ctx)
		})
	s.AddTool(&mcp.Tool{Name: "progress", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			if tok != nil {
				for _, v := range []float64{0, 1} {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: v, Total: 2, Message: "working"})
				}
			}
			if h != nil {
				select {
				case <-h.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return text(fmt.Sprintf("token %v", tok)), nil
		})
	s.AddTool(&mcp.Tool{Name: "burst", Description: "sends n progress notifications, then returns at once", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ N int }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			tok := req.Params.GetProgressToken()
			for i := 1; i <= a.N && tok != nil; i++ {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(a.N), Message: fmt.Sprintf("step %d", i)})
				if err != nil {
					return nil, err
				}
			}
			return text("done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "fifo", Description: "returns what it reads from the named pipe at path", InputSchema: objectSchema},
		readFIFO)
	addProgressForgeTools(s)
	// stdio-only behaviours of the child process.
	s.AddTool(&mcp.Tool{Name: "garbage", Description: "writes a line that is not JSON-RPC to stdout", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_, _ = os.Stdout.WriteString("this line is not JSON-RPC\n")
			_, _ = os.Stdout.WriteString(`{"jsonrpc":"2.0","id":{"bad":1},"result":{}}` + "\n")
			return text("done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "noisy", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			line := strings.Repeat("n", 1023) + "\n"
			for range 256 { // 256 KiB, four times a pipe buffer
				_, _ = os.Stderr.WriteString(line)
			}
			return text("done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "die", InputSchema: objectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
}

// bigText is n bytes of text with no newline.
func bigText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}

// httpUpstream serves s over Streamable HTTP and returns its URL.
func httpUpstream(t *testing.T, s *mcp.Server) string {
	t.Helper()
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// newUpstreamServer returns an in-process upstream with the test tools.
func newUpstreamServer(h *hooks) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, nil)
	addUpstreamTools(s, h)
	return s
}

// stdioServer configures the test binary as a stdio upstream.
func stdioServer(name string) ServerConfig {
	return ServerConfig{Name: name, Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{envUpstream: "stdio"}}
}

// gatekeeperFunc is a hand-written fake Gatekeeper.
type gatekeeperFunc func(ctx context.Context, c gate.Call) gate.Admission

func (f gatekeeperFunc) Admit(ctx context.Context, c gate.Call) gate.Admission { return f(ctx, c) }

// allowAll admits every call; the lean front serves its plain calls (it
// decides them without holding, as the real gate does for an allowed call).
func allowAll() Gatekeeper { return allowAllGK{} }

type allowAllGK struct{}

func (allowAllGK) Admit(context.Context, gate.Call) gate.Admission {
	return gate.Admission{Allowed: true}
}

func (allowAllGK) AdmitUnlessHeld(_ context.Context, _ *gate.Call, adm *gate.Admission) *gate.HandOff {
	*adm = gate.Admission{Allowed: true}
	return nil
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return l.buf.Write(p)
}

// waitFor waits until the log contains s.
func (l *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	l.waitCount(t, s, 1)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newGateway creates a gateway and closes it when the test ends.
func newGateway(t *testing.T, servers []ServerConfig, gk Gatekeeper, opts *Options) *Gateway {
	t.Helper()
	g, err := New(t.Context(), servers, gk, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

const (
	aliceToken = "tok-alice"
	bobToken   = "tok-bob"
)

func testAuth(token string) (approval.Principal, bool) {
	switch token {
	case aliceToken:
		return approval.Principal{ID: "alice", Kind: "agent"}, true
	case bobToken:
		return approval.Principal{ID: "bob", Kind: "agent"}, true
	}
	return approval.Principal{}, false
}

// serveHTTP serves g's agent handler and returns the base URL.
func serveHTTP(t *testing.T, g *Gateway, opts *HTTPOptions) string {
	t.Helper()
	h, err := g.Handler(testAuth, opts)
	if err != nil {
		t.Fatalf("Handler: %v", err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// bearer adds a bearer token to every request, then calls next.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// tee copies every response body read through it into buf and calls
// onRead after each read.
type tee struct {
	next   http.RoundTripper
	mu     sync.Mutex
	buf    bytes.Buffer
	onRead func(all string)
}

func (t *tee) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		resp.Body = &teeBody{ReadCloser: resp.Body, t: t}
	}
	return resp, err
}

func (t *tee) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

type teeBody struct {
	io.ReadCloser
	t *tee
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.t.mu.Lock()
	b.t.buf.Write(p[:n])
	all := b.t.buf.String()
	on := b.t.onRead
	b.t.mu.Unlock()
	if on != nil && n > 0 {
		on(all)
	}
	return n, err
}

// clientOptions collects progress and list-changed notifications.
type clientEvents struct {
	progress    chan *mcp.ProgressNotificationParams
	listChanged chan struct{}
}

func newClientEvents() *clientEvents {
	return &clientEvents{progress: make(chan *mcp.ProgressNotificationParams, 64), listChanged: make(chan struct{}, 16)}
}

func (e *clientEvents) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { e.progress <- r.Params },
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { e.listChanged <- struct{}{} },
	}
}

// connectHTTP connects an agent (the go-sdk client) to the gateway at base.
// rt, if not nil, wraps the client's transport.
func connectHTTP(t *testing.T, base, token string, events *clientEvents, wrap func(http.RoundTripper) http.RoundTripper) *mcp.ClientSession {
	t.Helper()
	var rt http.RoundTripper = bearer{token: token, next: http.DefaultTransport}
	if wrap != nil {
		rt = wrap(rt)
	}
	var opts *mcp.ClientOptions
	if events != nil {
		opts = events.options()
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: rt}}, era2025)
	if err != nil {
		t.Fatalf("connect agent: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// textOf returns the text of the first content item of r.
func textOf(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) == 0 {
		t.Fatalf("result has no content: %+v", r)
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", r.Content[0])
	}
	return tc.Text
}

// waitUpstream waits until upstream name is connected with a session other
// than not (nil: any session).
func waitUpstream(t *testing.T, g *Gateway, name string, not *upConn) *upConn {
	t.Helper()
	u := g.ups[name]
	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	for {
		u.mu.Lock()
		c, ch := u.conn, u.changed
		u.mu.Unlock()
		if c != nil && c != not {
			return c
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("upstream %s did not reconnect: %v", name, u.ready())
		}
	}
}

// counter is a concurrency-safe counter for fakes.
type counter struct{ n atomic.Int64 }

func (c *counter) inc()       { c.n.Add(1) }
func (c *counter) get() int64 { return c.n.Load() }

// era2025 pins a go-sdk client to MCP 2025-11-25 (initialize and a protocol
// session); the go-sdk client tries 2026-07-28 first, which the gateway
// serves statelessly. Tests of 2025-era behaviour pin it.
var era2025 = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// waitState waits until upstream name is in state and returns its health.
func waitState(t *testing.T, g *Gateway, name, state string) UpstreamHealth {
	t.Helper()
	u := g.ups[name]
	ctx, cancel := context.WithTimeout(t.Context(), testWait)
	defer cancel()
	for {
		u.mu.Lock()
		ch := u.changed
		u.mu.Unlock()
		if h := u.health(); h.State == state {
			return h
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("upstream %s never became %s: %+v", name, state, u.health())
		}
	}
}

// count returns how many times s occurs in the log.
func (l *logBuffer) count(s string) int {
	return strings.Count(l.String(), s)
}

// waitCount waits until the log contains s at least n times.
func (l *logBuffer) waitCount(t *testing.T, s string, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		if strings.Count(l.buf.String(), s) >= n {
			l.mu.Unlock()
			return
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(testWait):
			t.Fatalf("log never contained %q %d times:\n%s", s, n, l.String())
		}
	}
}

// restartable serves an MCP server over Streamable HTTP on one loopback
// address that can be stopped (connections refused) and started again.
type restartable struct {
	t    *testing.T
	s    *mcp.Server
	addr string
	srv  *http.Server
	done chan struct{} // closed when the current Serve returned
}

func startRestartable(t *testing.T, s *mcp.Server) *restartable {
	t.Helper()
	r := &restartable{t: t, s: s, addr: "127.0.0.1:0"}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) url() string { return "http://" + r.addr + "/mcp" }

// start serves on r.addr (the same port after a stop).
func (r *restartable) start() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("listen %s: %v", r.addr, err)
	}
	r.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.s }, nil))
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: testWait}
	r.done = make(chan struct{})
	srv, done := r.srv, r.done
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
}

// stop closes the listener and every connection, and waits for Serve.
func (r *restartable) stop() {
	if r.srv == nil {
		return
	}
	_ = r.srv.Close()
	<-r.done
	r.srv = nil
}

// readFIFO is a tool that answers what it reads from the named pipe at its
// argument path: it blocks until the test opens the pipe for writing, and
// answers once the test closes it.
func readFIFO(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct{ Path string }
	_ = json.Unmarshal(req.Params.Arguments, &a)
	f, err := os.Open(a.Path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
}

// tcpPair is a connected pair of loopback TCP connections: the server's
// end (as a parked call's) and the client's.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.Close()
		_ = server.Close()
	})
	return server, client
}
