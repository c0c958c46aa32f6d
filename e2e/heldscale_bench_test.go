package e2e

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkHeldCalls measures held-call scale on the real binary (built
// without the race detector), on SQLite and on a Postgres cluster of its
// own: N = 1,000, 5,000 and 10,000 calls from 100 agents held at once
// through e2e/heldload, then all approved. It reports
//
//   - hold-s: from the first call sent until all N are pending;
//   - rss-MB: toolgate's resident memory while they are held;
//   - held-peak-rss-MB: toolgate's peak RSS (VmHWM) up to "held", the
//     admission's; run-peak-MB: the peak over the whole run (the 200 MB
//     goal's number), and <phase>-peak-MB for each phase, admit, held
//     (the measurements, tail and idle window), approve (approve-all) and
//     after (3 s after the last answer), each with its peak sample's time
//     and toolgate's runtime then (phaseWatch, heldphase_bench_test.go);
//   - tail-s and tail-cpu-s: the burst's tail, from the end of the
//     measurements above until toolgate and the database together use
//     less than 3 % of a core over 2 s (at most 2 minutes), and the CPU
//     seconds they used meanwhile: gctune returning the burst's free heap,
//     the audit trail chaining the admissions, autovacuum after the burst
//     (TOOLGATE_BENCH_TAIL=0: no wait, the tail falls into the idle
//     window, as before 2026-12-02 later);
//   - idle-cpu-%: CPU of toolgate and of the database's processes (for
//     SQLite, inside toolgate; for Postgres the postmaster and all its
//     children, ended ones included) over the 10 s of holding idle after
//     the tail, in % of one core; idle-toolgate-cpu-%: toolgate's share;
//     with TOOLGATE_BENCH_PROFILE the split by Postgres process role is in
//     <driver>-<N>-idle-split.txt;
//   - admit-cpu-ms: CPU of toolgate and the database from the first call
//     sent until all N are pending, per call;
//   - <held|idle>-heap-inuse-MB, -heap-free-MB, -stack-MB, -heap-alloc-MB,
//     -gc-goal-MB: where toolgate's memory is (runtime.MemStats, no
//     collection) just after rss-MB and just after rss-idle-MB (memSplit);
//   - approvals/s: N divided by the time from the first approval sent (32
//     at a time through the admin API) until every call returned;
//   - approve-cpu-ms: CPU of toolgate and the database's processes over
//     that time, per approval (steadier than approvals/s on a shared
//     machine; the upstream processes are not counted); on Postgres
//     approve-db-cpu-ms is the cluster's part of it; the other processes'
//     CPU per approval over the same time: approve-upstream-cpu-ms (the
//     upstream, toolgate's child), approve-load-cpu-ms (heldload, the
//     agents reading their answers), approve-bench-cpu-ms (this process:
//     the approvers); approve-machine-cores: the machine's busy cores on
//     average (/proc/stat, other users' processes included);
//     approve-one-p-%: the share of toolgate's GOMAXPROCS samples (every
//     250 ms, its /metrics) that read one P (procs.Follow); with
//     TOOLGATE_BENCH_PROFILE a CPU profile of approve-all's first 5 s
//     (TOOLGATE_BENCH_APPROVE_PROFILE_S sets another length; under the
//     admin listener's write timeout) and a 2 s execution trace of toolgate
//     (…-approve-trace.out; go tool trace -pprof=sync and the like) and
//     the allocations approve-all made (…-approve-allocs.pprof, against
//     …-idle-allocs-1.pprof as -base); the approvers keep their
//     connections (approverClient; TOOLGATE_BENCH_APPROVE_CLOSE=1: one
//     per approval, as before pgapprove32);
//
// The upstream writes its record lines without fsyncing each one
// (testupstream -record-nosync): with the fsync, which it serialises,
// the upstream's disk bounded approve-all (docs/performance.md, "What
// bounds approve-all on Postgres"); TOOLGATE_BENCH_RECORD_SYNC=1 keeps it.
//   - goroutines/call and stack-KB/call: toolgate's goroutines and
//     goroutine stack memory (runtime.MemStats.StackInuse, from its
//     /debug/pprof/heap after two collections: the runtime halves the
//     stack of a parked goroutine only when it collects, once per
//     collection) while the calls are held, divided by N; rss-gc-MB: the
//     RSS after those collections; live-B/call: the live heap they left
//     (HeapAlloc), divided by N (the process's fixed heap included);
//   - rss-idle-MB: the RSS at the end of the 10 s of holding idle (after
//     gctune has had time to return the burst's free heap to the OS);
//   - idle-drops, approve-drops: packets the kernel dropped for a full
//     receive backlog (/proc/net/softnet_stat, the machine's counter) over
//     the idle window and over approve-all; idle-retrans,
//     approve-retrans: TCP segments sent again (/proc/net/snmp); the
//     log gives each window's wall-clock bounds (heldnet_bench_test.go);
//   - approve-gcs: toolgate's garbage collections during approve-all;
//     approve-B/approval and approve-allocs/approval: the bytes and
//     allocations toolgate made over it (MemStats TotalAlloc and Mallocs)
//     per approval, with everything it did meanwhile (keep-alive beats,
//     the watch, the audit chain, the heap reads around it);
//     on Postgres approve-autovacuums: autovacuum's runs (vacuum or
//     analyse, toolgate's tables) that ended meanwhile;
//
// and fails unless every call ran exactly once with its own arguments.
// On Postgres toolgate's pool has 16 connections (max_conns);
// TOOLGATE_BENCH_MAX_CONNS sets another size. TOOLGATE_BENCH_TOOLGATE=path
// runs that toolgate binary instead of this tree's (old against new with
// one benchmark).
// The calls share 100 MCP client sessions (one per agent); TOOLGATE_BENCH_SESSIONS
// sets another number of sessions (N: one session per held call). The
// agents speak the go-sdk client's newest revision (2026-07-28: each call
// a stateless request); TOOLGATE_BENCH_PROTOCOL pins another (e.g.
// 2025-11-25: calls on the agents' protocol sessions). With
// TOOLGATE_BENCH_CLOSE=1 every request says "Connection: close" (a
// 2025-era held call so asked is parked since branch tlspark32, and its
// connection closed after the answer; before, it was held on its
// connection's goroutine, the path HTTP/2 takes). With
// TOOLGATE_BENCH_PROGRESS=1 every call carries a progress token and the
// idle window measures the gate's keep-alive beat (TOOLGATE_BENCH_KEEPALIVE,
// TOOLGATE_BENCH_IDLE, TOOLGATE_BENCH_PROBE: heldbeat_bench_test.go).
// The upstream is a stdio server, so 2025-era agents get one upstream
// process per agent session (sessions: per_agent, its default), each
// started on its agent's first approved call, during approve-all;
// 2026-07-28 requests use the shared session (one process).
// TOOLGATE_BENCH_UPSTREAM_SESSIONS=shared (or per_agent) sets the
// server's sessions.
// TOOLGATE_BENCH_N=n runs N=n alone (e.g. 3000, to bisect).
// docs/performance.md has the numbers. Run it alone, it takes minutes:
//
//	go test -run '^$' -bench HeldCalls -benchtime 1x -timeout 60m ./e2e/
func BenchmarkHeldCalls(b *testing.B) {
	ns := []int{1000, 5000, 10000}
	if v := os.Getenv("TOOLGATE_BENCH_N"); v != "" { // another size, e.g. 3000 to bisect
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("TOOLGATE_BENCH_N=%q: want a positive number", v)
		}
		ns = []int{n}
	}
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, n := range ns {
			b.Run(fmt.Sprintf("%s/N=%d", driver, n), func(b *testing.B) {
				for b.Loop() {
					benchHeldCalls(b, driver, n)
				}
			})
		}
	}
}

