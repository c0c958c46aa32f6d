// Command perfpair measures toolgate binaries against direct-http, and
// optionally against a peer proxy, in paired rounds: every server is up at
// once, each target is loaded for the same short time in turn, and the
// order of the targets is reversed every round, so a change in what else
// runs on the machine falls on all rows alike.
//
//	perfpair -perf-bin DIR -bin LABEL=PATH [-bin LABEL=PATH ...]
//	         [-peer tbxark=PATH] [-upstream stdio|http] [-shared] [-setsid]
//	         [-rounds 6] [-c 16,1] [-duration 3s] [-warmup 1s]
//	         [-payload-bytes 100] [-out DIR]
//
// DIR holds the binaries of ../shared/perf (`loadgen`, `echoserver`), as its
// setup.sh builds them into $PERF_WORK/bin. Each toolgate binary gets the
// configuration of ../shared/perf/toolgate/tg-run.sh (the allowed echo tool,
// SQLite, no admin listener, --insecure-no-auth), plus `sessions: shared`
// with -shared (one stdio child for all agent sessions, like the peer's
// proxy). With -upstream http every toolgate binary gets its own
// `echoserver -http` upstream, and the server CPU counted is toolgate's and
// its upstream's; with stdio, loadgen counts toolgate and the child it spawns.
// -peer tbxark=PATH adds a row for TBXark/mcp-proxy (issue 13's fastest
// plain proxy) built at PATH, configured as ../shared/perf/run.sh's
// tbxark-stdio and tbxark-http rows configure it: it spawns one stdio
// echoserver for all sessions, or with -upstream http it gets an
// `echoserver -http` of its own, and its CPU is counted as a toolgate's
// (with its child, or with its HTTP upstream). It is loaded at
// http://127.0.0.1:PORT/echo/.
// With -setsid every server starts in a session of its own, as run.sh starts
// them: with the kernel's autogroup scheduling each is then a scheduling
// group of its own (docs/performance.md, "stdio29"); without, all of them
// and loadgen share perfpair's.
//
// The loadgen JSON lines go to DIR/results.jsonl (one per target, round and
// concurrency), each with "proc_cpu_us_per_call_each" added: the server
// CPU per call split between the row's processes (toolgate, then its HTTP
// upstream) by their /proc/PID/stat CPU over the loadgen run. The summary
// on stdout gives per row the medians of calls/s, p50 and server CPU per
// call, and per round each row's calls/s as a multiple of direct-http's in
// the same round, and each binary's calls/s and CPU per call against the
// first binary's; then the medians of CPU per call by process: the
// server, its upstream, and loadgen itself (its client_cpu_s over its
// calls); and with -peer, each toolgate binary against each peer, round
// by round (calls/s and CPU per call over the peer's), with both sides'
// medians of p50, p99 and PSS.
//
// Each line also gets "proc_cpu_share_each", each of the row's processes'
// CPU over the loadgen run (warm-up included) as a share of one CPU
// (toolgate alone first: a stdio child is not in it). With -procs every
// toolgate also gets an admin listener, and each of its lines
// "one_p_share", the share of samples of its number of Ps (/metrics every
// 100 ms after the warm-up) that read one (procs.Follow); the summary adds
// the medians of both per row. Each read of /metrics costs toolgate about
// 1.5 ms of CPU, ≈ 0.014 of a CPU at that rate, counted in its share and
// CPU per call.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// binFlag collects repeated -bin LABEL=PATH values.
type binFlag []target

func (b *binFlag) String() string { return fmt.Sprint(len(*b)) }

func (b *binFlag) Set(s string) error {
	label, path, ok := strings.Cut(s, "=")
	if !ok || label == "" || path == "" {
		return fmt.Errorf("want LABEL=PATH, got %q", s)
	}
	if label == directLabel {
		return fmt.Errorf("label %q is the baseline's", label)
	}
	*b = append(*b, target{label: label, bin: path})
	return nil
}

// directLabel is the baseline row: the go-sdk echoserver over HTTP, no proxy.
const directLabel = "direct"

