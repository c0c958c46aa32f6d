// Command hopcount counts, per call, what the processes of a call's hop
// ask of the kernel: system calls by kind and outcome, context switches,
// the wake-ups each process received and from whom, migrations. It reads
// the text of a system-wide `perf record` taken while a load generator
// made a known number of calls, and prints one block per process group.
//
//	perf record -a -m 16M -o hop.data -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit \
//	    -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_migrate_task -- sleep 600 &
//	perf=$!; sleep 1
//	loadgen -url http://127.0.0.1:PORT/mcp -concurrency 1 -n 2000 -warmup 0 -payload-bytes 100 &
//	lg=$!; wait $lg; kill -INT $perf; wait $perf
//	perf script -i hop.data -F comm,pid,tid,cpu,time,event,trace > hop.txt
//	go run ./e2e/hopcount -calls 2000 -group toolgate=PID -group child=PID -group loadgen=$lg hop.txt
//
// (-m 16M: a smaller buffer loses events at a few thousand calls a second
// on a busy machine.)
//
// -group NAME=PID[,PID…] names a process group (repeatable); unless a
// group is named "loadgen", every process whose command starts with
// "loadgen" is the group "loadgen" (its requests, writes of at least
// -request-bytes, count the calls when -calls is 0). Each group's
// block gives, per call: system calls by name, with read and write split
// by outcome (data, EAGAIN, EOF), futex by operation and epoll_pwait by
// whether it waited (timeout ≠ 0) or only looked (timeout 0); the threads
// that made them; voluntary switches (the thread slept) and involuntary
// ones (it was preempted); the wake-ups its threads received, by the group
// whose thread was running when they were woken ("self" for a thread of
// the same group: a hand-off between the group's own threads; an
// interrupt's wake-up, such as a sleep's timer, is counted against
// whatever ran when it fired); and migrations. Counts are over the whole
// trace divided by -calls, so a trace should hold the calls and little
// else (start perf before the load, stop it after).
//
// With -steps PROXY,UPSTREAM it times each call's steps through the two
// named groups instead (steps.go); with -disk PROXY it finds the named
// group's disk commits (SQLite's page writes and sync) and compares the
// calls that overlap one with the others (disk.go).
//
// docs/performance.md, "stdio28", has the counts of the stdio hop at C=1;
// "http29" the steps of the HTTP hop against the byte relay.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// syscallNames are the x86-64 numbers of the system calls a hop makes.
var syscallNames = map[int]string{
	0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 11: "munmap",
	13: "rt_sigaction", 14: "rt_sigprocmask", 15: "rt_sigreturn", 16: "ioctl",
	17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev", 24: "sched_yield",
	28: "madvise", 35: "nanosleep", 39: "getpid", 41: "socket", 42: "connect",
	44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 51: "getsockname",
	52: "getpeername", 54: "setsockopt", 55: "getsockopt", 72: "fcntl",
	186: "gettid", 200: "tkill", 202: "futex", 204: "sched_getaffinity",
	228: "clock_gettime", 230: "clock_nanosleep", 232: "epoll_wait", 233: "epoll_ctl",
	234: "tgkill", 257: "openat", 262: "newfstatat", 281: "epoll_pwait",
	288: "accept4", 318: "getrandom", 441: "epoll_pwait2",
}

// An event is one line of `perf script -F comm,pid,tid,cpu,time,event,trace`.
type event struct {
	comm     string
	pid, tid int
	name     string  // "raw_syscalls:sys_enter", "sched:sched_switch", …
	trace    string  // what follows the event's name
	us       float64 // the event's time in µs (0 when it does not parse)
}

// parseEvent parses one line, or reports false for a line that is not an
// event (a header, a lost-events note).
func parseEvent(line string) (event, bool) {
	// "  comm with spaces  PID/TID [CPU] TIME: EVENT: TRACE"
	slash := strings.Index(line, "/")
	for slash >= 0 {
		i := strings.LastIndexByte(line[:slash], ' ')
		if i < 0 {
			return event{}, false
		}
		pid, err1 := strconv.Atoi(line[i+1 : slash])
		rest := line[slash+1:]
		j := strings.IndexByte(rest, ' ')
		if err1 == nil && j > 0 {
			if tid, err := strconv.Atoi(rest[:j]); err == nil {
				f := strings.SplitN(strings.TrimSpace(rest[j:]), ": ", 3)
				if len(f) < 2 || !strings.HasPrefix(f[0], "[") {
					return event{}, false
				}
				e := event{comm: strings.TrimSpace(line[:i]), pid: pid, tid: tid, name: strings.TrimSpace(f[1])}
				// f[0] is "[CPU] SECONDS".
				if _, ts, ok := strings.Cut(f[0], "]"); ok {
					if sec, err := strconv.ParseFloat(strings.TrimSpace(ts), 64); err == nil {
						e.us = sec * 1e6
					}
				}
				if len(f) == 3 {
					e.trace = f[2]
				}
				return e, true
			}
		}
		next := strings.Index(line[slash+1:], "/")
		if next < 0 {
			break
		}
		slash += 1 + next
	}
	return event{}, false
}

