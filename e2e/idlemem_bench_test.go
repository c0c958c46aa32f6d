package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"toolgate/internal/execpages"
)

// BenchmarkIdleMemory measures toolgate's memory at rest (issue 13: idle
// with one stdio upstream): `toolgate serve` built without the race
// detector, SQLite, one stdio upstream (testupstream), no call in flight.
// It reports, in MB, from /proc/<pid>/status and smaps_rollup:
//
//   - idle-rss-MB, idle-anon-MB, idle-file-MB, idle-pss-MB: VmRSS, RssAnon,
//     RssFile and Pss once start-up is over and toolgate has released the
//     executable's start-up pages (execpages.StartupTail after ready, plus
//     idleSettle);
//   - calls-rss-MB, …: the same idleSettle after idleCalls allowed calls
//     from one agent session (still connected).
//
// RssFile is the executable's pages mapped in the process (clean, shared
// with the page cache); RssAnon is the heap, stacks and the runtime's
// memory. docs/performance.md, "Idle memory", explains both.
func BenchmarkIdleMemory(b *testing.B) {
	for b.Loop() {
		benchIdleMemory(b)
	}
}

const (
	idleCalls  = 100
	idleSettle = 5 * time.Second // after the release or the last call
)

func benchIdleMemory(b *testing.B) {
	b.Helper()
	bins, err := plainBins()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg := gatewayConfig(filepath.Join(dir, "toolgate.db"), upstreamServer(filepath.Join(dir, "record.log"))+`
policy:
  default: deny
  rules:
    - { name: echo is fine, server: t, tools: [echo_raw], effect: allow }
`)
	g := startGatewayBin(b, bins.toolgate, cfg, nil, "--log-level", "warn")
	pid := g.cmd.Process.Pid
	// The window measured is toolgate at rest: nothing to wait for but time.
	time.Sleep(execpages.StartupTail + idleSettle)
	reportMemory(b, "idle", pid)

	cs := (&benchGateway{MCP: g.MCP, Admin: g.Admin, tr: g.tr}).connect(b)
	for i := range idleCalls {
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "t__echo_raw", Arguments: map[string]any{"i": i}})
		if err != nil || res.IsError {
			b.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	time.Sleep(idleSettle)
	reportMemory(b, "calls", pid)
}

// reportMemory reports pid's VmRSS, RssAnon, RssFile and Pss in MB as
// <what>-rss-MB, <what>-anon-MB, <what>-file-MB and <what>-pss-MB.
func reportMemory(b *testing.B, what string, pid int) {
	b.Helper()
	kb := map[string]float64{}
	for _, f := range []string{"status", "smaps_rollup"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			name, v, ok := strings.Cut(sc.Text(), ":")
			if !ok {
				continue
			}
			if n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64); err == nil {
				kb[name] = n
			}
		}
	}
	for name, unit := range map[string]string{"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "Pss": "pss"} {
		v, ok := kb[name]
		if !ok {
			b.Fatalf("no %s for %d", name, pid)
		}
		b.ReportMetric(v/1024, what+"-"+unit+"-MB")
	}
}
