package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// leakOptions ignore the one goroutine os/signal starts on first use and
// keeps for the life of the process.
var leakOptions = []goleak.Option{goleak.IgnoreAnyFunction("os/signal.loop")}

// openSockets counts this process's open socket descriptors.
func openSockets(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors without /proc: %v", err)
	}
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// TestServeEarlyReturnLeavesNothing: when serve fails after it started
// some of its parts (a listener, the store, upstream processes), it
// returns an error and leaves no goroutine, listener, child or socket
// behind (issue 9 item 7).
func TestServeEarlyReturnLeavesNothing(t *testing.T) {
	tests := []struct {
		name   string
		config func(t *testing.T) (cfg string, mcp string)
		args   []string
		want   string
	}{
		{
			name:   "admin port in use",
			config: busyAdminConfig,
			want:   "address already in use (another process listens there, often a toolgate serve still running",
		},
		{
			// A desktop client launching --stdio with the config serve
			// uses: listen.admin is set there, so the --stdio gateway
			// opens it too and finds serve on it. The error says why it
			// opened one and how to have none.
			name:   "admin port in use under --stdio",
			config: busyAdminConfig,
			args:   []string{"--stdio"},
			want:   "--stdio opens the admin listener only because listen.admin is set",
		},
		{
			// A DSN that parses (one that does not is refused before the
			// listeners open: TestCheckRefusesWhatServeRefuses), with
			// nothing listening at its address.
			name: "store unreachable",
			config: func(t *testing.T) (string, string) {
				t.Helper()
				mcp := freePort(t)
				return "listen: { mcp: " + mcp + ", admin: 127.0.0.1:0 }\nstorage: { driver: postgres, dsn: \"postgres://u@" + freePort(t) + "/db?sslmode=disable&connect_timeout=5\" }\n" + principals, mcp
			},
			want: "connection refused (is Postgres running at the address storage.dsn names",
		},
		{
			name: "upstream fails to start",
			config: func(t *testing.T) (string, string) {
				t.Helper()
				// Both expose "echo" under its own name: a startup error
				// once both are running.
				mcp := freePort(t)
				return "listen: { mcp: " + mcp + ", admin: 127.0.0.1:0 }\nstorage: { path: DB }\nservers:\n" +
					testUpstream("one", true) + testUpstream("two", true) + principals, mcp
			},
			want: "start upstreams",
		},
		{
			name: "ready file cannot be written",
			config: func(t *testing.T) (string, string) {
				t.Helper()
				mcp := freePort(t)
				return "listen: { mcp: " + mcp + ", admin: 127.0.0.1:0 }\nstorage: { path: DB }\nservers:\n" + testUpstream("up", false) + principals, mcp
			},
			args: []string{"--ready-file", "/nonexistent/dir/ready.json"},
			want: "ready file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, mcp := tt.config(t)
			path := writeConfig(t, cfg)
			sockets := openSockets(t)
			defer goleak.VerifyNone(t, append(leakOptions, goleak.IgnoreCurrent())...)
			stderr := new(syncBuffer)
			err := serveWith(t.Context(), append([]string{"--config", path}, tt.args...),
				serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr, sys: testSystem(nil)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve = %v, want an error about %q\nstderr:\n%s", err, tt.want, stderr)
			}
			if n := openSockets(t); n != sockets {
				t.Errorf("%d open sockets after serve returned, %d before", n, sockets)
			}
			ln, err := net.Listen("tcp", mcp)
			if err != nil {
				t.Errorf("the agent listener's address %s is still taken: %v", mcp, err)
			} else {
				_ = ln.Close()
			}
		})
	}
}

// TestServeStopsCleanly: a serve that ran (listeners, an upstream child,
// the store) stops when its context ends and leaves nothing behind.
func TestServeStopsCleanly(t *testing.T) {
	path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }\nstorage: { path: DB }\nservers:\n"+testUpstream("up", false)+principals)
	defer goleak.VerifyNone(t, append(leakOptions, goleak.IgnoreCurrent())...)
	addrs, stderr, stop := startServe(t, path)
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Get(addrs["admin"] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz = %d", resp.StatusCode)
	}
	tr.CloseIdleConnections()
	stop()
	// A person who pressed Ctrl-C is told that it stops and when it has.
	out := stderr.String()
	stopping := strings.Index(out, `msg="stopping: held calls are answered now (their approvals stay pending), then the upstreams stop"`)
	stopped := strings.Index(out, "msg=stopped")
	if stopping < 0 || stopped < stopping {
		t.Errorf("stderr does not say stopping, then stopped:\n%s", out)
	}
	// And which store it used (newuser5: nothing said whether SQLite or
	// Postgres was in use), by its absolute path, and that it is new
	// (newuser37: a start from another directory made one silently).
	if !strings.Contains(out, `msg="new, empty store created; schema migrations are applied" driver=sqlite path=/`) {
		t.Errorf("stderr does not name the store:\n%s", out)
	}
}