// loadAgents is how many agents BenchmarkHeldCalls spreads its calls over.
const loadAgents = 100

func loadToken(i int) string { return fmt.Sprintf("e2e-load-token-%03d", i) }

// loadAgentsYAML declares the agents of the benchmark by token hash.
func loadAgentsYAML() string {
	var s strings.Builder
	s.WriteString("agents:\n")
	for i := range loadAgents {
		sum := sha256.Sum256([]byte(loadToken(i)))
		fmt.Fprintf(&s, "  - id: load-%03d\n    token_sha256: %s\n", i, hex.EncodeToString(sum[:]))
	}
	// The approver is an admin too, so that TOOLGATE_BENCH_PROFILE can read
	// the gateway's /debug/pprof/ profiles.
	s.WriteString("approvers:\n  - id: " + approverID + "\n    token_env: E2E_APPROVER_TOKEN\n    roles: [approver, admin]\n")
	return s.String()
}

func benchHeldCalls(b *testing.B, driver string, n int) {
	b.Helper()
	bins, err := plainBins()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	record := filepath.Join(dir, "record.log")
	storage := "storage:\n  driver: sqlite\n  path: " + q(filepath.Join(dir, "toolgate.db")) + "\n"
	dbPID := 0 // the Postgres postmaster; 0 for SQLite (inside toolgate)
	dsn := ""  // the Postgres cluster's
	if driver == "postgres" {
		cluster := startPGCluster(b)
		dsn = cluster.DSN()
		maxConns := "16"
		if v := os.Getenv("TOOLGATE_BENCH_MAX_CONNS"); v != "" { // the pool's size (approve-all's queue)
			if k, err := strconv.Atoi(v); err != nil || k <= 0 {
				b.Fatalf("TOOLGATE_BENCH_MAX_CONNS=%q: want a positive number", v)
			}
			maxConns = v
		}
		storage = "storage:\n  driver: postgres\n  dsn: " + q(cluster.DSN()) + "\n  max_conns: " + maxConns + "\n"
		dbPID = cluster.cmd.Process.Pid
	}
	upstream := upstreamServer(record)
	if os.Getenv("TOOLGATE_BENCH_RECORD_SYNC") != "1" {
		// The upstream's record lines serialise its tool runs, one fsync
		// each (milliseconds on this shared disk, at most a few hundred a
		// second): without it, approve-all measures the gateway, not the
		// upstream's disk. Nothing in this benchmark outlives the machine.
		upstream = strings.Replace(upstream, `args: ["-record", `+q(record)+`]`, `args: ["-record", `+q(record)+`, "-record-nosync"]`, 1)
		if !strings.Contains(upstream, "-record-nosync") {
			b.Fatalf("upstream config changed; -record-nosync not added:\n%s", upstream)
		}
	}
	if v := os.Getenv("TOOLGATE_BENCH_UPSTREAM_SESSIONS"); v != "" {
		// shared: one upstream process for every agent session; per_agent
		// (a stdio server's default): one process per agent session, each
		// started on its agent's first dispatched call
		if v != "shared" && v != "per_agent" {
			b.Fatalf("TOOLGATE_BENCH_UPSTREAM_SESSIONS=%q: want shared or per_agent", v)
		}
		upstream = strings.Replace(upstream, "    call_timeout: 60s\n", "    call_timeout: 60s\n    sessions: "+v+"\n", 1)
		if !strings.Contains(upstream, "sessions: "+v) {
			b.Fatalf("upstream config changed; sessions not set:\n%s", upstream)
		}
	}
	listen := "listen:\n  mcp: 127.0.0.1:0\n  admin: 127.0.0.1:0\n"
	if v := os.Getenv("TOOLGATE_BENCH_READ_HEADER_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v) // e.g. 1s, to see the burst fail at a smaller N
		if err != nil {
			b.Fatalf("TOOLGATE_BENCH_READ_HEADER_TIMEOUT=%q: %v", v, err)
		}
		listen += "  read_header_timeout: " + d.String() + "\n"
	}
	policy := heldScalePolicy
	if keepAlive := benchKeepAlive(b); keepAlive > 0 {
		policy = strings.Replace(policy, "approvals:\n", "approvals:\n  keepalive: "+keepAlive.String()+"\n", 1)
	}
	cfg := listen + storage + loadAgentsYAML() + upstream + policy
	logLevel := "warn"
	switch os.Getenv("TOOLGATE_BENCH_LOG_LEVEL") { // debug: to see why calls failed in a burst
	case "debug":
		logLevel = "debug"
	case "info":
		logLevel = "info"
	}
	toolgateBin := bins.toolgate
	if v := os.Getenv("TOOLGATE_BENCH_TOOLGATE"); v != "" {
		// a toolgate built elsewhere (e.g. from an older tree, without
		// -race), measured by this tree's benchmark
		toolgateBin = v
	}
	g := startGatewayBin(b, toolgateBin, cfg, nil, "--log-level", logLevel)

	tokens := make([]string, loadAgents)
	for i := range tokens {
		tokens[i] = loadToken(i)
	}
	pid := g.cmd.Process.Pid
	cpu := func() cpuReading { return readCPU(pid, dbPID) }
	profileDir := os.Getenv("TOOLGATE_BENCH_PROFILE")
	profilePrefix := ""
	if profileDir != "" {
		profilePrefix = filepath.Join(profileDir, fmt.Sprintf("%s-%d", driver, n))
	}
	phases := watchPhases(b.Context(), b, pid, g.Admin, profilePrefix)
	admitCPU0 := cpu()
	start := time.Now()
	var progressArgs []string
	progressLog := ""
	if os.Getenv("TOOLGATE_BENCH_PROGRESS") == "1" {
		// every call with a progress token: the gate's beat sends each a
		// keep-alive every keepAlive (heldbeat_bench_test.go)
		progressLog = filepath.Join(dir, "progress.log")
		progressArgs = []string{"-progress", progressLog}
	}
	load := startLoadTokens(b, g.MCP, "t__echo_raw", "scale", n, tokens, progressArgs...)
	var pending []apiApproval
	for deadline := time.Now().Add(20 * time.Minute); len(pending) < n; time.Sleep(250 * time.Millisecond) {
		if k := load.answered(); k > 0 {
			// Let the burst finish failing (no new answer over 5 s) so the
			// summary shows every kind of early answer.
			for last := -1; k != last; time.Sleep(5 * time.Second) {
				last, k = k, load.answered()
			}
			b.Fatalf("calls answered before any approval:\n%s", earlyAnswers(load))
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d calls pending after 20 minutes", len(pending), n)
		}
		pending = listAll(b, g.Admin, "pending")
	}
	hold := time.Since(start)
	admitCPU1 := cpu()

	rss := rssMB(b, pid)
	peakRSS := hwmMB(b, pid)                             // the burst's peak (VmHWM), up to "held"
	phases.next(b)                                       // held
	heldMem := readMemSplit(b, g.Admin).rssSplit(b, pid) // no collection: the burst's heap as it is
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		// the heap profile as of the burst's last collection (no gc=1): the
		// live heap that set the goal at "held", batch work in flight
		// included; go tool pprof -diff_base it against …-heap.pprof
		saveProfile(b, g.Admin, "/debug/pprof/heap", filepath.Join(dir, fmt.Sprintf("%s-%d-held-nogc-heap.pprof", driver, n)))
	}
	goroutines, stack, live, heldGoroutines := heldRuntime(b, g.Admin)
	rssGC := rssMB(b, pid) // after the collections heldRuntime asked for
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		// the goroutines alive at "held", before the collections (the
		// goroutine profile saveProfiles writes is after them)
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-held-goroutine.txt", driver, n)), []byte(heldGoroutines), 0o600)
		// toolgate's log until "held" (with GODEBUG=gctrace=1 in the
		// environment: each collection's heap before, after and live)
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-held-stderr.txt", driver, n)), []byte(g.stderr.String()), 0o600)
		saveProfiles(b, g.Admin, filepath.Join(dir, fmt.Sprintf("%s-%d", driver, n)))
		if smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid)); err == nil { // the RSS by mapping: binary, heap arenas, others
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-smaps.txt", driver, n)), smaps, 0o600)
		}
	}
	tail, tailCPU := waitTail(b, cpu)
	idle := benchIdle(b)
	probeCtx, stopProbe := context.WithCancel(b.Context())
	probed := make(chan []time.Duration, 1)
	if probe := benchProbe(b); probe != "" {
		go func() { probed <- probeLatency(probeCtx, g.Admin, probe == "newconn") }()
	} else {
		probed <- nil
	}
	idleGCs0 := readMemSplit(b, g.Admin).numGC // no collection: the heap profile's MemStats
	pgStatIdleStart(b, dsn)
	counts0 := readIdleCounts(b, pid, dsn)
	var idleVacuums0 int64
	if dsn != "" {
		idleVacuums0 = pgAutovacuums(b, dsn)
	}
	net0 := readNet()
	idleFrom := net0.at
	cpu0 := cpu()
	idleProfiled := make(chan struct{})
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		// what the idle window allocates: the delta of these two is
		// go tool pprof -base <..>-idle-allocs-0.pprof <..>-idle-allocs-1.pprof
		saveProfile(b, g.Admin, "/debug/pprof/allocs", filepath.Join(dir, fmt.Sprintf("%s-%d-idle-allocs-0.pprof", driver, n)))
		go func() { // where the idle CPU goes (gctune's release, heartbeats, leases)
			defer close(idleProfiled)
			saveProfile(b, g.Admin, "/debug/pprof/profile?seconds=9", filepath.Join(dir, fmt.Sprintf("%s-%d-idle-cpu.pprof", driver, n)))
		}()
	} else {
		close(idleProfiled)
	}
	time.Sleep(idle) // holding idle is what is measured
	<-idleProfiled
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		saveProfile(b, g.Admin, "/debug/pprof/allocs", filepath.Join(dir, fmt.Sprintf("%s-%d-idle-allocs-1.pprof", driver, n)))
	}
	cpu1 := cpu()
	net1 := readNet()
	idleTo := net1.at
	counts0.report(b, readIdleCounts(b, pid, dsn), idleTo.Sub(idleFrom), dsn != "")
	pgStatIdleSave(b, dsn, idleTo.Sub(idleFrom))
	if dsn != "" {
		// autovacuum's runs that ended in the idle window: the burst's
		// maintenance, not the cost of holding (its CPU is in the split)
		b.ReportMetric(float64(pgAutovacuums(b, dsn)-idleVacuums0), "idle-autovacuums")
		if file := os.Getenv("TOOLGATE_BENCH_PGSTAT"); file != "" {
			writeCPUSplit(b, file+".idle-split", cpu0, cpu1, idle)
		}
	}
	stopProbe()
	probes := <-probed
	idleCPU := percentOfCore(cpu1.total()-cpu0.total(), idle)
	idleGateway := percentOfCore(cpu1.gateway-cpu0.gateway, idle)
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		writeCPUSplit(b, filepath.Join(dir, fmt.Sprintf("%s-%d-idle-split.txt", driver, n)), cpu0, cpu1, idle)
	}
	rssIdle := rssMB(b, pid) // after holding idle: what the held calls cost while they wait
	idleMem := readMemSplit(b, g.Admin).rssSplit(b, pid)
	// toolgate's collections in the idle window (and the moments around
	// it): gctune's release of the burst's free heap, when it falls there
	b.ReportMetric(float64(idleMem.numGC-idleGCs0), "idle-gcs")
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		saveProfile(b, g.Admin, "/debug/pprof/heap?debug=1", filepath.Join(dir, fmt.Sprintf("%s-%d-idle-heap.txt", driver, n)))
	}

	ids := make([]string, len(pending))
	for i, a := range pending {
		ids[i] = a.ID
	}
	var commits0, vacuums0 int64
	if dsn != "" {
		commits0 = pgStatStart(b, dsn)
		vacuums0 = pgAutovacuums(b, dsn)
	}
	phases.next(b) // approve
	start = time.Now()
	cpu0 = cpu()
	procs0 := readApprove(pid, dbPID, load)
	net2 := readNet()
	mem0 := readMemSplit(b, g.Admin)
	cpuProfiled := make(chan struct{})
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		go func() { // the first seconds of approve-all
			defer close(cpuProfiled)
			prefix := filepath.Join(dir, fmt.Sprintf("%s-%d-approve", driver, n))
			saveProfile(b, g.Admin, "/debug/pprof/profile?seconds="+cmp.Or(os.Getenv("TOOLGATE_BENCH_APPROVE_PROFILE_S"), "5"), prefix+"-cpu.pprof")
			saveProfile(b, g.Admin, "/debug/pprof/goroutine?debug=1", prefix+"-goroutine.txt")
			// where goroutines wait (go tool trace -pprof=sync|net|syscall|sched)
			saveProfile(b, g.Admin, "/debug/pprof/trace?seconds=2", prefix+"-trace.out")
		}()
	} else {
		close(cpuProfiled)
	}
	procsW := watchProcs(b.Context(), g.Admin)
	hc := approverClient(32)
	statuses := approveAllVia(b.Context(), hc, g.Admin, ids, 32, 20*time.Minute)
	if hc != nil {
		hc.CloseIdleConnections()
	}
	res := load.results(b, 20*time.Minute)
	took := time.Since(start)
	phases.next(b) // after
	net3 := readNet()
	mem1 := readMemSplit(b, g.Admin)
	oneP := procsW.stop()
	cpu1 = cpu()
	procs1 := readApprove(pid, dbPID, load)
	<-cpuProfiled
	if dir := os.Getenv("TOOLGATE_BENCH_PROFILE"); dir != "" {
		// what approve-all allocated: go tool pprof -base
		// <..>-idle-allocs-1.pprof <..>-approve-allocs.pprof
		saveProfile(b, g.Admin, "/debug/pprof/allocs", filepath.Join(dir, fmt.Sprintf("%s-%d-approve-allocs.pprof", driver, n)))
	}
	for id, s := range statuses {
		if s != 200 {
			b.Fatalf("approve %s answered %d", id, s)
		}
	}
	if dsn != "" {
		if file := os.Getenv("TOOLGATE_BENCH_PGSTAT"); file != "" {
			// approve-all's CPU by process role; ms per approval =
			// % of one core × approve-s × 10 / N
			writeCPUSplit(b, file+".approve-split", cpu0, cpu1, took)
		}
		pgStatSave(b, dsn, commits0, n)
		// autovacuum and autoanalyze runs that ended during approve-all (and
		// the checks just above)
		b.ReportMetric(float64(pgAutovacuums(b, dsn)-vacuums0), "approve-autovacuums")
	}
	counts := map[string]int{}
	for _, line := range readRecord(b, record) {
		counts[line]++
	}
	for i := range n {
		args := fmt.Sprintf(`{"i":%d,"tag":"scale"}`, i)
		if r := res[i]; r.word != "ok" || r.text != args || counts["echo_raw "+args] != 1 {
			b.Fatalf("call %d: %s %q, ran %d times; want ok with its arguments, once", i, r.word, r.text, counts["echo_raw "+args])
		}
	}
	time.Sleep(phaseAfter) // the after phase: what approve-all leaves
	phases.stop(b)
	if dsn != "" {
		pgTablesSave(b, dsn, n)
	}
	phases.report(b)
	if progressLog != "" {
		readBeatStats(b, progressLog, n, idleFrom, idleTo).report(b)
	}
	net0.report(b, "idle", net1)
	net2.report(b, "approve", net3)
	b.ReportMetric(float64(mem1.numGC-mem0.numGC), "approve-gcs") // toolgate's collections during approve-all
	b.ReportMetric(float64(mem1.totalAlloc-mem0.totalAlloc)/float64(n), "approve-B/approval")
	b.ReportMetric(float64(mem1.mallocs-mem0.mallocs)/float64(n), "approve-allocs/approval")
	if probes != nil {
		reportProbes(b, probes)
	}
	b.ReportMetric(hold.Seconds(), "hold-s")
	b.ReportMetric(rss, "rss-MB")
	b.ReportMetric(peakRSS, "held-peak-rss-MB")
	// CPU of toolgate and the database per admission, from the first call
	// sent until all N are pending (the pending-list polls included).
	b.ReportMetric(float64(admitCPU1.total()-admitCPU0.total())/clockTicks*1000/float64(n), "admit-cpu-ms")
	b.ReportMetric(idleCPU, "idle-cpu-%")
	b.ReportMetric(idleGateway, "idle-toolgate-cpu-%")
	b.ReportMetric(tail.Seconds(), "tail-s")
	b.ReportMetric(tailCPU, "tail-cpu-s")
	b.ReportMetric(float64(n)/took.Seconds(), "approvals/s")
	b.ReportMetric(float64(cpu1.total()-cpu0.total())/clockTicks*1000/float64(n), "approve-cpu-ms")
	if driver == "postgres" {
		b.ReportMetric(float64(cpu1.db.total()-cpu0.db.total())/clockTicks*1000/float64(n), "approve-db-cpu-ms")
	}
	// The other processes' CPU per approval during approve-all (heldload
	// until it exited with the last answer), and how many of the machine's
	// cores were busy on average (all processes, other users' included).
	perApproval := func(d int64) float64 { return float64(d) / clockTicks * 1000 / float64(n) }
	b.ReportMetric(perApproval(procs1.upstream-procs0.upstream), "approve-upstream-cpu-ms")
	b.ReportMetric(perApproval(procs1.load-procs0.load), "approve-load-cpu-ms")
	b.ReportMetric(perApproval(procs1.bench-procs0.bench), "approve-bench-cpu-ms")
	b.ReportMetric(float64(procs1.machine-procs0.machine)/clockTicks/took.Seconds(), "approve-machine-cores")
	b.ReportMetric(oneP, "approve-one-p-%") // samples of toolgate's GOMAXPROCS that read 1 (procs.Follow)
	b.ReportMetric(rssGC, "rss-gc-MB")
	b.ReportMetric(float64(live)/float64(n), "live-B/call") // the process's fixed heap included
	b.ReportMetric(rssIdle, "rss-idle-MB")
	b.ReportMetric(float64(goroutines)/float64(n), "goroutines/call")
	b.ReportMetric(float64(stack)/1024/float64(n), "stack-KB/call")
	heldMem.report(b, "held")
	idleMem.report(b, "idle")
}

