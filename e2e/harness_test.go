package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitFor bounds every wait on another process: startup, a held call
// appearing, a record line. Reaching it fails the test; it is never used to
// assert how long something took. It scales with the test binary's
// -timeout, through the deadline of x (a *testing.T, or a context with a
// deadline): an eighth of the time left, so that CI, which gives the suite
// a longer -timeout on a loaded machine, waits longer; at least waitMin
// (the fixed bound of old), at most waitMax. Without a deadline (-timeout
// 0, a benchmark, a context without one) it is waitMin.
func waitFor(x any) time.Duration {
	d, ok := x.(interface{ Deadline() (time.Time, bool) })
	if !ok {
		return waitMin
	}
	end, ok := d.Deadline()
	if !ok {
		return waitMin
	}
	return min(max(time.Until(end)/8, waitMin), waitMax)
}

// waitMin and waitMax bound waitFor.
const (
	waitMin = 30 * time.Second
	waitMax = 5 * time.Minute
)

// pollEvery is the interval of the bounded polls across processes.
const pollEvery = 20 * time.Millisecond

// Tokens of the principals every test config declares (through token_env,
// set in the gateway's environment by startGateway).
const (
	agentID       = "agent-1"
	agentToken    = "e2e-agent-token-4f1c"
	approverID    = "bob"
	approverToken = "e2e-approver-token-9a7d"
)

// tokenEnv is the environment that gives the config's token_env entries
// their values.
var tokenEnv = map[string]string{
	"E2E_AGENT_TOKEN":    agentToken,
	"E2E_APPROVER_TOKEN": approverToken,
}

// principalsYAML declares one agent and one approver. The agent acts for
// nobody, so bob may review its calls.
const principalsYAML = `
agents:
  - id: ` + agentID + `
    token_env: E2E_AGENT_TOKEN
approvers:
  - id: ` + approverID + `
    token_env: E2E_APPROVER_TOKEN
    roles: [approver]
`

// q quotes s as a YAML (JSON) double-quoted scalar, for paths in configs.
func q(s string) string { return strconv.Quote(s) }

// gatewayConfig returns a config with HTTP listeners on free loopback
// ports, SQLite at db, the standard principals, and body (servers,
// approvals, policy) appended.
func gatewayConfig(db, body string) string {
	return `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: sqlite
  path: ` + q(db) + `
` + principalsYAML + body
}

// upstreamServer returns a servers: section with the testupstream program
// as server "t", recording its executions in record. Upstreams get only a
// minimal environment, so GORACE is passed on by name.
func upstreamServer(record string) string {
	return `
servers:
  t:
    command: ` + q(bins.upstream) + `
    args: ["-record", ` + q(record) + `]
    env_passthrough: [GORACE]   # its short race-detector exit delay (childEnv)
    call_timeout: 60s
`
}

// syncBuffer is a bytes.Buffer safe for concurrent use: a child process
// writes it while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Len is the number of bytes written so far.
func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gw is one running `toolgate serve` process.
type gw struct {
	MCP   string // agent endpoint, http://127.0.0.1:PORT/mcp
	Admin string // admin API base URL, http://127.0.0.1:PORT
	Dir   string // its working directory (holds the config)

	cmd     *exec.Cmd
	stderr  *syncBuffer
	exited  chan struct{}   // closed when the process has exited
	waitErr error           // the process's exit error; read once exited is closed
	tr      *http.Transport // the agent clients' connections to it
	exit    exitPolicy      // what its cleanup accepts of its exit
	killed  atomic.Bool     // kill sent it SIGKILL: its cleanup accepts that exit
}

// An exitPolicy is what a started gateway's cleanup accepts of its exit.
type exitPolicy int

const (
	// exitClean: status 0 on the cleanup's SIGTERM, unless the test killed
	// it with SIGKILL (gw.kill).
	exitClean exitPolicy = iota
	// exitAny: any exit; the test checks it itself (gw.exitErr).
	exitAny
)

