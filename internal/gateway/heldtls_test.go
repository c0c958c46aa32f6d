package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/gate"
	"toolgate/internal/policy"
	"toolgate/internal/store"
	"toolgate/internal/store/sqlstore/sqlitetest"
)

// TestHeldTLSMemory measures what a held call costs the gateway's process
// while it is held over TLS (issue 13; toolgate serve has no TLS
// listener, so e2e's BenchmarkHeldCalls cannot: this is the gateway as a
// library behind a TLS server of its own). It runs only with
// TOOLGATE_BENCH_TLS_N set (N, e.g. 2000): N held 2026-07-28 calls from a
// client process of their own (this test binary, TestHeldTLSClient), each
// on its TLS connection (HTTP/1.1: "h1-parked", and "h1-conn" with
// parking off, the path before branch tlspark32) or as streams of HTTP/2
// connections ("h2", never parked; net/http's client opens a connection
// per 250 streams, the server's default stream limit), and, to compare,
// on plain HTTP/1.1 connections ("plain-parked"). It logs, while all
// N are held and after two collections, per call: heap-B (HeapAlloc),
// stack-B (StackInuse), rss-KB (VmRSS) and goroutines, each the
// difference to before the calls; then approves them all and fails
// unless every call was answered and run once. Run it alone, under the
// perf lock:
//
//	TOOLGATE_BENCH_TLS_N=2000 go test -count 1 -run '^TestHeldTLSMemory$' -v ./internal/gateway/
func TestHeldTLSMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TOOLGATE_BENCH_TLS_N"))
	if n <= 0 {
		t.Skip("a measurement: set TOOLGATE_BENCH_TLS_N")
	}
	modes := []string{"plain-parked", "h1-parked", "h1-conn", "h2"}
	if v := os.Getenv("TOOLGATE_BENCH_TLS_MODES"); v != "" {
		modes = strings.Split(v, ",")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { benchHeldTLS(t, mode, n) })
	}
}