// A group's counts over the trace.
type counts struct {
	calls    map[string]int // system calls by name and outcome
	threads  map[int]bool   // threads that made system calls
	vol, inv int            // switches out: slept, preempted
	wokenBy  map[string]int // wake-ups received, by the waker's group
	migrated int
}

func newCounts() *counts {
	return &counts{calls: map[string]int{}, threads: map[int]bool{}, wokenBy: map[string]int{}}
}

// A pending system call: entered, its exit not seen yet.
type pending struct {
	nr   int
	args []string
}

// counter folds events into per-group counts.
type counter struct {
	groupOf map[int]string // pid → group
	tidOf   map[int]string // tid → group, as seen
	pend    map[int]pending
	groups  map[string]*counts
	// requests counts the loadgen's writes of at least minRequest bytes
	// (one per call: its HTTP request).
	requests   int
	minRequest uint64
	wakes      []wake
	migrations []int // threads moved to another CPU
	// namedLoadgen: a group named "loadgen" was given, so no process is
	// in it by its command alone (another loadgen may share the machine).
	namedLoadgen bool
}

func newCounter(groups map[int]string) *counter {
	c := &counter{groupOf: groups, tidOf: map[int]string{}, pend: map[int]pending{}, groups: map[string]*counts{}}
	for _, g := range groups {
		c.namedLoadgen = c.namedLoadgen || g == "loadgen"
	}
	return c
}

func (c *counter) group(e event) string {
	if g, ok := c.groupOf[e.pid]; ok {
		return g
	}
	if !c.namedLoadgen && strings.HasPrefix(e.comm, "loadgen") {
		return "loadgen"
	}
	return ""
}

func (c *counter) of(g string) *counts {
	if c.groups[g] == nil {
		c.groups[g] = newCounts()
	}
	return c.groups[g]
}

// field returns the value of key=value in a tracepoint's text.
func field(trace, key string) string {
	i := strings.Index(" "+trace, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := trace[i+len(key)+1:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

func (c *counter) add(e event) {
	g := c.group(e)
	if g != "" {
		c.tidOf[e.tid] = g
	}
	switch e.name {
	case "raw_syscalls:sys_enter":
		if g == "" {
			return
		}
		// "NR 0 (15, 345917065000, 1000, 0, 0, 0)"
		nr, args, ok := syscallArgs(e.trace)
		if !ok {
			return
		}
		c.pend[e.tid] = pending{nr: nr, args: args}
		c.of(g).threads[e.tid] = true
		if g == "loadgen" && nr == 1 && len(args) > 2 {
			if n, err := strconv.ParseUint(args[2], 16, 64); err == nil && n >= c.minRequest {
				c.requests++
			}
		}
	case "raw_syscalls:sys_exit":
		p, ok := c.pend[e.tid]
		if g == "" || !ok {
			return
		}
		delete(c.pend, e.tid)
		// "NR 0 = -11"
		_, r, _ := strings.Cut(e.trace, "= ")
		ret, err := strconv.ParseInt(strings.TrimSpace(r), 10, 64)
		if err != nil {
			return
		}
		c.of(g).calls[callName(p, ret)]++
	case "sched:sched_switch":
		if g == "" || field(e.trace, "prev_pid") != strconv.Itoa(e.tid) {
			return
		}
		switch field(e.trace, "prev_state") {
		case "S", "D", "I":
			c.of(g).vol++
		default:
			c.of(g).inv++
		}
	case "sched:sched_wakeup":
		tid, err := strconv.Atoi(field(e.trace, "pid"))
		if err != nil {
			return
		}
		from := g
		switch {
		case g != "":
		case e.pid == 0:
			from = "idle/irq"
		default:
			from = "other: " + e.comm
		}
		// The woken thread's group is known once the trace is read: it
		// may not have run yet.
		c.wakes = append(c.wakes, wake{tid: tid, from: from})
	case "sched:sched_migrate_task":
		if tid, err := strconv.Atoi(field(e.trace, "pid")); err == nil {
			c.migrations = append(c.migrations, tid)
		}
	}
}

// A wake is one sched_wakeup: the woken thread and the group (or the
// command, or "idle/irq") of what ran when it was woken.
type wake struct {
	tid  int
	from string
}

// finish counts the wake-ups and migrations of the groups' threads.
func (c *counter) finish() {
	for _, w := range c.wakes {
		wg := c.tidOf[w.tid]
		if wg == "" {
			continue
		}
		from := w.from
		if from == wg {
			from = "self"
		}
		c.of(wg).wokenBy[from]++
	}
	for _, tid := range c.migrations {
		if wg := c.tidOf[tid]; wg != "" {
			c.of(wg).migrated++
		}
	}
	c.wakes, c.migrations = nil, nil
}

// syscallArgs parses "NR n (a, b, …)".
func syscallArgs(trace string) (int, []string, bool) {
	s, ok := strings.CutPrefix(trace, "NR ")
	if !ok {
		return 0, nil, false
	}
	num, rest, _ := strings.Cut(s, " ")
	nr, err := strconv.Atoi(num)
	if err != nil {
		return 0, nil, false
	}
	rest = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(rest), "("), ")")
	return nr, strings.Split(rest, ", "), true
}

// callName names a finished system call with its outcome where the
// outcome tells calls apart: a read or write's data, EAGAIN or EOF, a
// futex's operation, an epoll_pwait that waited or only looked.
func callName(p pending, ret int64) string {
	name, ok := syscallNames[p.nr]
	if !ok {
		name = "nr" + strconv.Itoa(p.nr)
	}
	arg := func(i int) uint64 {
		if i >= len(p.args) {
			return 0
		}
		v, _ := strconv.ParseUint(p.args[i], 16, 64)
		return v
	}
	switch p.nr {
	case 0, 1:
		switch {
		case ret == -11:
			return name + " EAGAIN"
		case ret == 0 && p.nr == 0:
			return name + " EOF"
		case ret < 0:
			return name + " error"
		}
		return name + " data"
	case 202:
		switch arg(1) &^ 0x80 { // FUTEX_PRIVATE_FLAG
		case 0:
			return "futex wait"
		case 1:
			return "futex wake"
		}
		return "futex other"
	case 281, 232, 441:
		if arg(3) == 0 {
			return name + " look (timeout 0)"
		}
		return name + " wait"
	}
	return name
}

// report writes each group's counts per call, groups in order.
func report(w io.Writer, c *counter, order []string, calls int) {
	per := func(n int) float64 { return float64(n) / float64(calls) }
	if _, ok := c.groups["loadgen"]; ok && !slices.Contains(order, "loadgen") {
		order = append(order, "loadgen")
	}
	for _, g := range order {
		k := c.groups[g]
		if k == nil {
			fmt.Fprintf(w, "== %s: nothing in the trace\n", g)
			continue
		}
		total := 0
		for _, n := range k.calls {
			total += n
		}
		fmt.Fprintf(w, "== %s: %.2f system calls per call, %d threads made them\n", g, per(total), len(k.threads))
		fmt.Fprintf(w, "   %s\n", perCall(k.calls, per))
		fmt.Fprintf(w, "   switches out: slept %.2f, preempted %.2f; migrations %.2f\n", per(k.vol), per(k.inv), per(k.migrated))
		woken := 0
		for _, n := range k.wokenBy {
			woken += n
		}
		fmt.Fprintf(w, "   woken %.2f: %s\n", per(woken), perCall(k.wokenBy, per))
	}
}

// perCall lists m's entries of at least 0.005 per call, largest first.
func perCall(m map[string]int, per func(int) float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if per(m[k]) >= 0.005 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, per(m[k]))
	}
	return strings.Join(parts, ", ")
}

