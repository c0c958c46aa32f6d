package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchApprovals is how many approvals each sub-benchmark measures per
// iteration, unless TOOLGATE_BENCH_APPROVALS says otherwise.
const benchApprovals = 200

// benchWarmup is how many approvals run before measuring starts (pools,
// sessions and caches warm up).
const benchWarmup = 10

// benchPolicy holds every s__stamp call for approval. The timeout is long:
// nothing in the benchmark waits for it.
const benchPolicy = `
approvals:
  max_pending_per_principal: 1000
policy:
  default: deny
  rules:
    - name: stamp needs approval
      server: s
      tools: [stamp]
      effect: approve
      approval: { timeout: 5m }
`

// BenchmarkCrossInstanceApproval measures how long a call held on gateway
// A takes to be dispatched after an approval is committed through gateway
// B's admin API, both instances on one Postgres database (LISTEN/NOTIFY
// wake-ups). The sub-benchmark approve-on-A measures the same with the
// approval made on A itself, for comparison.
//
// The upstream is an MCP server inside this test process (Streamable HTTP),
// whose tool records time.Now() as soon as its handler starts: "dispatch on
// A". The clock is this process's monotonic clock on both ends, so no
// cross-process clock is involved. Each sample is one approval made while
// exactly one call is held:
//
//   - sent→dispatch: from just before the approve POST to B is sent to the
//     dispatch. The commit happens inside that window, so this is an upper
//     bound of commit→dispatch (it also includes B's request handling).
//   - returned→dispatch: from B's 200 being read to the dispatch; a lower
//     bound, negative when A dispatched before B's answer arrived here.
//
// It needs TOOLGATE_TEST_POSTGRES (a role with CREATEDB). Run it without
// -race (the gateway binaries are built like the test binary):
//
//	TOOLGATE_TEST_POSTGRES=postgres://... go test -run '^$' \
//	    -bench BenchmarkCrossInstanceApproval -benchtime 1x ./e2e/
//
// TOOLGATE_BENCH_APPROVALS changes the number of approvals per iteration
// (default 200). docs/performance.md has the method and the numbers.
func BenchmarkCrossInstanceApproval(b *testing.B) {
	n := benchApprovals
	if v := os.Getenv("TOOLGATE_BENCH_APPROVALS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("TOOLGATE_BENCH_APPROVALS=%q: want a positive integer", v)
		}
	}
	dsn := freshPGDatabase(b, pgTestDSN(b))
	up := startStampUpstream(b)
	cfg := pgGatewayConfig(`
servers:
  s:
    url: ` + q(up.url) + `
` + benchPolicy)
	a := startBenchGateway(b, cfg, dsn)
	gb := startBenchGateway(b, cfg, dsn)
	cs := a.connect(b)

	for _, c := range []struct {
		name     string
		approver *benchGateway
	}{
		{"approve-on-B", gb},
		{"approve-on-A", a},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := range benchWarmup {
				approveOnce(b, cs, up, c.approver, fmt.Sprintf("%s-warmup-%d", c.name, i))
			}
			var sent, returned, api []time.Duration
			b.ResetTimer()
			for iter := range b.N {
				for i := range n {
					s := approveOnce(b, cs, up, c.approver, fmt.Sprintf("%s-%d-%d", c.name, iter, i))
					sent = append(sent, s.sentToDispatch)
					returned = append(returned, s.returnedToDispatch)
					api = append(api, s.api)
				}
			}
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(percentile(sent, 50)), "p50-ms")
			b.ReportMetric(ms(percentile(sent, 99)), "p99-ms")
			b.ReportMetric(ms(percentile(sent, 100)), "max-ms")
			b.ReportMetric(0, "ns/op") // the time of a whole batch says nothing
			b.Logf("%d approvals, one held call at a time", len(sent))
			for _, l := range []struct {
				what string
				d    []time.Duration
			}{
				{"sent→dispatch (upper bound of commit→dispatch)", sent},
				{"returned→dispatch (lower bound)", returned},
				{"approve API round trip", api},
			} {
				b.Logf("%-48s p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms  max %7.2f ms  min %7.2f ms", l.what,
					ms(percentile(l.d, 50)), ms(percentile(l.d, 90)), ms(percentile(l.d, 99)), ms(percentile(l.d, 100)), ms(slices.Min(l.d)))
			}
		})
	}
}

// sample is one measured approval.
type sample struct {
	sentToDispatch     time.Duration // approve POST about to be sent → upstream handler started
	returnedToDispatch time.Duration // approve 200 read → upstream handler started (may be negative)
	api                time.Duration // approve POST round trip
}