func benchHeldTLS(t *testing.T, mode string, n int) {
	t.Helper()
	opts := &HTTPOptions{DropGrace: time.Hour}
	// The lean fixture's gate with room for n pending calls of one agent.
	db := sqlitetest.Open(t)
	pol := &countingPolicy{Holder: policy.NewHolder(&policy.Policy{
		Default:  policy.Allow,
		Approval: policy.Approval{Timeout: 10 * time.Minute, Mode: policy.ModeHold, Approvals: 1, ValidFor: time.Minute},
		Rules:    []policy.Rule{{Name: "big needs a human", Server: "up", Tools: []string{"big"}, Effect: policy.Approve}},
	})}
	gt := gate.New(db, pol, &gate.Options{MaxPendingPerPrincipal: n + 1})
	f := &leanFixture{gt: gt, db: db, pol: pol, trail: &leanTrail{}, h: newHooks()}
	f.g = newGateway(t, []ServerConfig{{Name: "up", URL: httpUpstream(t, newUpstreamServer(f.h))}}, gt, nil)
	f.g.noPark = mode == "h1-conn" || mode == "h2"
	h, err := f.g.Handler(testAuth, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ts := httptest.NewUnstartedServer(mux)
	ts.EnableHTTP2 = mode == "h2"
	if mode == "plain-parked" {
		ts.Start()
	} else {
		ts.StartTLS()
	}
	defer ts.Close()

	// A first allowed call starts the upstream.
	client := ts.Client()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(modernCallBody("0", "up__echo", `{}`, "")))
	setModernHeaders(req, "up__echo")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	client.CloseIdleConnections()
	<-f.h.args

	heap0, stack0, rss0, g0 := memNow(t)
	var cert []byte
	if c := ts.Certificate(); c != nil {
		cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHeldTLSClient$", "-test.count", "1") //nolint:gosec // this test binary, fixed arguments
	cmd.Env = append(os.Environ(), "TOOLGATE_HELDTLS_URL="+ts.URL, "TOOLGATE_HELDTLS_N="+strconv.Itoa(n),
		"TOOLGATE_HELDTLS_MODE="+mode, "TOOLGATE_HELDTLS_CA="+base64.StdEncoding.EncodeToString(cert))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pending := waitPendingN(t, f, n, func() {
		select {
		case err := <-exited:
			t.Fatalf("the client ended before its calls were held: %v\n%s", err, out.Bytes())
		default:
		}
	})
	hold := time.Since(start)
	// Let the connections' goroutines settle (a parked call's leaves).
	time.Sleep(2 * time.Second)
	heap1, stack1, rss1, g1 := memNow(t)
	t.Logf("%s N=%d: heap-B/call %.0f  stack-B/call %.0f  rss-KB/call %.2f  goroutines/call %.3f  (heap %.1f MB, stack %.1f MB, rss %.1f MB while held)  hold-s %.1f",
		mode, n, float64(heap1-heap0)/float64(n), float64(stack1-stack0)/float64(n), float64(rss1-rss0)/float64(n), float64(g1-g0)/float64(n),
		float64(heap1)/1e6, float64(stack1)/1e6, float64(rss1)/1e3, hold.Seconds())
	for _, r := range pending {
		if _, err := f.gt.Review(t.Context(), r.ID, approval.Principal{ID: "carol", Kind: "human"}, approval.VerdictApprove, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-exited; err != nil {
		t.Fatalf("client: %v\n%s", err, out.Bytes())
	}
	if got := f.h.count("big"); got != n {
		t.Fatalf("big ran %d times, want %d", got, n)
	}
}

// setModernHeaders sets what a 2026-07-28 client sends with a tools/call.
func setModernHeaders(req *http.Request, name string) {
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", modernVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", name)
}

// memNow is the process's HeapAlloc and StackInuse after two collections,
// its VmRSS in KB and its goroutines.
func memNow(t *testing.T) (heap, stack, rssKB int64, goroutines int) {
	t.Helper()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return int64(ms.HeapAlloc), int64(ms.StackInuse), rssKB, runtime.NumGoroutine() //nolint:gosec // far below 2^63
}

// waitPendingN waits until n requests are pending and returns them;
// check fails the test meanwhile (the client ended).
func waitPendingN(t *testing.T, f *leanFixture, n int, check func()) []approval.Request {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var rs []approval.Request
		cursor := ""
		for {
			page, next, err := f.db.ListRequests(t.Context(), store.Filter{State: approval.StatePending, Limit: 1000, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, page...)
			if next == "" {
				break
			}
			cursor = next
		}
		if len(rs) >= n {
			return rs
		}
		check()
		if time.Now().After(deadline) {
			t.Fatalf("%d pending, want %d", len(rs), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHeldTLSClient is BenchmarkHeldTLS's client process (it does nothing
// unless run by it): N held calls over TLS, each answer read and checked.
func TestHeldTLSClient(t *testing.T) {
	base := os.Getenv("TOOLGATE_HELDTLS_URL")
	if base == "" {
		t.Skip("BenchmarkHeldTLS's client process")
	}
	n, _ := strconv.Atoi(os.Getenv("TOOLGATE_HELDTLS_N"))
	mode := os.Getenv("TOOLGATE_HELDTLS_MODE")
	caPEM, err := base64.StdEncoding.DecodeString(os.Getenv("TOOLGATE_HELDTLS_CA"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "example.com", MinVersion: tls.VersionTLS12}
	host := strings.TrimPrefix(strings.TrimPrefix(base, "https://"), "http://")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	fail := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, s)
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true, MaxConnsPerHost: 0}
	for i := range n {
		id := strconv.Itoa(100 + i)
		wg.Go(func() {
			var (
				body []byte
				err  error
			)
			if mode == "h2" {
				req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(modernCallBody(id, "up__big", `{"n":1}`, ""))) //nolint:gosec // the benchmark's own server
				setModernHeaders(req, "up__big")
				resp, rerr := tr.RoundTrip(req)
				if rerr != nil {
					fail(rerr.Error())
					return
				}
				if resp.ProtoMajor != 2 {
					fail("not HTTP/2: " + resp.Proto)
				}
				body, _ = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			} else {
				var c net.Conn
				if mode == "plain-parked" {
					c, err = net.Dial("tcp", host) //nolint:gosec // the benchmark's own server
				} else {
					c, err = tls.Dial("tcp", host, cfg)
				}
				if err != nil {
					fail(err.Error())
					return
				}
				defer func() { _ = c.Close() }()
				if _, err := io.WriteString(c, rawModernRequest(host, id, "up__big", `{"n":1}`)); err != nil {
					fail(err.Error())
					return
				}
				resp, rerr := http.ReadResponse(bufio.NewReader(c), nil)
				if rerr != nil {
					fail(rerr.Error())
					return
				}
				body, _ = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			if !bytes.Contains(body, []byte(`"id":`+id+`,"result"`)) || bytes.Contains(body, []byte(`"isError":true`)) {
				fail(fmt.Sprintf("call %s: %s", id, body))
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d calls failed; first: %s", len(errs), n, errs[0])
	}
}
