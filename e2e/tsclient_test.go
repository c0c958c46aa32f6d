package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tsV2Policy is modernPolicy (t__echo_raw allowed, t__slow held) with a
// short max hold, so that the TypeScript client, which declares neither
// Tasks nor URL elicitation and sends no progress token, gets the pending
// answer quickly.
const tsV2Policy = `
approvals:
  max_hold: 1s
  public_url: https://toolgate.example
` + modernPolicy

// tsResult is the part of a tools/call result the TypeScript client prints.
type tsResult struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

func (r tsResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// tsNode returns the node binary for a TypeScript SDK client whose npm
// package is pkg (e.g. "@modelcontextprotocol/client"): Node 22 from
// scripts/test.sh ($TOOLGATE_NODE22), else the one findNPM found. A
// missing package skips the test, or fails it under TOOLGATE_REQUIRE_E2E=1
// (scripts/test.sh).
func tsNode(t *testing.T, pkg string) string {
	t.Helper()
	n := findNPM(t)
	if _, err := os.Stat(filepath.Join(n.modules, filepath.FromSlash(pkg), "package.json")); err != nil {
		msg := pkg + " is not installed (run `npm ci` in e2e/): " + err.Error()
		if os.Getenv("TOOLGATE_REQUIRE_E2E") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if n22 := os.Getenv("TOOLGATE_NODE22"); n22 != "" {
		return n22
	}
	return n.node
}

// tsV2Node returns the node binary for the TypeScript SDK v2 client.
func tsV2Node(t *testing.T) string {
	t.Helper()
	return tsNode(t, "@modelcontextprotocol/client")
}

// tsLineWait bounds the wait for each line of t's tsClient: what the
// whole script had before, since the first line includes node's start and
// the SDK's loading (over 30 s on a machine at load average 40).
func tsLineWait(t *testing.T) time.Duration {
	t.Helper()
	return 2 * waitFor(t)
}

// tsClient is a TypeScript client script (under tsclient/) running under
// node: its stdin, and its stdout line by line. Each line is awaited for
// tsLineWait; the script as a whole is bounded only by the test (a bound
// on the whole, 2*waitFor, failed TestLeanCallsEndToEnd on a loaded
// machine whose every step was within its own).
type tsClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.Writer
	lines  chan []byte // closed at the end of its stdout
	stderr *syncBuffer
	waited bool
}

// startTSClient starts node tsclient/script with args; if the test does
// not wait for it, it is killed and reaped on cleanup.
func startTSClient(t *testing.T, node, script string, args ...string) *tsClient {
	t.Helper()
	return startTSClientEnv(t, node, childEnv(), script, args...)
}

// startTSClientEnv is startTSClient with the environment env.
func startTSClientEnv(t *testing.T, node string, env []string, script string, args ...string) *tsClient {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("tsclient", script))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	c := &tsClient{t: t, cmd: exec.CommandContext(ctx, node, append([]string{path}, args...)...), stderr: new(syncBuffer)}
	c.cmd.Env = env
	c.cmd.Stderr = c.stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		cancel()
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", node, err)
	}
	c.lines = make(chan []byte, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- bytes.Clone(sc.Bytes())
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		cancel()
		if !c.waited {
			for range c.lines { // until the killed script's stdout ends
			}
			_ = c.cmd.Wait()
		}
	})
	return c
}

// line returns the client's next line of output, waiting tsLineWait for it;
// what names it in the failure when there is none.
func (c *tsClient) line(what string) []byte {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("TypeScript client printed nothing for %s (its output ended)\nstderr:\n%s", what, c.stderr.String())
		}
		return l
	case <-time.After(tsLineWait(c.t)):
		c.t.Fatalf("TypeScript client printed nothing for %s within %v\nstderr:\n%s", what, tsLineWait(c.t), c.stderr.String())
		return nil
	}
}

