package e2e

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procTimes is the CPU time, in clock ticks (user + system), of a process
// tree: the root process (toolgate, a Postgres postmaster), each of its
// live children by PID, and its children that have ended and been waited
// for (the root's cutime + cstime: Postgres's autovacuum workers and
// ended backends). Its difference between two readings (sub) counts every
// child's CPU in the interval once, including children that started or
// ended in it; summing the live children's times at two instants would
// miss an autovacuum worker's work, or subtract it when the worker ends
// between the readings.
type procTimes struct {
	root   int64
	reaped int64
	kids   map[int]procTime
}

// procTime is one live child's CPU ticks and role.
type procTime struct {
	ticks int64
	role  string
}

// readProcTimes reads the times of pid and its children; a Postgres child's
// role is its process title ("walwriter", "autovacuum worker", "backend"
// for a client connection, …).
func readProcTimes(pid int) procTimes {
	p := procTimes{kids: map[int]procTime{}}
	if f := statFields(pid); f != nil {
		p.root = statField(f, 11) + statField(f, 12)
		p.reaped = statField(f, 13) + statField(f, 14)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := statFields(c)
		if f == nil {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			p.kids[c] = procTime{ticks: statField(f, 11) + statField(f, 12), role: procRole(c)}
		}
	}
	return p
}

// total is the CPU ticks of the whole tree, reaped children included.
func (p procTimes) total() int64 {
	sum := p.root + p.reaped
	for _, k := range p.kids {
		sum += k.ticks
	}
	return sum
}

// sub returns the CPU ticks spent between q (earlier) and p, by role: the
// root's own as "main", ended children's as "ended" (their ticks after q).
func (p procTimes) sub(q procTimes) map[string]int64 {
	out := map[string]int64{"main": p.root - q.root}
	ended := p.reaped - q.reaped
	for pid, k := range q.kids {
		if _, ok := p.kids[pid]; !ok {
			ended -= k.ticks // counted in reaped for its whole life
		}
	}
	out["ended"] = ended
	for pid, k := range p.kids {
		out[k.role] += k.ticks - q.kids[pid].ticks // 0 for a child started since
	}
	return out
}

// statFields returns the fields of /proc/pid/stat after the command name,
// or nil when pid is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
}

func statField(f []string, i int) int64 {
	if i >= len(f) {
		return 0
	}
	n, _ := strconv.ParseInt(f[i], 10, 64)
	return n
}

// procRole names a Postgres child by its process title ("postgres:
// walwriter", "postgres: postgres postgres 127.0.0.1(5432) idle" for a
// backend); other processes by their command name.
func procRole(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "?"
	}
	title := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return title
	}
	for _, r := range []string{"autovacuum worker", "autovacuum launcher", "walwriter", "checkpointer",
		"background writer", "logical replication launcher", "stats collector", "archiver", "walsender"} {
		if strings.HasPrefix(rest, r) {
			return r
		}
	}
	return "backend"
}

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTicks = 100

// cpuReading is the CPU time of toolgate's process (gateway; for SQLite
// the database's work is in it) and of the Postgres cluster's process
// tree (db; zero for SQLite).
type cpuReading struct {
	gateway int64
	db      procTimes
}

// readCPU reads toolgate's CPU ticks and, when dbPID is not 0, those of the
// Postgres cluster under that postmaster.
func readCPU(gateway, dbPID int) cpuReading {
	r := cpuReading{}
	if f := statFields(gateway); f != nil {
		r.gateway = statField(f, 11) + statField(f, 12)
	}
	if dbPID != 0 {
		r.db = readProcTimes(dbPID)
	}
	return r
}

func (r cpuReading) total() int64 { return r.gateway + r.db.total() }

// percentOfCore is ticks of CPU over d, in % of one core.
func percentOfCore(ticks int64, d time.Duration) float64 {
	return float64(ticks) / clockTicks / d.Seconds() * 100
}

// writeCPUSplit writes where the CPU between a and b went (toolgate, and
// the cluster by process role), in % of one core over d.
func writeCPUSplit(tb testing.TB, file string, a, b cpuReading, d time.Duration) {
	tb.Helper()
	var s strings.Builder
	fmt.Fprintf(&s, "toolgate\t%.2f %%\n", percentOfCore(b.gateway-a.gateway, d))
	if b.db.kids != nil {
		split := b.db.sub(a.db)
		roles := make([]string, 0, len(split))
		for r := range split {
			roles = append(roles, r)
		}
		sort.Strings(roles)
		for _, r := range roles {
			fmt.Fprintf(&s, "postgres %s\t%.2f %%\n", r, percentOfCore(split[r], d))
		}
	}
	if err := os.WriteFile(file, []byte(s.String()), 0o600); err != nil {
		tb.Error(err)
	}
}

// Tail: the work a burst of admissions leaves behind once every call is
// held (gctune returning the burst's free heap, the audit trail chaining
// the admissions, Postgres's autovacuum of the burst's rows).
const (
	// tailQuiet: the tail has ended at the first tailStep in which
	// toolgate and the database together used less than this share of a
	// core (%).
	tailQuiet = 3.0
	tailStep  = 2 * time.Second
	// tailMax bounds the wait; a tail that lasts longer is reported as
	// tailMax and the idle window starts anyway.
	tailMax = 2 * time.Minute
)

// waitTail waits until toolgate and the database are quiet (tailQuiet over
// a tailStep) and returns how long that took and the CPU seconds spent
// meanwhile. TOOLGATE_BENCH_TAIL=0 skips the wait (the idle window then
// starts at once, as before 2026-12-02 later; the tail falls into it).
func waitTail(tb testing.TB, cpu func() cpuReading) (time.Duration, float64) {
	tb.Helper()
	if os.Getenv("TOOLGATE_BENCH_TAIL") == "0" {
		return 0, 0
	}
	start, first := time.Now(), cpu()
	prev := first
	for time.Since(start) < tailMax {
		time.Sleep(tailStep) // a benchmark's sampling interval, not a wait for an event
		now := cpu()
		if percentOfCore(now.total()-prev.total(), tailStep) < tailQuiet {
			return time.Since(start), float64(now.total()-first.total()) / clockTicks
		}
		prev = now
	}
	last := cpu()
	return time.Since(start), float64(last.total()-first.total()) / clockTicks
}

// machineTicks is the whole machine's busy CPU time in clock ticks, from
// the first line of /proc/stat (all but idle and iowait): with the other
// readings it shows what else ran on the shared cores meanwhile.
func machineTicks() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are already in user
			continue
		}
		busy += n
	}
	return busy
}

// approveReading is every process's CPU ticks during approve-all: toolgate
// and its upstream children, the cluster, heldload (the agents), this
// benchmark (the approvers) and the machine.
type approveReading struct {
	gateway, upstream, db, load, bench, machine int64
}

func readApprove(gateway, dbPID int, load *loadProc) approveReading {
	g := readProcTimes(gateway)
	r := approveReading{gateway: g.root, upstream: g.total() - g.root, load: load.cpuTicks(), bench: selfTicks(), machine: machineTicks()}
	if dbPID != 0 {
		r.db = readProcTimes(dbPID).total()
	}
	return r
}