// groupFlag collects repeated -group NAME=PID[,PID…].
type groupFlag struct {
	pids  map[int]string
	order []string
}

func (g *groupFlag) String() string { return strings.Join(g.order, ",") }

func (g *groupFlag) Set(s string) error {
	name, list, ok := strings.Cut(s, "=")
	if !ok || name == "" || list == "" {
		return fmt.Errorf("want NAME=PID[,PID…], got %q", s)
	}
	if g.pids == nil {
		g.pids = map[int]string{}
	}
	for _, p := range strings.Split(list, ",") {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("pid %q: %w", p, err)
		}
		g.pids[pid] = name
	}
	g.order = append(g.order, name)
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hopcount:", err)
		os.Exit(2)
	}
}

func run(args []string, out io.Writer) error {
	var groups groupFlag
	fs := flag.NewFlagSet("hopcount", flag.ContinueOnError)
	calls := fs.Int("calls", 0, "calls the trace holds (the divisor); 0: the loadgen's requests counted in the trace")
	minRequest := fs.Uint64("request-bytes", 300, "with -calls 0: the smallest write of the loadgen that is a call's request")
	fs.Var(&groups, "group", "NAME=PID[,PID…]: a process group (repeatable)")
	steps := fs.String("steps", "", "PROXY,UPSTREAM: instead of counts, time each call's steps through the two named groups (steps.go)")
	disk := fs.String("disk", "", "PROXY: instead of counts, the named group's disk commits and the calls that overlap one (disk.go)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *calls < 0 || fs.NArg() != 1 {
		return errors.New("usage: hopcount -calls N -group NAME=PID[,PID…] … PERF_SCRIPT_TEXT")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if *steps != "" {
		return runSteps(f, out, groups.pids, *steps)
	}
	if *disk != "" {
		return runDisk(f, out, groups.pids, *disk, *minRequest)
	}
	c := newCounter(groups.pids)
	c.minRequest = *minRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if e, ok := parseEvent(sc.Text()); ok {
			c.add(e)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	c.finish()
	n := *calls
	if n == 0 {
		if n = c.requests; n == 0 {
			return errors.New("no request of the loadgen in the trace: give -calls")
		}
	}
	fmt.Fprintf(out, "calls: %d (loadgen requests in the trace: %d)\n", n, c.requests)
	report(out, c, groups.order, n)
	return nil
}