// wait waits (tsLineWait) for the client's output to end, then for it to
// exit, and fails the test unless it exits 0.
func (c *tsClient) wait() {
	c.t.Helper()
	for {
		select {
		case _, ok := <-c.lines:
			if ok {
				continue
			}
		case <-time.After(tsLineWait(c.t)):
			c.t.Fatalf("TypeScript client did not end within %v\nstderr:\n%s", tsLineWait(c.t), c.stderr.String())
		}
		break
	}
	c.waited = true
	if err := c.cmd.Wait(); err != nil {
		c.t.Fatalf("TypeScript client: %v\nstderr:\n%s", err, c.stderr.String())
	}
}

// TestTypeScriptV2Client (issue 11): a TypeScript SDK v2 client
// (@modelcontextprotocol/client 2.4.0) pinned to 2026-07-28 lists the
// tools and runs an allowed call through toolgate. A held call (the client
// declares neither Tasks, which the SDK does not ship, nor URL elicitation)
// gets the max-hold pending answer naming the approval; nothing runs; the
// test approves through the CLI process, the client re-sends the identical
// call and gets the upstream's result, and the upstream ran it once.
func TestTypeScriptV2Client(t *testing.T) {
	node := tsV2Node(t)
	g, record := startUpstreamGateway(t, tsV2Policy)
	const allowedArgs, heldArgs = `{"client":"ts-v2"}`, `{"id":"ts-v2","seconds":0.01}`
	c := startTSClient(t, node, "v2.mjs", g.MCP, agentToken, "t__echo_raw", allowedArgs, "t__slow", heldArgs)
	next := func(step string, v any) {
		t.Helper()
		b := c.line(step)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: client output %q: %v", step, b, err)
		}
	}

	var first struct {
		ProtocolVersion string   `json:"protocolVersion"`
		Tools           []string `json:"tools"`
		Result          tsResult `json:"result"`
	}
	next("the allowed call", &first)
	if first.ProtocolVersion != "2026-07-28" {
		t.Errorf("the client speaks %q, want 2026-07-28", first.ProtocolVersion)
	}
	if !slices.Contains(first.Tools, "t__echo_raw") || !slices.Contains(first.Tools, "t__slow") {
		t.Errorf("tools/list gave %v, want t__echo_raw and t__slow", first.Tools)
	}
	if first.Result.IsError || first.Result.text() != allowedArgs {
		t.Errorf("allowed tools/call result %+v, want %s", first.Result, allowedArgs)
	}

	var pending struct {
		Pending tsResult `json:"pending"`
	}
	next("the held call", &pending)
	p := waitPending(t, g.Admin, 1)[0]
	msg := pending.Pending.text()
	if !pending.Pending.IsError || !strings.Contains(msg, p.ID) || !strings.Contains(strings.ToLower(msg), "re-send the identical call to continue") {
		t.Fatalf("held call answered %+v, want the pending isError naming approval %s", pending.Pending, p.ID)
	}
	if got := readRecord(t, record); slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "slow") }) {
		t.Fatalf("upstream ran the held call before any approval: %q", got)
	}

	mustCLI(t, g.Admin, "approve", p.ID)
	if _, err := io.WriteString(c.stdin, "approved\n"); err != nil {
		t.Fatalf("tell the client: %v", err)
	}
	var resent struct {
		Result tsResult `json:"result"`
	}
	next("the re-sent call", &resent)
	if resent.Result.IsError || resent.Result.text() != "slept" {
		t.Errorf("re-sent held call returned %+v, want the upstream's \"slept\"", resent.Result)
	}
	c.wait()
	if n := countRecord(t, record, "echo_raw "+allowedArgs); n != 1 {
		t.Errorf("upstream ran the allowed call %d times, want 1", n)
	}
	if n := countRecord(t, record, "slow finished "+heldArgs); n != 1 {
		t.Errorf("upstream ran the approved call %d times, want 1 (record %q)", n, readRecord(t, record))
	}
	if n := len(approvals(t, g.Admin, "pending")); n != 0 {
		t.Errorf("%d pending approvals after the re-send, want 0 (it attached to %s)", n, p.ID)
	}
}
