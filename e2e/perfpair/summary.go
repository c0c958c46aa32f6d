package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// summarise writes, per concurrency, a markdown table with one line per
// label (in labels' order): the medians over the rounds of calls/s, p50 and
// server CPU per call, each round's calls/s as a multiple of direct-http's
// in the same round with their median, the median p50 over direct-http's,
// and, for every binary after the first, each round's calls/s and CPU per
// call as a multiple of the first binary's. A round in which a row lacks a
// measurement, or its baseline does, is left out of that row's ratios.
func summarise(w io.Writer, rows []result, labels []string, conc []int) error {
	errs := 0
	for _, r := range rows {
		errs += r.Errors
	}
	if errs > 0 {
		fmt.Fprintf(w, "warning: %d failed calls in the results\n", errs)
	}
	for _, c := range conc {
		byLabel := map[string]map[string]result{}
		var rounds []string
		for _, r := range rows {
			if r.Concurrency != c {
				continue
			}
			if byLabel[r.Label] == nil {
				byLabel[r.Label] = map[string]result{}
			}
			byLabel[r.Label][r.Note] = r
			if !slices.Contains(rounds, r.Note) {
				rounds = append(rounds, r.Note)
			}
		}
		if len(rounds) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nC=%d, %d rounds\n\n", c, len(rounds))
		fmt.Fprintln(w, "| row | calls/s | p50 µs | CPU µs/call | × direct per round | median | p50 over direct | × first binary: calls/s | CPU/call |")
		fmt.Fprintln(w, "|---|--:|--:|--:|---|--:|--:|---|---|")
		direct := byLabel[directLabel]
		var first map[string]result
		for i, l := range labels {
			m := byLabel[l]
			if m == nil {
				continue
			}
			var cps, p50, cpu, x, over, xf, cf []float64
			for _, n := range rounds {
				r, ok := m[n]
				if !ok {
					continue
				}
				cps, p50, cpu = append(cps, r.CallsPerS), append(p50, r.P50us), append(cpu, r.CPUPerCall)
				if d, ok := direct[n]; ok && d.CallsPerS > 0 {
					x = append(x, r.CallsPerS/d.CallsPerS)
					over = append(over, r.P50us-d.P50us)
				}
				if f, ok := first[n]; ok && f.CallsPerS > 0 && f.CPUPerCall > 0 {
					xf = append(xf, r.CallsPerS/f.CallsPerS)
					cf = append(cf, r.CPUPerCall/f.CPUPerCall)
				}
			}
			cmpCalls, cmpCPU := "", ""
			if l != directLabel && first != nil {
				cmpCalls, cmpCPU = ratios(xf), ratios(cf)
			}
			fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %s | %s | %s | %s | %s |\n", l,
				median(cps), median(p50), median(cpu), ratios(x), fmtMedian(x, "%.2f"),
				fmtMedian(over, "%+.0f"), cmpCalls, cmpCPU)
			if l != directLabel && first == nil && i > 0 {
				first = m
			}
		}
		processTable(w, byLabel, labels, rounds)
		shareTable(w, byLabel, labels, rounds)
	}
	return nil
}

// processTable writes the medians over the rounds of the CPU per call of
// each of a row's processes (the first, toolgate or direct-http's
// echoserver; the second, a toolgate's HTTP upstream) and of loadgen itself
// (its own CPU in the measured phase over the calls made). Nothing is
// written when no row has the per-process split.
func processTable(w io.Writer, byLabel map[string]map[string]result, labels, rounds []string) {
	lines := make([]string, 0, len(labels))
	for _, l := range labels {
		var proxy, up, lg []float64
		for _, n := range rounds {
			r, ok := byLabel[l][n]
			if !ok {
				continue
			}
			if len(r.CPUEach) > 0 {
				proxy = append(proxy, r.CPUEach[0])
			}
			if len(r.CPUEach) > 1 {
				up = append(up, r.CPUEach[1])
			}
			if r.Calls > 0 && r.ClientCPU > 0 {
				lg = append(lg, r.ClientCPU*1e6/float64(r.Calls))
			}
		}
		if len(proxy) == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s |", l,
			fmtMedian(proxy, "%.0f"), fmtMedian(up, "%.0f"), fmtMedian(lg, "%.0f")))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nCPU µs per call by process (medians over the rounds)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| row | server (toolgate, or direct's echoserver) | its upstream | loadgen |")
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	for _, s := range lines {
		fmt.Fprintln(w, s)
	}
}

func ratios(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}

func fmtMedian(v []float64, format string) string {
	if len(v) == 0 {
		return ""
	}
	return fmt.Sprintf(format, median(v))
}

// median of v (the mean of the middle two for an even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// shareTable writes the medians over the rounds of each row's first
// process's share of one CPU (toolgate alone, or direct's echoserver) and,
// where measured (-procs), of its time on one P. Nothing is written when
// no row has the shares.
func shareTable(w io.Writer, byLabel map[string]map[string]result, labels, rounds []string) {
	lines := make([]string, 0, len(labels))
	for _, l := range labels {
		var share, oneP []float64
		for _, n := range rounds {
			r, ok := byLabel[l][n]
			if !ok {
				continue
			}
			if len(r.Share) > 0 && r.Share[0] >= 0 {
				share = append(share, r.Share[0])
			}
			if r.OneP != nil {
				oneP = append(oneP, 100**r.OneP)
			}
		}
		if len(share) == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s |", l,
			fmtMedian(share, "%.2f"), ratios(share), fmtMedian(oneP, "%.0f")))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nShare of one CPU of the row's first process over the loadgen run, and time on one P (medians over the rounds)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| row | share of a CPU | per round | one P % |")
	fmt.Fprintln(w, "|---|--:|---|--:|")
	for _, s := range lines {
		fmt.Fprintln(w, s)
	}
}