// memSplit is where toolgate's memory is, from the runtime.MemStats its
// /debug/pprof/heap?debug=1 prints (bytes): the heap's spans in use
// (HeapInuse, of which HeapAlloc is objects not yet swept or live), the
// free heap the runtime has not returned to the OS (HeapIdle −
// HeapReleased: part of the RSS), and the goroutine stacks (StackInuse).
//
// With the process's /proc status read at the same moment (rssSplit) it
// also splits the RSS: the binary's file pages (RssFile), the runtime's
// own metadata (runtime: GCSys, MSpanSys, MCacheSys, BuckHashSys and
// OtherSys, as mapped: an upper bound of what of it is resident), and
// what of the anonymous RSS none of the Go columns explain (not-Go: the
// C heap of modernc's SQLite, which its libc maps itself; pgx buffers are
// Go heap).
type memSplit struct {
	heapAlloc, heapInuse, heapFree, stack, nextGC uint64
	numGC                                         uint64 // collections since toolgate started
	totalAlloc, mallocs                           uint64 // bytes and objects allocated since toolgate started
	runtime                                       uint64
	rssAnon, rssFile                              float64 // MB; 0 unless rssSplit read them
}

// readMemSplit reads toolgate's memSplit without a collection.
func readMemSplit(tb testing.TB, admin string) memSplit {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, admin+"/debug/pprof/heap?debug=1", nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET heap profile: %d %v", resp.StatusCode, err)
	}
	field := func(name string) uint64 {
		i := strings.Index(string(body), "\n# "+name+" = ")
		if i < 0 {
			tb.Fatalf("no %s in the heap profile", name)
		}
		var v uint64
		if _, err := fmt.Sscanf(string(body[i+1:]), "# "+name+" = %d", &v); err != nil {
			tb.Fatalf("heap profile's %s line: %v", name, err)
		}
		return v
	}
	idle, released := field("HeapIdle"), field("HeapReleased")
	sys := func(name string) uint64 { // "# MSpan = inuse / sys": the sys
		i := strings.Index(string(body), "\n# "+name+" = ")
		if i < 0 {
			tb.Fatalf("no %s in the heap profile", name)
		}
		var inuse, v uint64
		if _, err := fmt.Sscanf(string(body[i+1:]), "# "+name+" = %d / %d", &inuse, &v); err != nil {
			tb.Fatalf("heap profile's %s line: %v", name, err)
		}
		return v
	}
	return memSplit{
		heapAlloc:  field("HeapAlloc"),
		numGC:      field("NumGC"),
		totalAlloc: field("TotalAlloc"),
		mallocs:    field("Mallocs"),
		heapInuse:  field("HeapInuse"),
		heapFree:   idle - released,
		stack:      field("Stack"),
		nextGC:     field("NextGC"),
		runtime:    sys("MSpan") + sys("MCache") + field("BuckHashSys") + field("GCSys") + field("OtherSys"),
	}
}

