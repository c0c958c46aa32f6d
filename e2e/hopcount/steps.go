package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// With -steps PROXY,UPSTREAM hopcount times each call at C=1 through a
// proxy and its upstream instead of counting (docs/performance.md,
// http29). A call is, in order: L1 the loadgen's write (its request; the
// system call's entry), A the proxy's first read that returns data after
// it, B the proxy's next write (entry: the request sent on), U1 the
// upstream's next read with data, U2 its next write (entry), C the
// proxy's next read with data (the answer), D its next write (entry: the
// answer sent back), D2 that write's return, L2 the loadgen's next read
// with data. Reads are read and readv; writes write and writev; a splice
// of the full 1 MiB Go asks for (socket → pipe) is a read, any other
// splice a write (Go's io.Copy between sockets: the byte relay of
// e2e/perffloor). recvfrom is not counted: toolgate's liveness peek.
// A call the trace does not hold whole, or longer than 20 ms, is left out.
// The loadgen is the group named "loadgen", or else every process whose
// command starts with "loadgen" (as for the counts).

// stepNames are the marks of a call, in order.
var stepNames = []string{"L1", "A", "B", "U1", "U2", "C", "D", "D2", "L2"}

// stepTimes holds the times (µs) of each kind of mark, in trace order.
type stepTimes struct {
	lgWrite, lgRead []float64 // L1, L2
	pxRead, pxWrite []float64 // A and C; B and D
	pxWrote         []float64 // D2: a proxy write's return
	upRead, upWrite []float64 // U1, U2
}

type stepPending struct {
	nr   int
	args []string
	us   float64
}

// kind says whether system call nr with args moves data in ("in"), out
// ("out") or neither ("").
func kind(nr int, args []string) string {
	switch nr {
	case 0, 19: // read, readv
		return "in"
	case 1, 20: // write, writev
		return "out"
	case 275: // splice
		if len(args) > 4 {
			if n, err := strconv.ParseUint(args[4], 16, 64); err == nil && n == 1<<20 {
				return "in"
			}
		}
		return "out"
	}
	return ""
}

func runSteps(r io.Reader, out io.Writer, groups map[int]string, names string) error {
	proxy, upstream, ok := strings.Cut(names, ",")
	if !ok || proxy == "" || upstream == "" {
		return errors.New("-steps wants PROXY,UPSTREAM: two -group names")
	}
	var st stepTimes
	pend := map[int]stepPending{}
	named := false // a group named loadgen: no process is in it by its command
	for _, g := range groups {
		named = named || g == "loadgen"
	}
	group := func(e event) string {
		if g, ok := groups[e.pid]; ok {
			return g
		}
		if !named && strings.HasPrefix(e.comm, "loadgen") {
			return "loadgen"
		}
		return ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		e, ok := parseEvent(sc.Text())
		if !ok || e.us == 0 {
			continue
		}
		g := group(e)
		if g != "loadgen" && g != proxy && g != upstream {
			continue
		}
		switch e.name {
		case "raw_syscalls:sys_enter":
			nr, args, ok := syscallArgs(e.trace)
			if !ok {
				continue
			}
			pend[e.tid] = stepPending{nr: nr, args: args, us: e.us}
			if kind(nr, args) == "out" {
				switch g {
				case "loadgen":
					st.lgWrite = append(st.lgWrite, e.us)
				case proxy:
					st.pxWrite = append(st.pxWrite, e.us)
				case upstream:
					st.upWrite = append(st.upWrite, e.us)
				}
			}
		case "raw_syscalls:sys_exit":
			p, ok := pend[e.tid]
			if !ok {
				continue
			}
			delete(pend, e.tid)
			_, ret, _ := strings.Cut(e.trace, "= ")
			n, err := strconv.ParseInt(strings.TrimSpace(ret), 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			switch k := kind(p.nr, p.args); {
			case k == "in" && g == "loadgen":
				st.lgRead = append(st.lgRead, e.us)
			case k == "in" && g == proxy:
				st.pxRead = append(st.pxRead, e.us)
			case k == "in" && g == upstream:
				st.upRead = append(st.upRead, e.us)
			case k == "out" && g == proxy:
				st.pxWrote = append(st.pxWrote, e.us)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	calls := st.calls()
	if len(calls) == 0 {
		return errors.New("no whole call in the trace (are the groups and the loadgen in it?)")
	}
	reportSteps(out, calls)
	return nil
}

// after returns the first time in ts later than t.
func after(ts []float64, t float64) (float64, bool) {
	i := sort.SearchFloat64s(ts, t)
	for i < len(ts) && ts[i] <= t {
		i++
	}
	if i == len(ts) {
		return 0, false
	}
	return ts[i], true
}

// calls returns each whole call's marks (stepNames' order).
func (st *stepTimes) calls() [][]float64 {
	for _, ts := range [][]float64{st.lgWrite, st.lgRead, st.pxRead, st.pxWrite, st.pxWrote, st.upRead, st.upWrite} {
		slices.Sort(ts)
	}
	seq := [][]float64{st.pxRead, st.pxWrite, st.upRead, st.upWrite, st.pxRead, st.pxWrite, st.pxWrote, st.lgRead}
	var out [][]float64
	end := 0.0
	for _, l1 := range st.lgWrite {
		if l1 < end {
			continue // a write of the call before (its request's second write)
		}
		marks := []float64{l1}
		for i, ts := range seq {
			t, ok := after(ts, marks[len(marks)-1])
			if !ok {
				return out
			}
			if i == 0 {
				// The request is the loadgen's last write before the
				// proxy read it (one that reached no proxy is not a call).
				marks[0] = st.lgWrite[sort.SearchFloat64s(st.lgWrite, t)-1]
			}
			marks = append(marks, t)
		}
		end = marks[len(marks)-1]
		if end-l1 <= 20000 {
			out = append(out, marks)
		}
	}
	return out
}

func reportSteps(w io.Writer, calls [][]float64) {
	fmt.Fprintf(w, "calls: %d (whole, under 20 ms)\n", len(calls))
	fmt.Fprintln(w, "| step | p50 µs | mean µs | p90 µs |")
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	row := func(name string, d []float64) {
		slices.Sort(d)
		var sum float64
		for _, v := range d {
			sum += v
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f |\n", name, d[len(d)/2], sum/float64(len(d)), d[len(d)*9/10])
	}
	for i := 1; i < len(stepNames); i++ {
		d := make([]float64, len(calls))
		for j, c := range calls {
			d[j] = c[i] - c[i-1]
		}
		row(stepNames[i-1]+" → "+stepNames[i], d)
	}
	d := make([]float64, len(calls))
	for j, c := range calls {
		d[j] = c[len(c)-1] - c[0]
	}
	row("L1 → L2 (the call)", d)
}
