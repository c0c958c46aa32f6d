package e2e

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"toolgate/internal/execpages"
)

// BenchmarkIdleMemoryBreakdown is BenchmarkIdleMemory's run (the same
// config, plus the admin role for the approver, and the same reads) that
// writes where the memory is instead of reporting metrics: into the
// directory $IDLE_PROBE_DIR (skipped without it), at each point (idle,
// calls, quiet; late, 200 s after the calls, with $IDLE_PROBE_LATE set)
// <point>-status.txt, -smaps.txt and -stat.txt from /proc, and -exe.txt,
// the executable's resident pages (/proc/PID/pagemap) by ELF section and,
// in .text, by package; at the end pprof-heap.txt and pprof-goroutine.txt
// (debug=1, from the admin API). $IDLE_PROBE_GODEBUG sets toolgate's
// GODEBUG, $IDLE_PROBE_ENV one more variable (NAME=value),
// $IDLE_PROBE_CALLS the number of calls. docs/performance.md, "Idle memory
// after calls: the heap", reads its output.
func BenchmarkIdleMemoryBreakdown(b *testing.B) {
	out := os.Getenv("IDLE_PROBE_DIR")
	if out == "" {
		b.Skip("IDLE_PROBE_DIR not set")
	}
	bins, err := plainBins()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg := `
listen:
  mcp: 127.0.0.1:0
  admin: 127.0.0.1:0
storage:
  driver: sqlite
  path: ` + q(filepath.Join(dir, "toolgate.db")) + `
agents:
  - id: ` + agentID + `
    token_env: E2E_AGENT_TOKEN
approvers:
  - id: ` + approverID + `
    token_env: E2E_APPROVER_TOKEN
    roles: [admin]
` + upstreamServer(filepath.Join(dir, "record.log")) + `
policy:
  default: deny
  rules:
    - { name: echo is fine, server: t, tools: [echo_raw], effect: allow }
`
	env := map[string]string{}
	if v := os.Getenv("IDLE_PROBE_GODEBUG"); v != "" {
		env["GODEBUG"] = v
	}
	if v := os.Getenv("IDLE_PROBE_ENV"); v != "" {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	g := startGatewayBin(b, bins.toolgate, cfg, env, "--log-level", "warn")
	pid := g.cmd.Process.Pid
	exe := bins.toolgate
	time.Sleep(execpages.StartupTail + idleSettle)
	probeDump(b, out, "idle", pid, exe)

	cs := (&benchGateway{MCP: g.MCP, Admin: g.Admin, tr: g.tr}).connect(b)
	n := idleCalls
	if v, err := strconv.Atoi(os.Getenv("IDLE_PROBE_CALLS")); err == nil {
		n = v
	}
	for i := range n {
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "t__echo_raw", Arguments: map[string]any{"i": i}})
		if err != nil || res.IsError {
			b.Fatalf("call %d: %v %+v", i, err, res)
		}
	}
	last := time.Now()
	time.Sleep(idleSettle)
	probeDump(b, out, "calls", pid, exe)
	time.Sleep(idleQuiet - time.Since(last))
	probeDump(b, out, "quiet", pid, exe)
	if os.Getenv("IDLE_PROBE_LATE") != "" {
		time.Sleep(200*time.Second - time.Since(last))
		probeDump(b, out, "late", pid, exe)
	}
	for _, p := range []string{"heap?debug=1", "goroutine?debug=1"} {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, g.Admin+"/debug/pprof/"+p, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+approverToken)
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		name := strings.SplitN(p, "?", 2)[0]
		if err := os.WriteFile(filepath.Join(out, "pprof-"+name+".txt"), body, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// probeDump writes what BenchmarkIdleMemoryBreakdown reads of pid at
// point what into out.
func probeDump(b *testing.B, out, what string, pid int, exe string) {
	b.Helper()
	read := func(f string) []byte {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			b.Fatal(err)
		}
		return raw
	}
	status, smaps := read("status"), read("smaps")
	for name, data := range map[string][]byte{
		"status": status, "smaps": smaps, "stat": read("stat"), "exe": []byte(exePages(b, pid, exe, smaps)),
	} {
		if err := os.WriteFile(filepath.Join(out, what+"-"+name+".txt"), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// exePages attributes the present pages of exe's mappings (from pid's
// smaps and pagemap) to ELF sections and, in .text, to packages (the
// symbol at each page's middle), in MiB and pages, largest first.
func exePages(b *testing.B, pid int, exe string, smaps []byte) string {
	b.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	syms, err := f.Symbols()
	if err != nil {
		b.Fatal(err)
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].Value < syms[j].Value })
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pm.Close() }()
	bySec := map[string]int{}
	byPkg := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(smaps)))
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || !strings.Contains(fl[0], "-") || fl[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(fl[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		n := (end - start) / 4096
		buf := make([]byte, n*8)
		if _, err := pm.ReadAt(buf, int64(start/4096*8)); err != nil { //nolint:gosec // a user-space address fits
			b.Fatal(err)
		}
		for i := uint64(0); i < n; i++ {
			e := binary.LittleEndian.Uint64(buf[i*8:])
			if e&(1<<63) == 0 {
				continue
			}
			addr := start + i*4096
			sec := "?"
			for _, s := range f.Sections {
				if s.Addr != 0 && addr+2048 >= s.Addr && addr+2048 < s.Addr+s.Size {
					sec = s.Name
				}
			}
			bySec[sec]++
			if sec == ".text" {
				k := sort.Search(len(syms), func(j int) bool { return syms[j].Value > addr+2048 }) - 1
				pkg := "?"
				if k >= 0 {
					pkg = pkgOf(syms[k].Name)
				}
				byPkg[pkg]++
			}
		}
	}
	var sb strings.Builder
	type kv struct {
		k string
		v int
	}
	dump := func(m map[string]int) {
		var l []kv
		for k, v := range m {
			l = append(l, kv{k, v})
		}
		sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v })
		for _, e := range l {
			fmt.Fprintf(&sb, "%8.2f MiB %6d  %s\n", float64(e.v)*4096/(1<<20), e.v, e.k)
		}
	}
	dump(bySec)
	sb.WriteString("-- .text by package\n")
	dump(byPkg)
	return sb.String()
}

// pkgOf is the package path of a Go symbol name.
func pkgOf(sym string) string {
	i := strings.LastIndex(sym, "/")
	rest := sym[i+1:]
	if j := strings.Index(rest, "."); j >= 0 {
		return sym[:i+1+j]
	}
	return sym
}