// kill sends g's process SIGKILL, waits until it is gone, and drops the
// agent clients' idle connections to it; its cleanup then accepts that
// exit.
func (g *gw) kill(t *testing.T) {
	t.Helper()
	g.killed.Store(true)
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 toolgate: %v", err)
	}
	<-g.exited
	g.tr.CloseIdleConnections()
}

// term sends g's process SIGTERM and waits until it has exited, failing
// the test (with when, and its stderr) if that takes longer than waitFor;
// it returns how long the exit took.
func (g *gw) term(t *testing.T, when string) time.Duration {
	t.Helper()
	start := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.exited:
	case <-time.After(waitFor(t)):
		t.Fatalf("toolgate serve did not exit within %v of SIGTERM %s\nstderr:\n%s", waitFor(t), when, g.stderr)
	}
	return time.Since(start).Round(time.Millisecond)
}

// exitErr waits until g's process has exited and returns its exit error.
func (g *gw) exitErr() error {
	<-g.exited
	return g.waitErr
}

// childEnv returns the environment for child processes: this process's,
// plus, unless GORACE is set, a short race-detector exit delay (the default
// 1s sleep at exit of a -race binary would add a second to every CLI run
// and gateway stop, and the upstream child's second to that).
func childEnv() []string {
	env := os.Environ()
	if os.Getenv("GORACE") == "" {
		env = append(env, "GORACE=atexit_sleep_ms=50")
	}
	return env
}

// gatewayCommand writes cfgYAML into a fresh temporary directory and returns
// the (unstarted) `toolgate serve` command for it, with env added to this
// process's environment, the token variables set, and stderr captured.
func gatewayCommand(t *testing.T, cfgYAML string, env map[string]string, extraArgs ...string) (*exec.Cmd, *syncBuffer, string) {
	t.Helper()
	return gatewayCommandBin(t, bins.toolgate, cfgYAML, env, extraArgs...)
}

// gatewayCommandBin is gatewayCommand for the toolgate binary bin.
func gatewayCommandBin(tb testing.TB, bin, cfgYAML string, env map[string]string, extraArgs ...string) (*exec.Cmd, *syncBuffer, string) {
	tb.Helper()
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "toolgate.yaml")
	if err := os.WriteFile(cfg, []byte(cfgYAML), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--config", cfg, "--log-level", "debug"}, extraArgs...)...) //nolint:gosec // bin is one this package built, or TOOLGATE_BENCH_TOOLGATE (the operator's own)
	cmd.Dir = dir
	cmd.Env = childEnv()
	for k, v := range tokenEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	return cmd, stderr, dir
}

// startGateway starts `toolgate serve` with cfgYAML and waits until its
// ready file names its listeners. On cleanup it stops the process (SIGTERM,
// then SIGKILL), waits for it, fails the test unless it exited with status
// 0 (or the test killed it, gw.kill) or if it reported a data race, and
// prints its stderr if the test failed.
func startGateway(t *testing.T, cfgYAML string, env map[string]string, extraArgs ...string) *gw {
	t.Helper()
	return startGatewayBin(t, bins.toolgate, cfgYAML, env, extraArgs...)
}

// startGatewayBin is startGateway for the toolgate binary bin.
func startGatewayBin(tb testing.TB, bin, cfgYAML string, env map[string]string, extraArgs ...string) *gw {
	tb.Helper()
	return startGatewayExit(tb, bin, cfgYAML, env, exitClean, extraArgs...)
}