// rssSplit adds pid's RssAnon and RssFile (MB, /proc/<pid>/status) to m.
func (m memSplit) rssSplit(tb testing.TB, pid int) memSplit {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		for name, dst := range map[string]*float64{"RssAnon:": &m.rssAnon, "RssFile:": &m.rssFile} {
			if v, ok := strings.CutPrefix(line, name); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				if err != nil {
					tb.Fatal(err)
				}
				*dst = kb / 1024
			}
		}
	}
	return m
}

// report reports the split in MB as <what>-heap-inuse-MB, <what>-heap-free-MB,
// <what>-stack-MB, <what>-heap-alloc-MB and <what>-gc-goal-MB, and, when
// rssSplit read them, <what>-rss-file-MB, <what>-runtime-MB and
// <what>-not-go-MB (RssAnon less the heap in use, the free heap, the
// stacks and the runtime's metadata; negative when some of that is not
// resident).
func (m memSplit) report(b *testing.B, what string) {
	b.Helper()
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mb(m.heapInuse), what+"-heap-inuse-MB")
	b.ReportMetric(mb(m.heapFree), what+"-heap-free-MB")
	b.ReportMetric(mb(m.stack), what+"-stack-MB")
	b.ReportMetric(mb(m.heapAlloc), what+"-heap-alloc-MB")
	b.ReportMetric(mb(m.nextGC), what+"-gc-goal-MB")
	if m.rssAnon > 0 {
		b.ReportMetric(m.rssFile, what+"-rss-file-MB")
		b.ReportMetric(mb(m.runtime), what+"-runtime-MB")
		b.ReportMetric(m.rssAnon-mb(m.heapInuse+m.heapFree+m.stack+m.runtime), what+"-not-go-MB")
	}
}

