package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testFloodBin builds e2e/testflood once, next to the other binaries.
var testFloodBin = sync.OnceValues(func() (string, error) {
	out := filepath.Join(filepath.Dir(bins.toolgate), "testflood")
	return out, goBuild(out, "toolgate/e2e/testflood")
})

// floodWait bounds the opening of a flood's connections, which takes from
// seconds on an idle machine to minutes on a loaded one, and the steps of
// a call during the flood (it is a bound, not a measurement).
const floodWait = 10 * time.Minute

// flood is one running e2e/testflood process.
type flood struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its stdout, line by line
	done  chan error
}

// startFlood starts testflood against addr with n connections (and its
// extra flags); it is stopped on cleanup.
func startFlood(t *testing.T, bin, addr string, n int, extra ...string) *flood {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", addr, "-n", strconv.Itoa(n)}, extra...)...)
	cmd.Env = childEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &flood{cmd: cmd, stdin: stdin, lines: make(chan string, 4), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		f.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = f.stdin.Close()
		for line := range f.lines {
			t.Logf("testflood %s: %s", addr, line)
		}
		if err := <-f.done; err != nil {
			t.Errorf("testflood %s: %v\n%s", addr, err, stderr)
		}
	})
	return f
}

// waitReady waits for the flood's "ready" line and returns it.
func (f *flood) waitReady(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-f.lines:
		if !ok || !strings.HasPrefix(line, "ready ") {
			t.Fatalf("testflood: got %q, want its ready line", line)
		}
		return line
	case <-time.After(floodWait):
		t.Fatalf("testflood not ready after %v", floodWait)
	}
	return ""
}

// openFiles returns the number of open descriptors of process pid and its
// soft limit, from /proc.
func openFiles(t *testing.T, pid int) (open, limit int) {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("count descriptors: %v", err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && strings.HasPrefix(line, "Max open files") {
			limit, _ = strconv.Atoi(f[3])
		}
	}
	return len(entries), limit
}

// TestIdleConnectionFlood opens 20,000 idle connections to each listener
// of a real gateway (as an attacker without a token would: half send
// nothing, half one request and then nothing) and checks that an agent can
// still connect and make a gated call, and an approver can still list and
// approve it, and that the gateway's descriptors stay below its limit
// (issue 9 item 14).
func TestIdleConnectionFlood(t *testing.T) {
	const perListener, perProcess = 20000, 10000
	// The connections are held by two flood processes per listener, so each
	// needs perProcess descriptors; the gateway needs fewer (its caps).
	raiseNofile(t, perProcess+512)
	bin, err := testFloodBin()
	if err != nil {
		t.Fatal(err)
	}
	g, record := startUpstreamGateway(t, heldEchoPolicy)
	mcpURL, err := url.Parse(g.MCP)
	if err != nil {
		t.Fatal(err)
	}
	adminURL, err := url.Parse(g.Admin)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	var floods []*flood
	for _, addr := range []string{mcpURL.Host, adminURL.Host} {
		for range perListener / perProcess {
			floods = append(floods, startFlood(t, bin, addr, perProcess))
		}
	}
	for _, f := range floods {
		t.Logf("testflood: %s", f.waitReady(t))
	}
	elapsed(t, fmt.Sprintf("%d idle connections opened to each listener", perListener), start)
	open, limit := openFiles(t, g.cmd.Process.Pid)
	t.Logf("gateway: %d open descriptors of %d", open, limit)
	if limit > 0 && open >= limit-32 {
		t.Errorf("the gateway has %d open descriptors, at its limit %d", open, limit)
	}

	// Agents and approvers still get in. The wait for the approval and
	// for the call's answer are bounded by floodWait: on a loaded machine
	// the steps together took 25 s, near waitFor's floor (waitMin, 30 s).
	start = time.Now()
	cs := g.connect(t, nil, nil)
	ch := callAsync(t.Context(), cs, &mcp.CallToolParams{Name: "t__echo_raw", Arguments: json.RawMessage(`{"during":"flood"}`)})
	p := waitPendingWithin(t, g.Admin, 1, floodWait)[0]
	mustCLI(t, g.Admin, "approve", p.ID)
	if got := mustOK(t, awaitWithin(t, ch, floodWait)); got != `{"during":"flood"}` {
		t.Errorf("the held call returned %q", got)
	}
	if got := readRecord(t, record); len(got) != 1 {
		t.Errorf("upstream ran %d times, want once: %q", len(got), got)
	}
	elapsed(t, "gated call held and approved during the flood", start)

	// The gateway never ran out of descriptors (net/http logs each failed
	// accept as "too many open files").
	if strings.Contains(g.stderr.String(), "too many open files") {
		t.Error("the gateway ran out of file descriptors during the flood")
	}

	// The admin listener's cap (at most 1024 by default) was reached; the
	// agent listener's (derived from the descriptor limit) is logged.
	m := scrapeMetrics(t, g.Admin)
	for _, l := range []string{"mcp", "admin"} {
		series := `toolgate_http_connections_shed_total{how="evicted",listener="` + l + `"}`
		t.Logf("%s = %v", series, m[series])
	}
	if series := `toolgate_http_connections_shed_total{how="evicted",listener="admin"}`; m[series] == 0 {
		t.Errorf("%s = 0: the admin listener's cap never shed a connection", series)
	}
}