// startGatewayExit is startGatewayBin whose cleanup accepts what exit
// says of the process's exit (exitAny: any, for a test that checks it with
// gw.exitErr).
func startGatewayExit(tb testing.TB, bin, cfgYAML string, env map[string]string, exit exitPolicy, extraArgs ...string) *gw {
	tb.Helper()
	start := time.Now()
	cmd, stderr, dir := gatewayCommandBin(tb, bin, cfgYAML, env, extraArgs...)
	ready := filepath.Join(dir, "ready.json")
	cmd.Args = append(cmd.Args, "--ready-file", ready)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start toolgate: %v", err)
	}
	g := &gw{Dir: dir, cmd: cmd, stderr: stderr, exited: make(chan struct{}), tr: http.DefaultTransport.(*http.Transport).Clone(), exit: exit}
	go func() {
		g.waitErr = cmd.Wait()
		close(g.exited)
	}()
	tb.Cleanup(func() {
		// Connections the clients dialed but never used would hold up the
		// server's graceful shutdown (net/http waits for new connections).
		g.tr.CloseIdleConnections()
		stopProcess(tb, cmd.Process, g.exited)
		if g.waitErr != nil && g.exit == exitClean && !g.killed.Load() {
			tb.Errorf("toolgate serve did not exit cleanly on SIGTERM: %v", g.waitErr)
		}
		checkChildLog(tb, "toolgate serve", stderr)
	})

	// Bounded by waitFor without progress: toolgate logs each step of its
	// start (--log-level debug), and on a loaded machine its SQLite
	// migrations alone took minutes, a step every few seconds.
	deadline := time.NewTimer(waitFor(tb))
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	logged := 0
	for {
		if n := stderr.Len(); n != logged {
			logged = n
			deadline.Reset(waitFor(tb))
		}
		b, err := os.ReadFile(ready)
		if err == nil {
			var addrs struct{ MCP, Admin string }
			if err := json.Unmarshal(b, &addrs); err != nil {
				tb.Fatalf("ready file %s: %v\n%s", ready, err, b)
			}
			g.MCP, g.Admin = addrs.MCP, addrs.Admin
			tb.Logf("toolgate ready in %v: mcp %s, admin %s", time.Since(start).Round(time.Millisecond), g.MCP, g.Admin)
			return g
		}
		select {
		case <-g.exited:
			tb.Fatalf("toolgate exited before it was ready: %v\nstderr:\n%s", g.waitErr, stderr)
		case <-deadline.C:
			tb.Fatalf("toolgate not ready, and nothing logged for %v\nstderr:\n%s", waitFor(tb), stderr)
		case <-tick.C:
		}
	}
}

// stopProcess sends SIGTERM, then SIGKILL if the process has not exited
// (exited closed) within waitFor, and waits for it. waitFor, not less: a
// -race gateway that has just shed thousands of connections on a loaded
// 2-core machine took over 10 s to exit (TestIdleConnectionFlood, branch
// tests19), though it stops in about 3 s once it runs.
func stopProcess(tb testing.TB, p *os.Process, exited <-chan struct{}) {
	tb.Helper()
	select {
	case <-exited:
		return
	default:
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return
	case <-time.After(waitFor(tb)):
	}
	tb.Errorf("process %d did not exit within %v of SIGTERM; killing it", p.Pid, waitFor(tb))
	_ = p.Kill()
	<-exited
}

// checkChildLog fails the test if a child built with -race reported a data
// race, and prints the child's stderr if the test failed.
func checkChildLog(tb testing.TB, name string, stderr *syncBuffer) {
	tb.Helper()
	log := stderr.String()
	if strings.Contains(log, "WARNING: DATA RACE") {
		tb.Errorf("%s reported a data race", name)
	}
	if tb.Failed() {
		tb.Logf("%s stderr:\n%s", name, log)
	}
}

// bearer is an http.RoundTripper that adds "Authorization: Bearer token"
// and, when capture is set, copies every response body it reads into it.
type bearer struct {
	token   string
	capture *syncBuffer
	base    http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.base.RoundTrip(r)
	if err != nil || b.capture == nil {
		return resp, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(resp.Body, b.capture), resp.Body}
	return resp, nil
}

// connect opens an MCP client session to g as the test agent. opts may be
// nil. capture, when not nil, receives the raw bytes of every response.
// The session is closed on cleanup.
func (g *gw) connect(t *testing.T, opts *mcp.ClientOptions, capture *syncBuffer) *mcp.ClientSession {
	t.Helper()
	return connectMCP(t, "e2e-agent", g.MCP, &bearer{token: agentToken, capture: capture, base: g.tr}, opts)
}