// heldRuntime reads toolgate's goroutine count and, after two collections,
// its goroutine stack bytes (StackInuse) and live heap (HeapAlloc: the
// objects the second collection kept) from its admin listener's
// /debug/pprof/ (the approver is an admin in this benchmark).
// It also returns the goroutine profile (debug=1) it read before the
// collections.
func heldRuntime(tb testing.TB, admin string) (goroutines int, stack, live int64, profile string) {
	tb.Helper()
	get := func(path string) string {
		req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, admin+path, nil)
		if err != nil {
			tb.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+approverToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			tb.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return string(body)
	}
	profile = get("/debug/pprof/goroutine?debug=1")
	if _, err := fmt.Sscanf(profile, "goroutine profile: total %d", &goroutines); err != nil {
		tb.Fatalf("goroutine profile: %v", err)
	}
	get("/debug/pprof/heap?debug=1&gc=1") // a collection halves a stack at most once
	heap := get("/debug/pprof/heap?debug=1&gc=1")
	i := strings.Index(heap, "\n# Stack = ")
	if i < 0 {
		tb.Fatal("no StackInuse in the heap profile")
	}
	if _, err := fmt.Sscanf(heap[i+1:], "# Stack = %d", &stack); err != nil {
		tb.Fatalf("heap profile's Stack line: %v", err)
	}
	i = strings.Index(heap, "\n# HeapAlloc = ")
	if i < 0 {
		tb.Fatal("no HeapAlloc in the heap profile")
	}
	if _, err := fmt.Sscanf(heap[i+1:], "# HeapAlloc = %d", &live); err != nil {
		tb.Fatalf("heap profile's HeapAlloc line: %v", err)
	}
	return goroutines, stack, live, profile
}

