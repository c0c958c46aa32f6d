// Command heldload holds many tool calls at once through toolgate, for the
// end-to-end tests and the benchmark of held-call scale: it opens a few
// MCP client sessions to a Streamable HTTP endpoint (bearer token from
// $TESTCLIENT_TOKEN, or one of the comma-separated $TESTCLIENT_TOKENS per
// session in turn, so the calls come from several principals) and sends n
// calls of one tool concurrently, call i with the arguments
// {"tag":TAG,"i":i}. As each call returns it prints one
// line:
//
//	<i> ok <text>        a result
//	<i> isError <text>   a tool error result (a refusal, a timeout…)
//	<i> error <err>      a transport or JSON-RPC error
//
// and it exits 0 once every call returned (2 on a usage error). It runs as
// a separate process, built without the race detector, so that thousands
// of held calls do not hit the detector's goroutine limit in the test.
//
// With -progress FILE every call sends a progress token (its i), so that
// the gateway sends it keep-alives while it is held; heldload notes when
// each progress notification arrived and, before it exits, writes one
// line per notification to FILE: "<i> <unix nanoseconds>", in the order
// they arrived (docs/performance.md, "The keep-alive beat under 10,000
// held calls").
//
// Each connection's TCP keep-alive idle time is drawn from [15 s, 30 s),
// so that the n connections of one burst do not probe in step
// (HELDLOAD_KEEPALIVE=go: Go's default, 15 s for every connection).
//
//	heldload -mcp URL -tool NAME -n N [-sessions S] [-tag TAG] [-progress FILE]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	endpoint := flag.String("mcp", "", "Streamable HTTP endpoint, http://host:port/mcp")
	tool := flag.String("tool", "", "name of the tool to call")
	n := flag.Int("n", 0, "number of concurrent calls")
	sessions := flag.Int("sessions", 0, "MCP client sessions to spread the calls over (default n/100, at least 1)")
	tag := flag.String("tag", "load", "the tag in every call's arguments")
	protocol := flag.String("protocol", "", "MCP revision to ask for (default: the go-sdk client's newest, 2026-07-28)")
	progressFile := flag.String("progress", "", "send a progress token with each call and write when each progress notification arrived to this file")
	closeConns := flag.Bool("close", false, "send every request with \"Connection: close\" (a 2025-era held call is then held on its connection's goroutine, not parked)")
	flag.Parse()
	if *endpoint == "" || *tool == "" || *n <= 0 || *sessions < 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: heldload -mcp URL -tool NAME -n N [-sessions S] [-tag TAG] [-protocol VERSION] [-progress FILE]")
		return 2
	}
	if *sessions == 0 {
		*sessions = max(1, *n/100)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *n, MaxConnsPerHost: 0}
	if os.Getenv("HELDLOAD_KEEPALIVE") != "go" {
		// Each connection's TCP keep-alive idle time drawn from [15 s, 30 s)
		// (as toolgate's agent listener does), instead of Go's 15 s for all:
		// agents on many hosts do not probe in step, one process that
		// connected n times in a burst does, and on loopback its probes,
		// over a thousand in one timer tick, overflow the kernel's receive
		// backlog: the drops were the harness's own (docs/performance.md,
		// "Keep-alive probes in step", "Postgres under 10,000 held calls:
		// the agents' probes in step"). HELDLOAD_KEEPALIVE=go keeps Go's
		// default, every connection in step.
		tr.DialContext = spreadDial
	}
	tokens := strings.Split(os.Getenv("TESTCLIENT_TOKENS"), ",")
	if tokens[0] == "" {
		tokens = []string{os.Getenv("TESTCLIENT_TOKEN")}
	}
	*sessions = max(*sessions, len(tokens))
	var arrivals *progressLog
	var copts *mcp.ClientOptions
	if *progressFile != "" {
		arrivals = &progressLog{}
		copts = &mcp.ClientOptions{ProgressNotificationHandler: arrivals.note}
	}
	css := make([]*mcp.ClientSession, *sessions)
	for i := range css {
		hc := &http.Client{Transport: &bearer{token: tokens[i%len(tokens)], base: tr, close: *closeConns}}
		c := mcp.NewClient(&mcp.Implementation{Name: "heldload", Version: "1"}, copts)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: *endpoint, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: *protocol})
		if err != nil {
			fmt.Fprintln(os.Stderr, "heldload: connect:", err)
			return 1
		}
		defer func() { _ = cs.Close() }()
		css[i] = cs
	}
	var (
		mu  sync.Mutex
		out = bufio.NewWriter(os.Stdout)
		wg  sync.WaitGroup
	)
	line := func(i int, word, text string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(out, "%d %s %s\n", i, word, strings.ReplaceAll(text, "\n", " ")) // a failed write shows at Flush
	}
	for i := range *n {
		wg.Go(func() {
			args, _ := json.Marshal(map[string]any{"tag": *tag, "i": i})
			params := &mcp.CallToolParams{Name: *tool, Arguments: json.RawMessage(args)}
			if arrivals != nil {
				params.SetProgressToken(i)
			}
			res, err := css[i%len(css)].CallTool(ctx, params)
			if err != nil {
				line(i, "error", err.Error())
				return
			}
			var b strings.Builder
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					b.WriteString(tc.Text)
				}
			}
			word := "ok"
			if res.IsError {
				word = "isError"
			}
			line(i, word, b.String())
		})
	}
	wg.Wait()
	if arrivals != nil {
		if err := arrivals.write(*progressFile); err != nil {
			fmt.Fprintln(os.Stderr, "heldload:", err)
			return 1
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "heldload:", err)
		return 1
	}
	return 0
}

// progressLog notes when each progress notification arrived, by the
// call's progress token (its i), in memory until write.
type progressLog struct {
	mu   sync.Mutex
	call []int64 // guarded by mu: the call's i (-1: a token heldload did not send)
	at   []int64 // guarded by mu: unix nanoseconds
}

func (p *progressLog) note(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	at := time.Now().UnixNano()
	i := int64(-1)
	switch t := req.Params.ProgressToken.(type) {
	case float64:
		i = int64(t)
	case int:
		i = int64(t)
	case int64:
		i = t
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.call = append(p.call, i)
	p.at = append(p.at, at)
}

func (p *progressLog) write(file string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.Create(file) //nolint:gosec // the file the caller named
	if err != nil {
		return fmt.Errorf("progress log: %w", err)
	}
	w := bufio.NewWriter(f)
	for k := range p.call {
		_, _ = fmt.Fprintf(w, "%d %d\n", p.call[k], p.at[k]) // a failed write shows at Flush
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("progress log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("progress log: %w", err)
	}
	return nil
}

// bearer adds the Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
	close bool // "Connection: close" on every request
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	r.Close = r.Close || b.close
	return b.base.RoundTrip(r)
}

// spreadDial dials with TCP keep-alive whose idle time is drawn per
// connection from [15 s, 30 s) in whole seconds; unanswered probes every
// 15 s, nine of them close the connection (Go's defaults otherwise).
func spreadDial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{KeepAlive: -1}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		idle := 15*time.Second + rand.N[time.Duration](15)*time.Second
		if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: idle, Interval: 15 * time.Second, Count: 9}); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}