// target is one row: a server listening on port whose processes are pids.
type target struct {
	label string
	bin   string // toolgate or peer binary; empty for the baseline
	peer  bool   // bin is a peer proxy (-peer), not a toolgate
	port  int
	admin int // its admin listener's port (-procs), 0 for none
	pids  []int
}

// path is the URL path at which t serves MCP.
func (t target) path() string {
	if t.peer {
		return tbxarkPath
	}
	return "/mcp"
}

type options struct {
	perfBin      string
	bins         binFlag
	peers        peerFlag
	upstream     string
	shared       bool
	setsid       bool
	procs        bool
	rounds       int
	conc         []int
	duration     time.Duration
	warmup       time.Duration
	payloadBytes int
	out          string
}

func main() {
	var o options
	var conc string
	flag.StringVar(&o.perfBin, "perf-bin", os.Getenv("PERF_WORK")+"/bin", "directory with ../shared/perf's loadgen and echoserver")
	flag.Var(&o.bins, "bin", "LABEL=PATH of a toolgate binary (repeatable; the first is the reference)")
	flag.Var(&o.peers, "peer", "NAME=PATH of a peer proxy measured in the same rounds (repeatable; NAME: tbxark, TBXark/mcp-proxy)")
	flag.StringVar(&o.upstream, "upstream", "stdio", "toolgate's upstream: stdio (a child echoserver) or http (an echoserver -http per binary)")
	flag.BoolVar(&o.shared, "shared", false, "stdio: one child for all agent sessions (sessions: shared)")
	flag.BoolVar(&o.setsid, "setsid", false, "start every server in a session of its own, as ../shared/perf/run.sh does (its own scheduling group under autogroup)")
	flag.BoolVar(&o.procs, "procs", false, "give every toolgate an admin listener and sample its number of Ps during each measurement (one_p_share)")
	flag.IntVar(&o.rounds, "rounds", 6, "rounds; the target order is reversed every other round")
	flag.StringVar(&conc, "c", "16,1", "comma-separated concurrencies, each measured in every round")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "measured time per target, round and concurrency")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "loadgen warm-up before each measurement")
	flag.IntVar(&o.payloadBytes, "payload-bytes", 100, "echo payload size in bytes")
	flag.StringVar(&o.out, "out", "", "output directory (default: a new one under $TMPDIR)")
	flag.Parse()
	for _, s := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatalf("-c: bad concurrency %q", s)
		}
		o.conc = append(o.conc, n)
	}
	if len(o.bins) == 0 {
		fatalf("at least one -bin LABEL=PATH is needed")
	}
	seen := map[string]bool{}
	for _, t := range append(append([]target(nil), o.bins...), o.peers...) {
		if seen[t.label] {
			fatalf("label %q given twice", t.label)
		}
		seen[t.label] = true
	}
	if o.upstream != "stdio" && o.upstream != "http" {
		fatalf("-upstream: want stdio or http, got %q", o.upstream)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "perfpair: "+format+"\n", args...)
	os.Exit(2)
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	for _, name := range []string{"loadgen", "echoserver"} {
		if _, err := os.Stat(filepath.Join(o.perfBin, name)); err != nil {
			return fmt.Errorf("-perf-bin %s: %w (build it with ../shared/perf/setup.sh)", o.perfBin, err)
		}
	}
	if o.out == "" {
		d, err := os.MkdirTemp("", "perfpair-")
		if err != nil {
			return err
		}
		o.out = d
	} else if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}()
	start := func(name string, args ...string) (*exec.Cmd, error) {
		log, err := os.Create(filepath.Join(o.out, fmt.Sprintf("%s-%d.log", filepath.Base(name), len(procs))))
		if err != nil {
			return nil, err
		}
		defer func() { _ = log.Close() }()
		cmd := serverCommand(name, args, o.setsid)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		procs = append(procs, cmd)
		return cmd, nil
	}
	echo := filepath.Join(o.perfBin, "echoserver")
	targets := make([]target, 0, len(o.bins)+len(o.peers)+1)
	port, err := freePort()
	if err != nil {
		return err
	}
	d, err := start(echo, "-http", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	targets = append(targets, target{label: directLabel, port: port, pids: []int{d.Process.Pid}})
	for _, b := range append(append([]target(nil), o.bins...), o.peers...) {
		t := b
		upstream := ""
		if o.upstream == "http" {
			up, err := freePort()
			if err != nil {
				return err
			}
			u, err := start(echo, "-http", fmt.Sprintf("127.0.0.1:%d", up))
			if err != nil {
				return err
			}
			t.pids = append(t.pids, u.Process.Pid)
			upstream = fmt.Sprintf("http://127.0.0.1:%d/mcp", up)
		}
		if t.port, err = freePort(); err != nil {
			return err
		}
		var g *exec.Cmd
		if t.peer {
			conf, err := writeTBXarkConfig(o.out, t.port, o.upstream, upstream, echo)
			if err != nil {
				return err
			}
			if g, err = start(t.bin, "-config", conf); err != nil {
				return err
			}
		} else {
			if o.procs {
				if t.admin, err = freePort(); err != nil {
					return err
				}
			}
			conf, err := writeConfig(o.out, t, o.upstream, upstream, echo, o.shared)
			if err != nil {
				return err
			}
			if g, err = start(t.bin, "serve", "--config", conf, "--insecure-no-auth", "--log-level", "warn"); err != nil {
				return err
			}
		}
		t.pids = append([]int{g.Process.Pid}, t.pids...)
		targets = append(targets, t)
	}
	for _, t := range targets {
		if err := waitListening(ctx, t.port, 15*time.Second); err != nil {
			return fmt.Errorf("%s: %w", t.label, err)
		}
		if t.peer {
			if err := waitRoute(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", t.port, t.path()), 15*time.Second); err != nil {
				return fmt.Errorf("%s: %w", t.label, err)
			}
		}
	}
	results := filepath.Join(o.out, "results.jsonl")
	f, err := os.Create(results)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	loadgen := filepath.Join(o.perfBin, "loadgen")
	for r := 1; r <= o.rounds; r++ {
		for _, c := range o.conc {
			for _, t := range roundOrder(targets, r) {
				if err := ctx.Err(); err != nil {
					return err
				}
				pids := make([]string, len(t.pids))
				for i, p := range t.pids {
					pids[i] = strconv.Itoa(p)
				}
				cmd := exec.CommandContext(ctx, loadgen,
					"-url", fmt.Sprintf("http://127.0.0.1:%d%s", t.port, t.path()),
					"-pid", strings.Join(pids, ","), "-label", t.label,
					"-note", fmt.Sprintf("round=%d", r), "-concurrency", strconv.Itoa(c),
					"-duration", o.duration.String(), "-warmup", o.warmup.String(),
					"-payload-bytes", strconv.Itoa(o.payloadBytes))
				var out bytes.Buffer
				cmd.Stdout = &out
				cmd.Stderr = os.Stderr
				var watch *onePWatch
				if t.admin != 0 {
					watch = watchOneP(ctx, t.admin, o.warmup)
				}
				before, began := cpuSnapshot(t.pids), time.Now()
				err := cmd.Run()
				after, wall := cpuSnapshot(t.pids), time.Since(began)
				oneP, samples := 0.0, 0
				if watch != nil {
					oneP, samples = watch.stop()
				}
				if err != nil {
					return fmt.Errorf("loadgen %s round %d C=%d: %w", t.label, r, c, err)
				}
				line, err := withProcessSplit(bytes.TrimSpace(out.Bytes()), before, after)
				if err == nil {
					line, err = withShares(line, before, after, wall, oneP, samples)
				}
				if err != nil {
					return fmt.Errorf("loadgen %s round %d C=%d: %w", t.label, r, c, err)
				}
				if _, err := f.Write(append(line, '\n')); err != nil {
					return err
				}
			}
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	rows, err := readResults(results)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "results: %s\n", results)
	labels := make([]string, 0, len(targets))
	var peers []string
	for _, t := range targets {
		labels = append(labels, t.label)
		if t.peer {
			peers = append(peers, t.label)
		}
	}
	return summarise(stdout, rows, labels, peers, o.conc)
}

// serverCommand is the command that starts a server (direct-http's
// echoserver, a toolgate, an HTTP upstream), in a session of its own when
// ownSession is set (-setsid).
func serverCommand(name string, args []string, ownSession bool) *exec.Cmd {
	cmd := exec.Command(name, args...)
	if ownSession {
		inOwnSession(cmd)
	}
	return cmd
}

// roundOrder is the order targets are loaded in round r (1-based): as given
// in odd rounds, reversed in even ones.
func roundOrder(targets []target, r int) []target {
	out := append([]target(nil), targets...)
	if r%2 == 0 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// writeConfig writes t's toolgate configuration (the one tg-run.sh writes,
// plus sessions: shared when shared) into a new directory under dir and
// returns its path.
func writeConfig(dir string, t target, kind, upstreamURL, echo string, shared bool) (string, error) {
	d, err := os.MkdirTemp(dir, "tg-"+t.label+"-")
	if err != nil {
		return "", err
	}
	// The data directory before serve: a configured path whose directory
	// is missing is created, but with a warning in the log.
	if err := os.Mkdir(filepath.Join(d, "data"), 0o700); err != nil {
		return "", err
	}
	var b strings.Builder
	admin := ""
	if t.admin != 0 {
		admin = fmt.Sprintf("127.0.0.1:%d", t.admin)
	}
	fmt.Fprintf(&b, "listen: {mcp: \"127.0.0.1:%d\", admin: %q}\n", t.port, admin)
	if admin != "" {
		// An admin listener needs an approver; /metrics asks for none.
		sum := sha256.Sum256([]byte("perfpair"))
		fmt.Fprintf(&b, "approvers: [{id: perfpair, token_sha256: %q, roles: [viewer]}]\n", hex.EncodeToString(sum[:]))
	}
	fmt.Fprintf(&b, "storage: {driver: sqlite, path: %q}\n", filepath.Join(d, "data", "toolgate.db"))
	b.WriteString("servers:\n  echo:\n")
	if kind == "http" {
		fmt.Fprintf(&b, "    url: %q\n", upstreamURL)
	} else {
		fmt.Fprintf(&b, "    command: %q\n    args: []\n", echo)
		if shared {
			b.WriteString("    sessions: shared\n")
		}
	}
	b.WriteString("    tool_prefix: false\npolicy:\n  default: deny\n  rules:\n")
	b.WriteString("    - {name: echo allowed, server: echo, tools: [echo], effect: allow}\n")
	path := filepath.Join(d, "toolgate.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitListening(ctx context.Context, port int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on port %d after %s: %w", port, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// result is the part of a loadgen JSON line the summary reads.
type result struct {
	Label       string  `json:"label"`
	Concurrency int     `json:"concurrency"`
	Note        string  `json:"note"`
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	CallsPerS   float64 `json:"calls_per_s"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	PSSTreeKB   float64 `json:"pss_tree_kb"` // PSS of the row's processes and their children at the end
	CPUPerCall  float64 `json:"proc_cpu_us_per_call"`
	// CPUEach splits CPUPerCall by process, in the row's pid order
	// (toolgate, then its HTTP upstream); empty for a line without it.
	CPUEach   []float64 `json:"proc_cpu_us_per_call_each"`
	ClientCPU float64   `json:"client_cpu_s"` // loadgen's own CPU in the measured phase
	// Share is each process's share of one CPU over the run, in pid order.
	Share []float64 `json:"proc_cpu_share_each"`
	// OneP is the share of the run's samples on one P (-procs); nil
	// without.
	OneP *float64 `json:"one_p_share"`
}

func readResults(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var rows []result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errors.New("no results")
	}
	return rows, nil
}