// saveProfiles writes the gateway's heap and goroutine profiles to
// prefix-heap.pprof, prefix-heap.txt and prefix-goroutine.txt (for
// TOOLGATE_BENCH_PROFILE).
func saveProfiles(tb testing.TB, admin, prefix string) {
	tb.Helper()
	saveProfile(tb, admin, "/debug/pprof/heap?gc=1", prefix+"-heap.pprof")
	saveProfile(tb, admin, "/debug/pprof/heap?debug=1", prefix+"-heap.txt") // with runtime.MemStats
	saveProfile(tb, admin, "/debug/pprof/goroutine?debug=1", prefix+"-goroutine.txt")
}

// saveProfile writes the admin listener's path (a /debug/pprof/ profile)
// to file. It reports failures with Error, so it may run on any goroutine.
func saveProfile(tb testing.TB, admin, path, file string) {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, admin+path, nil) //nolint:gosec // admin is the test's own gateway (its ready file), path a constant
	if err != nil {
		tb.Error(err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+approverToken)
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // as above
	if err != nil {
		tb.Error(err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
		return
	}
	if err := os.WriteFile(file, body, 0o600); err != nil {
		tb.Error(err)
	}
}

// startLoadTokens is startLoad with the calls spread over tokens.
// extra are more heldload arguments.
func startLoadTokens(tb testing.TB, mcpURL, tool, tag string, n int, tokens []string, extra ...string) *loadProc {
	tb.Helper()
	b, err := plainBins()
	if err != nil {
		tb.Fatalf("build: %v", err)
	}
	cmd := exec.Command(b.heldload, append([]string{"-mcp", mcpURL, "-tool", tool, "-tag", tag, "-n", strconv.Itoa(n)}, extra...)...) //nolint:gosec // G702: heldload, built by this test; n is the call count (TOOLGATE_BENCH_N)
	if s := os.Getenv("TOOLGATE_BENCH_SESSIONS"); s != "" {
		sessions, err := strconv.Atoi(s)
		if err != nil || sessions <= 0 {
			tb.Fatalf("TOOLGATE_BENCH_SESSIONS=%q: want a positive number", s)
		}
		cmd.Args = append(cmd.Args, "-sessions", strconv.Itoa(sessions)) // e.g. N: one MCP session per held call
	}
	if v := os.Getenv("TOOLGATE_BENCH_PROTOCOL"); v != "" {
		cmd.Args = append(cmd.Args, "-protocol", v)
	}
	if os.Getenv("TOOLGATE_BENCH_CLOSE") == "1" {
		cmd.Args = append(cmd.Args, "-close")
	}
	cmd.Env = append(childEnv(), "TESTCLIENT_TOKENS="+strings.Join(tokens, ","))
	return runLoad(tb, cmd)
}

// rssMB returns the resident memory of pid in MB (VmRSS).
func rssMB(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb / 1024
		}
	}
	tb.Fatalf("no VmRSS for %d", pid)
	return 0
}