// approveOnce holds one s__stamp call on the session cs (gateway A), waits
// until it is pending as seen through approver's API, approves it there, and
// measures when the upstream starts executing it.
func approveOnce(b *testing.B, cs *mcp.ClientSession, up *stampUpstream, approver *benchGateway, key string) sample {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), waitFor(b))
	defer cancel()
	stamped := up.expect(key)
	args := `{"key":` + strconv.Quote(key) + `}`
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "s__stamp", Arguments: json.RawMessage(args)})

	var id string
	for id == "" {
		l, err := tryApprovals(ctx, approver.Admin, "pending")
		if err != nil {
			b.Fatalf("list pending through %s: %v", approver.Admin, err)
		}
		for _, p := range l {
			if strings.Contains(string(p.Arguments), strconv.Quote(key)) {
				id = p.ID
			}
		}
		if id == "" {
			select {
			case r := <-ch:
				b.Fatalf("call %s returned before it was approved: (%v, %q)", key, r.err, resultText(r))
			case <-ctx.Done():
				b.Fatalf("call %s not pending at %s within %v", key, approver.Admin, waitFor(b))
			case <-time.After(2 * time.Millisecond):
			}
		}
	}

	t0 := time.Now()
	r := postReview(ctx, approver.Admin, id, "approve", "")
	t1 := time.Now()
	if r.Err != nil || r.Status != http.StatusOK {
		b.Fatalf("approve %s through %s: status %d, err %v\n%s", id, approver.Admin, r.Status, r.Err, r.Body)
	}
	var td time.Time
	select {
	case td = <-stamped:
	case <-ctx.Done():
		b.Fatalf("call %s approved but not dispatched within %v", key, waitFor(b))
	}
	res := <-ch
	if res.err != nil || res.res.IsError {
		b.Fatalf("call %s: (%v, %q), want its result", key, res.err, resultText(res))
	}
	return sample{sentToDispatch: td.Sub(t0), returnedToDispatch: td.Sub(t1), api: t1.Sub(t0)}
}

// percentile returns the p-th percentile of ds (nearest rank; p 100 is the
// maximum).
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// stampUpstream is an MCP server in the benchmark process, over Streamable
// HTTP, with one tool "stamp" {"key": K} that notes the time its handler
// started for K.
type stampUpstream struct {
	url string

	mu      sync.Mutex
	waiters map[string]chan time.Time // guarded by mu
}

func startStampUpstream(tb testing.TB) *stampUpstream {
	tb.Helper()
	up := &stampUpstream{waiters: map[string]chan time.Time{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "stamp", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "stamp", Description: "notes when it ran", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			now := time.Now()
			var a struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
				return nil, fmt.Errorf("stamp: arguments: %w", err)
			}
			up.mu.Lock()
			ch := up.waiters[a.Key]
			delete(up.waiters, a.Key)
			up.mu.Unlock()
			if ch != nil {
				ch <- now
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stamped"}}}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	up.url = "http://" + ln.Addr().String() + "/mcp"
	return up
}

// expect returns a channel that receives the time the call with key starts
// executing.
func (u *stampUpstream) expect(key string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	u.mu.Lock()
	u.waiters[key] = ch
	u.mu.Unlock()
	return ch
}

// benchGateway is a `toolgate serve` process started for a benchmark (the
// harness's startGateway needs a *testing.T).
type benchGateway struct {
	MCP, Admin string
	tr         *http.Transport
}

// startBenchGateway starts `toolgate serve` with cfgYAML and DATABASE_URL
// dsn, waits for its ready file, and stops it (SIGTERM) on cleanup.
func startBenchGateway(tb testing.TB, cfgYAML, dsn string) *benchGateway {
	tb.Helper()
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	ready := filepath.Join(dir, "ready.json")
	if err := os.WriteFile(cfg, []byte(cfgYAML), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bins.toolgate, "serve", "--config", cfg, "--log-level", "warn", "--ready-file", ready)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "DATABASE_URL="+dsn)
	for k, v := range tokenEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start toolgate: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	g := &benchGateway{tr: http.DefaultTransport.(*http.Transport).Clone()}
	tb.Cleanup(func() {
		g.tr.CloseIdleConnections()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if tb.Failed() {
			tb.Logf("toolgate serve stderr:\n%s", stderr)
		}
	})
	deadline := time.Now().Add(waitFor(tb))
	for {
		if raw, err := os.ReadFile(ready); err == nil {
			var addrs struct{ MCP, Admin string }
			if err := json.Unmarshal(raw, &addrs); err != nil {
				tb.Fatalf("ready file: %v", err)
			}
			g.MCP, g.Admin = addrs.MCP, addrs.Admin
			return g
		} else if !errors.Is(err, os.ErrNotExist) {
			tb.Fatal(err)
		}
		select {
		case <-exited:
			tb.Fatalf("toolgate exited before it was ready:\n%s", stderr)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("toolgate not ready after %v:\n%s", waitFor(tb), stderr)
		}
		time.Sleep(pollEvery)
	}
}

// connect opens an MCP session to g as the test agent, closed on cleanup.
func (g *benchGateway) connect(tb testing.TB) *mcp.ClientSession {
	tb.Helper()
	return connectMCP(tb, "bench-agent", g.MCP, &bearer{token: agentToken, base: g.tr}, nil)
}
