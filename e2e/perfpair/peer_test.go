package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tbxarkConf is the part of TBXark/mcp-proxy's configuration (its config.go,
// Config with MCPProxyConfigV2 and MCPClientConfigV2) that perfpair writes.
type tbxarkConf struct {
	McpProxy struct {
		BaseURL string `json:"baseURL"`
		Addr    string `json:"addr"`
		Type    string `json:"type"`
		Options struct {
			PanicIfInvalid *bool `json:"panicIfInvalid"`
			LogEnabled     *bool `json:"logEnabled"`
		} `json:"options"`
	} `json:"mcpProxy"`
	McpServers map[string]struct {
		TransportType string   `json:"transportType"`
		Command       string   `json:"command"`
		Args          []string `json:"args"`
		URL           string   `json:"url"`
	} `json:"mcpServers"`
}

func readTBXarkConf(t *testing.T, path string) tbxarkConf {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c tbxarkConf
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return c
}

// TestWriteTBXarkConfig: the peer's configuration is run.sh's tbxark_cfg
// one: Streamable HTTP on 127.0.0.1:PORT with baseURL at the root (so the
// echo server is served at /echo/), logging off, exit on a failed
// upstream; one server "echo", the stdio echoserver or the HTTP upstream.
func TestWriteTBXarkConfig(t *testing.T) {
	dir := t.TempDir()
	stdio, err := writeTBXarkConfig(dir, 4321, "stdio", "", "/perf/bin/echoserver")
	if err != nil {
		t.Fatal(err)
	}
	c := readTBXarkConf(t, stdio)
	p := c.McpProxy
	if p.Addr != "127.0.0.1:4321" || p.BaseURL != "http://127.0.0.1:4321" || p.Type != "streamable-http" {
		t.Errorf("mcpProxy %+v", p)
	}
	if p.Options.LogEnabled == nil || *p.Options.LogEnabled || p.Options.PanicIfInvalid == nil || !*p.Options.PanicIfInvalid {
		t.Errorf("options: logEnabled %v, panicIfInvalid %v; want false, true", p.Options.LogEnabled, p.Options.PanicIfInvalid)
	}
	if len(c.McpServers) != 1 {
		t.Fatalf("servers %+v, want echo only", c.McpServers)
	}
	s, ok := c.McpServers[strings.Trim(tbxarkPath, "/")]
	if !ok || s.Command != "/perf/bin/echoserver" || s.Args == nil || len(s.Args) != 0 || s.URL != "" || s.TransportType != "" {
		t.Errorf("stdio server %+v (present %v), want the echoserver command, empty args", s, ok)
	}

	httpConf, err := writeTBXarkConfig(dir, 4322, "http", "http://127.0.0.1:9/mcp", "/perf/bin/echoserver")
	if err != nil {
		t.Fatal(err)
	}
	if httpConf == stdio {
		t.Fatalf("both configurations in %s", httpConf)
	}
	s = readTBXarkConf(t, httpConf).McpServers["echo"]
	if s.TransportType != "streamable-http" || s.URL != "http://127.0.0.1:9/mcp" || s.Command != "" {
		t.Errorf("http server %+v", s)
	}
	if fi, err := os.Stat(httpConf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
}

func TestPeerFlag(t *testing.T) {
	var p peerFlag
	if err := p.Set("tbxark=/bin/tbx"); err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].label != "tbxark" || p[0].bin != "/bin/tbx" || !p[0].peer || p[0].path() != "/echo/" {
		t.Errorf("got %+v", p)
	}
	for _, bad := range []string{"tbxark", "tbxark=", "other=/bin/x", "=/bin/x"} {
		if err := p.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if (target{label: "main", bin: "/x"}).path() != "/mcp" {
		t.Error("a toolgate row is not served at /mcp")
	}
}

// TestWaitRoute: the wait ends at the first answer other than 404 (the
// peer registers its route after it listens), and fails after the time
// given while the answer stays 404.
func TestWaitRoute(t *testing.T) {
	var routed atomic.Bool
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("method %s, want POST", r.Method)
		}
		if posts.Add(1) == 3 {
			routed.Store(true)
		}
		if !routed.Load() {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "bad request", http.StatusBadRequest)
	}))
	defer srv.Close()
	if err := waitRoute(context.Background(), srv.URL+"/echo/", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := posts.Load(); n != 3 {
		t.Errorf("%d requests, want 3 (two 404s, then the answer)", n)
	}
	routed.Store(false)
	posts.Store(-1000)
	if err := waitRoute(context.Background(), srv.URL+"/echo/", 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("always 404: error %v, want one naming the 404", err)
	}
}

func TestSummarisePeerTable(t *testing.T) {
	rows := []result{
		{Label: "direct", Concurrency: 1, Note: "round=1", CallsPerS: 1000, P50us: 500, CPUPerCall: 300},
		{Label: "tg", Concurrency: 1, Note: "round=1", CallsPerS: 900, P50us: 600, P99us: 1200, CPUPerCall: 300, PSSTreeKB: 40960},
		{Label: "tbxark", Concurrency: 1, Note: "round=1", CallsPerS: 600, P50us: 800, P99us: 2000, CPUPerCall: 600, PSSTreeKB: 20480},
		{Label: "direct", Concurrency: 1, Note: "round=2", CallsPerS: 1000, P50us: 500, CPUPerCall: 300},
		{Label: "tg", Concurrency: 1, Note: "round=2", CallsPerS: 1000, P50us: 700, P99us: 1400, CPUPerCall: 400, PSSTreeKB: 40960},
		{Label: "tbxark", Concurrency: 1, Note: "round=2", CallsPerS: 1000, P50us: 600, P99us: 1000, CPUPerCall: 400, PSSTreeKB: 30720},
	}
	var b strings.Builder
	if err := summarise(&b, rows, []string{"direct", "tg", "tbxark"}, []string{"tbxark"}, []int{1}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		// The peer against the first binary in the main table (0.67, 1.00; CPU 2.00, 1.00).
		"| tbxark | 800 | 700 | 500 | 0.60 1.00 | 0.80 | +200 | 0.67 1.00 | 2.00 1.00 |",
		"Each binary against the peer, per round",
		// tg over tbxark: 1.50 and 1.00 (median 1.25); CPU 0.50 1.00; p50 650 / 700, p99 1300 / 1500, PSS 40 / 25.
		"| tg ÷ tbxark | 1.50 1.00 | 1.25 | 0.50 1.00 | 0.75 | 650 / 700 | 1300 / 1500 | 40.0 / 25.0 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}

	// A peer listed before the binaries is not "the first binary": the
	// binary's row has no comparison with it in the main table.
	b.Reset()
	if err := summarise(&b, rows, []string{"direct", "tbxark", "tg"}, []string{"tbxark"}, []int{1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| tg | 950 | 650 | 350 | 0.90 1.00 | 0.95 | +150 |  |  |") {
		t.Errorf("the binary is compared with the peer as the first binary:\n%s", b.String())
	}

	// Without peers, no peer table.
	b.Reset()
	if err := summarise(&b, rows, []string{"direct", "tg", "tbxark"}, nil, []int{1}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "against the peer") {
		t.Errorf("no peers, yet a peer table:\n%s", b.String())
	}
}