// earlyAnswers summarises the answers heldload printed before any
// approval: how many of each kind (the word and the error text without
// the call's own numbers), then the first lines as printed.
func earlyAnswers(load *loadProc) string {
	out := load.stdout.String()
	kinds := map[string]int{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines {
		_, rest, _ := strings.Cut(line, " ")
		kinds[errorKind(rest)]++
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%6d in all\n", len(lines))
	for k, c := range kinds {
		fmt.Fprintf(&s, "%6d × %s\n", c, k)
	}
	return s.String() + firstLines(out, 5)
}

// errorKind is an answer line's text with its approval ids, times,
// addresses and numbers masked, so that answers of one kind group
// together.
func errorKind(s string) string {
	s = uuidOrTime.ReplaceAllString(s, "…")
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '#'
		}
		return r
	}, s)
}

var uuidOrTime = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT[0-9:.]+Z`)

// approverClient is the client approve-all's n approvers share: it keeps
// their connections to the admin API open between approvals, as an
// approver's browser or the CLI's client (internal/cli) does, so each
// approval is one request on a kept connection, not a TCP connection of
// its own. TOOLGATE_BENCH_APPROVE_CLOSE=1 returns nil: a connection per
// approval, closed after its answer, as the benchmark did until
// 2026-12-05 (pgapprove32), to compare with the numbers measured so.
func approverClient(n int) *http.Client {
	if os.Getenv("TOOLGATE_BENCH_APPROVE_CLOSE") == "1" {
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = n
	return &http.Client{Transport: t}
}