// connectMCP opens a 2025-era MCP session to endpoint as client name,
// sending its requests through rt, within waitFor; closed on cleanup.
func connectMCP(tb testing.TB, name, endpoint string, rt http.RoundTripper, opts *mcp.ClientOptions) *mcp.ClientSession {
	tb.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}}
	ctx, cancel := context.WithTimeout(tb.Context(), waitFor(tb))
	defer cancel()
	cs, err := c.Connect(ctx, tr, era2025)
	if err != nil {
		tb.Fatalf("connect to %s: %v", endpoint, err)
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

// cliResult is what one run of the toolgate CLI printed and returned.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// cli runs `toolgate approvals args...` as a separate process against the
// admin API at addr, with the approver token in TOOLGATE_TOKEN.
func cli(t *testing.T, addr string, args ...string) cliResult {
	t.Helper()
	return runToolgate(t, addr, approverToken, append([]string{"approvals"}, args...)...)
}

// mustCLI is cli that fails the test unless the command exits 0.
func mustCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r := cli(t, addr, args...)
	if r.Code != 0 {
		t.Fatalf("toolgate approvals %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// apiApproval is the part of the admin API's approval JSON the tests read.
type apiApproval struct {
	ID              string          `json:"id"`
	State           string          `json:"state"`
	Server          string          `json:"server"`
	Tool            string          `json:"tool"`
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsHash   string          `json:"arguments_hash"`
	Rule            string          `json:"rule"`
	RequestedBy     string          `json:"requested_by"`
	DecidedBy       string          `json:"decided_by"`
	Reason          string          `json:"reason"`
	DispatchOutcome string          `json:"dispatch_outcome"`
}

// approvals lists the approvals in state ("all" for every state) through
// the admin API at admin.
func approvals(tb testing.TB, admin, state string) []apiApproval {
	tb.Helper()
	var l struct {
		Approvals []apiApproval `json:"approvals"`
	}
	adminGet(tb, admin+"/v1/approvals?"+url.Values{"state": {state}, "limit": {"1000"}}.Encode(), &l)
	return l.Approvals
}

// waitState polls the admin API until approval id is in state want. Any
// state other than want and pending fails at once.
func waitState(t *testing.T, admin, id, want string) apiApproval {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		var a apiApproval
		adminGet(t, admin+"/v1/approvals/"+id, &a)
		switch {
		case a.State == want:
			return a
		case a.State != "pending":
			t.Fatalf("approval %s is %s, want %s", id, a.State, want)
		case time.Now().After(deadline):
			t.Fatalf("approval %s still pending after %v, want %s", id, waitFor(t), want)
		}
		time.Sleep(pollEvery)
	}
}

// adminGet GETs u with the approver token and decodes the 200 response
// into v.
func adminGet(tb testing.TB, u string, v any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), waitFor(tb))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	req.Close = true // leave no idle connection to hold up the gateway's shutdown
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("GET %s: %v", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s\n%s", u, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		tb.Fatalf("GET %s: %v\n%s", u, err, body)
	}
}

// waitPending polls the admin API until exactly n approvals are pending
// and returns them. More than n pending fails at once.
func waitPending(t *testing.T, admin string, n int) []apiApproval {
	t.Helper()
	return waitPendingWithin(t, admin, n, waitFor(t))
}

// waitPendingWithin is waitPending with the bound d.
func waitPendingWithin(t *testing.T, admin string, n int, d time.Duration) []apiApproval {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := approvals(t, admin, "pending")
		switch {
		case len(got) == n:
			return got
		case len(got) > n:
			t.Fatalf("%d approvals pending, want %d: %+v", len(got), n, got)
		case time.Now().After(deadline):
			t.Fatalf("%d approvals pending after %v, want %d", len(got), d, n)
		}
		time.Sleep(pollEvery)
	}
}

// showJSON runs `toolgate approvals show id --json` and decodes it.
func showJSON(t *testing.T, admin, id string) apiApproval {
	t.Helper()
	out := mustCLI(t, admin, "show", id, "--json")
	var a apiApproval
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("approvals show %s --json: %v\n%s", id, err, out)
	}
	return a
}

