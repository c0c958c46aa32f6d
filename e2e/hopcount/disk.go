package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// With -disk PROXY hopcount finds the proxy's disk commits in the trace and
// the calls they overlap (docs/performance.md, spare30). A commit is a run
// of the proxy's pwrite64, fsync and fdatasync calls on one thread, each
// starting within 3 ms of the previous one's return (SQLite's WAL page
// writes and sync); it lasts from the first call's entry to the last
// one's return. A call is the time from one of the loadgen's requests (a
// write of at least -request-bytes, its entry) to the next: at C=1 the
// call and the loadgen's turn-around. A call overlaps a commit when the
// two intervals meet. It prints the commits (per second, page writes each,
// their length and the syncs' length) and the calls that overlap one
// against the others (count, mean, p50, p90, p99).

// diskGap is the longest pause between two disk calls of one commit.
const diskGap = 3000.0 // µs

// A diskCall is one finished pwrite64 (sync false) or fsync/fdatasync.
type diskCall struct {
	tid        int
	start, end float64 // µs
	sync       bool
}

// A commit is a run of disk calls on one thread (see runDisk).
type commit struct {
	tid           int
	start, end    float64
	writes, syncs int
}

func runDisk(r io.Reader, out io.Writer, groups map[int]string, proxy string, minRequest uint64) error {
	named := false
	for _, g := range groups {
		named = named || g == "loadgen"
	}
	isProxy := false
	for _, g := range groups {
		isProxy = isProxy || g == proxy
	}
	if !isProxy {
		return fmt.Errorf("-disk %s: no -group of that name", proxy)
	}
	var requests []float64
	var disk []diskCall
	pend := map[int]stepPending{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		e, ok := parseEvent(sc.Text())
		if !ok || e.us == 0 {
			continue
		}
		g, ok := groups[e.pid]
		if !ok && !named && strings.HasPrefix(e.comm, "loadgen") {
			g = "loadgen"
		}
		switch {
		case g == "loadgen" && e.name == "raw_syscalls:sys_enter":
			nr, args, ok := syscallArgs(e.trace)
			if ok && (nr == 1 || nr == 20) && len(args) > 2 {
				if n, err := strconv.ParseUint(args[2], 16, 64); err == nil && (nr == 20 || n >= minRequest) {
					requests = append(requests, e.us)
				}
			}
		case g == proxy && e.name == "raw_syscalls:sys_enter":
			if nr, args, ok := syscallArgs(e.trace); ok && (nr == 18 || nr == 74 || nr == 75) {
				pend[e.tid] = stepPending{nr: nr, args: args, us: e.us}
			}
		case g == proxy && e.name == "raw_syscalls:sys_exit":
			if p, ok := pend[e.tid]; ok {
				delete(pend, e.tid)
				disk = append(disk, diskCall{tid: e.tid, start: p.us, end: e.us, sync: p.nr != 18})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(requests) < 2 {
		return errors.New("fewer than two requests of the loadgen in the trace")
	}
	commits := commitsOf(disk)
	slices.Sort(requests)
	wall := (requests[len(requests)-1] - requests[0]) / 1e6
	var length, syncLen []float64
	var busy float64
	writes := make([]float64, len(commits))
	for i, c := range commits {
		length = append(length, c.end-c.start)
		busy += c.end - c.start
		writes[i] = float64(c.writes)
	}
	for _, d := range disk {
		if d.sync {
			syncLen = append(syncLen, d.end-d.start)
		}
	}
	fmt.Fprintf(out, "calls: %d in %.2f s; commits: %d (%.1f a second), page writes per commit p50 %.0f; syncs: %d\n",
		len(requests)-1, wall, len(commits), float64(len(commits))/wall, pctl(writes, 0.5), len(syncLen))
	fmt.Fprintf(out, "commit µs p50 / p90 / max %.0f / %.0f / %.0f; sync µs p50 / p90 %.0f / %.0f; commits' share of the time %.1f %%\n",
		pctl(length, 0.5), pctl(length, 0.9), pctl(length, 1), pctl(syncLen, 0.5), pctl(syncLen, 0.9), busy/1e4/wall)
	var over, clear []float64
	j := 0
	for i := 0; i+1 < len(requests); i++ {
		a, b := requests[i], requests[i+1]
		for j < len(commits) && commits[j].end < a {
			j++
		}
		if j < len(commits) && commits[j].start < b {
			over = append(over, b-a)
		} else {
			clear = append(clear, b-a)
		}
	}
	fmt.Fprintln(out, "| calls | n | share | mean µs | p50 µs | p90 µs | p99 µs |")
	fmt.Fprintln(out, "|---|--:|--:|--:|--:|--:|--:|")
	n := float64(len(over) + len(clear))
	for _, row := range []struct {
		name string
		d    []float64
	}{{"overlapping a commit", over}, {"not overlapping", clear}, {"all", append(slices.Clone(over), clear...)}} {
		if len(row.d) == 0 {
			continue
		}
		var sum float64
		for _, v := range row.d {
			sum += v
		}
		fmt.Fprintf(out, "| %s | %d | %.1f %% | %.0f | %.0f | %.0f | %.0f |\n", row.name, len(row.d), float64(len(row.d))/n*100,
			sum/float64(len(row.d)), pctl(row.d, 0.5), pctl(row.d, 0.9), pctl(row.d, 0.99))
	}
	return nil
}

// commitsOf groups disk calls into commits: runs on one thread, each call
// starting within diskGap of the run's last return, in time order.
func commitsOf(disk []diskCall) []commit {
	slices.SortFunc(disk, func(a, b diskCall) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	var out []commit
	open := map[int]int{} // tid → index in out of its last commit
	for _, d := range disk {
		if i, ok := open[d.tid]; ok && d.start-out[i].end < diskGap {
			c := &out[i]
			c.end = max(c.end, d.end)
			if d.sync {
				c.syncs++
			} else {
				c.writes++
			}
			continue
		}
		c := commit{tid: d.tid, start: d.start, end: d.end}
		if d.sync {
			c.syncs = 1
		} else {
			c.writes = 1
		}
		open[d.tid] = len(out)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b commit) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	return out
}

// pctl returns the p-quantile (0..1) of d by the nearest rank below; 0 for
// none. It sorts d.
func pctl(d []float64, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}