// startServe runs serve in-process with the config at path (testSystem's
// environment) until it is ready, failing t if it ends first, and returns
// its listeners' addresses, its stderr and stop, which ends it and fails
// t unless it ended cleanly.
func startServe(t *testing.T, path string) (addrs map[string]string, stderr *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan map[string]string, 1)
	done := make(chan error, 1)
	stderr = new(syncBuffer)
	go func() {
		done <- serveWith(ctx, []string{"--config", path}, serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr,
			sys: testSystem(nil), onReady: func(r map[string]string) { ready <- r }})
	}()
	select {
	case addrs = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve = %v before it was ready\nstderr:\n%s", err, stderr)
	}
	return addrs, stderr, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve = %v after its context ended\nstderr:\n%s", err, stderr)
		}
	}
}

// bearerTransport adds "Authorization: Bearer token" to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// TestServeUpstreamEnvironment: a stdio upstream started by serve sees
// the base variables, its env_passthrough and its env, and nothing else of
// toolgate's environment: no token, no token variable, no other variable
// (issue 9 item 1).
func TestServeUpstreamEnvironment(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "bob.token")
	if err := os.WriteFile(tokenFile, []byte("bob-file-token-5d8c0e7a19f2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, `listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0 }
storage: { path: DB }
servers:
  up:
    command: `+os.Args[0]+`
    args: ["-test.run=^$"]
    env: { `+envUpstream+`: stdio, GREETING: hello }
    env_passthrough: [WANTED, UNSET_ONE]
`+principals+`  - { id: bob, token_file: `+tokenFile+`, roles: [approver] }
policy: { default: allow }
`)
	home := t.TempDir()
	sys := testSystem(map[string]string{
		"WANTED":   "passed",
		"UNWANTED": "not passed",
		"LC_TIME":  "C",
		"TZ":       "UTC",
		"HOME":     home,
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan map[string]string, 1)
	done := make(chan error, 1)
	stderr := new(syncBuffer)
	go func() {
		done <- serveWith(ctx, []string{"--config", path}, serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr,
			sys: sys, onReady: func(r map[string]string) { ready <- r }})
	}()
	var addrs map[string]string
	select {
	case addrs = <-ready:
	case err := <-done:
		t.Fatalf("serve = %v\nstderr:\n%s", err, stderr)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve = %v", err)
		}
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: addrs["mcp"],
		HTTPClient: &http.Client{Transport: bearerTransport{token: testAgentToken, base: tr}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "up__env", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("up__env: %v %+v", err, res)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(res.Content[0].(*mcp.TextContent).Text, "\n") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{
		envUpstream: "stdio", "GREETING": "hello", "WANTED": "passed",
		"PATH": os.Getenv("PATH"), "LC_TIME": "C", "TZ": "UTC", "HOME": home,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("upstream's %s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("upstream got %s, which it should not", k)
		}
	}
	text := res.Content[0].(*mcp.TextContent).Text
	for _, secret := range []string{testAgentToken, testApproverToken, "bob-file-token-5d8c0e7a19f2", "CMD_TEST_AGENT_TOKEN", "CMD_TEST_APPROVER_TOKEN"} {
		if strings.Contains(text, secret) {
			t.Errorf("the upstream's environment contains %q", secret)
		}
	}
}

// busyAdminConfig is a config whose listen.admin is an address something
// else already listens on, and the free MCP address it names.
func busyAdminConfig(t *testing.T) (cfg string, mcp string) {
	t.Helper()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Close() })
	mcp = freePort(t)
	return "listen: { mcp: " + mcp + ", admin: " + busy.Addr().String() + " }\nstorage: { path: DB }\n" +
		"servers:\n" + testUpstream("up", false) + principals, mcp
}

// TestServeSaysWhatToDoWhenItsAddressIsTaken: a second serve of the same
// config (the walkthrough run twice) fails on the agent listener's
// address and says what to do, not only "address already in use".
func TestServeSaysWhatToDoWhenItsAddressIsTaken(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	path := writeConfig(t, "listen: { mcp: "+busy.Addr().String()+", admin: 127.0.0.1:0 }\nstorage: { path: DB }\n"+principals)
	err = serveWith(t.Context(), []string{"--config", path},
		serveIO{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, sys: testSystem(nil)})
	if err == nil || !strings.Contains(err.Error(), "listen.mcp: ") || !strings.Contains(err.Error(), "often a toolgate serve still running: stop it") {
		t.Fatalf("serve = %v, want an error naming listen.mcp and what to do", err)
	}
}