// readRecord returns the lines of an upstream record file; a missing file
// has none.
func readRecord(tb testing.TB, path string) []string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// waitRecord polls the record file until a line equals want, and returns
// all lines.
func waitRecord(t *testing.T, path, want string) []string {
	t.Helper()
	deadline := time.Now().Add(waitFor(t))
	for {
		lines := readRecord(t, path)
		for _, l := range lines {
			if l == want {
				return lines
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %s has no line %q after %v; lines: %q", path, want, waitFor(t), lines)
		}
		time.Sleep(pollEvery)
	}
}

// callResult is the outcome of a tools/call made in the background.
type callResult struct {
	res *mcp.CallToolResult
	err error
}

// callAsync calls a tool in a goroutine and delivers the outcome on the
// returned channel (buffered, so the goroutine never leaks).
func callAsync(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, p)
		ch <- callResult{res, err}
	}()
	return ch
}

// await waits for a background call's outcome.
func await(t *testing.T, ch <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitFor(t)):
		t.Fatalf("call did not return within %v", waitFor(t))
		return callResult{}
	}
}

// text joins the text content of res.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mustOK fails unless the call succeeded without isError, and returns its text.
func mustOK(t *testing.T, r callResult) string {
	t.Helper()
	if r.err != nil {
		t.Fatalf("call: %v", r.err)
	}
	if r.res.IsError {
		t.Fatalf("call returned isError: %s", text(r.res))
	}
	return text(r.res)
}

// mustIsError fails unless the call returned an isError result (not a
// JSON-RPC error), and returns its text.
func mustIsError(t *testing.T, r callResult) string {
	t.Helper()
	if r.err != nil {
		t.Fatalf("call: JSON-RPC error %v, want an isError result", r.err)
	}
	if !r.res.IsError {
		t.Fatalf("call succeeded with %q, want isError", text(r.res))
	}
	return text(r.res)
}

// npm locates the e2e npm packages: node_modules from
// $TOOLGATE_E2E_NODE_MODULES or ./node_modules, and a node binary
// ($TOOLGATE_NODE22, the pinned Node 22 scripts/test.sh exports; else
// PATH, else node_modules/.bin/node). Missing pieces skip the test, or
// fail it when TOOLGATE_REQUIRE_E2E=1.
type npm struct {
	node    string // node binary
	modules string // absolute node_modules directory
}

func findNPM(t *testing.T) npm {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + " (run `npm ci` in e2e/, or set TOOLGATE_E2E_NODE_MODULES)"
		if os.Getenv("TOOLGATE_REQUIRE_E2E") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := os.Getenv("TOOLGATE_E2E_NODE_MODULES")
	if dir == "" {
		dir = "node_modules"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		missing("npm modules not found: %v", err)
	}
	// The system node first made the npm servers run on whatever the
	// machine had (Node 20 here; Debian's own is 18), not on the Node 22
	// the lockfile pins.
	if n22 := os.Getenv("TOOLGATE_NODE22"); n22 != "" {
		return npm{node: n22, modules: dir}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		node = filepath.Join(dir, ".bin", "node")
		if _, err := os.Stat(node); err != nil {
			missing("no node binary on PATH or in %s", filepath.Dir(node))
		}
	}
	return npm{node: node, modules: dir}
}

// script returns the entry point of the npm package bin (e.g.
// "mcp-server-filesystem"), skipping or failing like findNPM if absent.
func (n npm) script(t *testing.T, bin string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(filepath.Join(n.modules, ".bin", bin))
	if err != nil {
		msg := fmt.Sprintf("npm binary %s not found: %v (run `npm ci` in e2e/)", bin, err)
		if os.Getenv("TOOLGATE_REQUIRE_E2E") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// elapsed logs how long a scenario took (the lead reports these; nothing
// asserts on them).
func elapsed(t *testing.T, scenario string, start time.Time) {
	t.Helper()
	t.Logf("timing: %s took %v", scenario, time.Since(start).Round(time.Millisecond))
}

// era2025 pins a go-sdk client to MCP 2025-11-25 (initialize and a protocol
// session). The go-sdk client tries 2026-07-28 (server/discover) first, and
// toolgate serves both eras on /mcp; the tests of 2025-era behaviour
// (sessions, server→client requests, notifications/cancelled) pin it.
var era2025 = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
