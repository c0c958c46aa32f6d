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
//     from one agent session (still connected);
//   - quiet-rss-MB, …: idleQuiet after the last call, once the process has
//     turned quiet (execpages.WhenQuiet releases again QuietAfter after the
//     last call, at one of its looks every QuietLook, having collected the
//     heap CollectBefore earlier), plus idleSettle;
//   - quiet-cpu-%: toolgate's CPU (user and system, share of one CPU)
//     over that quiet wait: the idle loops, against execpages.QuietCPU;
//   - first-call-us, first-call-faults: the latency of the next call (as
//     the agent sees it) and toolgate's minor page faults during it;
//     next-call-us, next-call-faults: the same for the call after it.
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
	// idleQuiet is how long after the last call the quiet read comes:
	// execpages.QuietAfter plus two of its looks, plus idleSettle. (Literal,
	// so that the bench runs on a tree without the quiet release too.)
	idleQuiet = 30*time.Second + 2*5*time.Second + idleSettle
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
	last := time.Now()
	time.Sleep(idleSettle)
	reportMemory(b, "calls", pid)

	cpu0 := procStat(b, pid)
	time.Sleep(idleQuiet - time.Since(last))
	cpu1 := procStat(b, pid)
	reportMemory(b, "quiet", pid)
	b.ReportMetric(100*(cpu1.cpu-cpu0.cpu).Seconds()/cpu1.at.Sub(cpu0.at).Seconds(), "quiet-cpu-%")

	for _, what := range []string{"first", "next"} {
		before := procStat(b, pid)
		start := time.Now()
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "t__echo_raw", Arguments: map[string]any{"i": what}})
		took := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("%s call after the quiet wait: %v %+v", what, err, res)
		}
		b.ReportMetric(float64(took.Microseconds()), what+"-call-us")
		b.ReportMetric(float64(procStat(b, pid).minflt-before.minflt), what+"-call-faults")
	}
}

// stat is what procStat reads of a process.
type stat struct {
	at     time.Time
	cpu    time.Duration // user and system
	minflt int64         // minor page faults
}

// procStat reads pid's CPU time and minor faults from /proc/<pid>/stat.
func procStat(b *testing.B, pid int) stat {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command (which may hold spaces), from state (3).
	_, rest, ok := strings.Cut(string(raw), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	num := func(i int) int64 { // field i (1-based, as in proc(5))
		n, err := strconv.ParseInt(f[i-3], 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat field %d: %v", pid, i, err)
		}
		return n
	}
	const ticks = 100 // USER_HZ
	return stat{at: time.Now(), minflt: num(10), cpu: time.Duration(num(14)+num(15)) * time.Second / ticks}
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
