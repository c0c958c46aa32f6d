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
// call as a multiple of the first binary's (the first label that is
// neither direct-http nor one of peers). A round in which a row lacks a
// measurement, or its baseline does, is left out of that row's ratios.
// With peers (labels of peer proxies, also in labels) a third table
// follows the by-process one: each toolgate binary over each peer.
func summarise(w io.Writer, rows []result, labels, peers []string, conc []int) error {
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
			if l != directLabel && first == nil && i > 0 && !slices.Contains(peers, l) {
				first = m
			}
		}
		processTable(w, byLabel, labels, rounds)
		shareTable(w, byLabel, labels, rounds)
		peerTable(w, byLabel, labels, peers, rounds)
	}
	return nil
}

// processTable writes the medians over the rounds of the CPU per call of
// each of a row's processes (the first, toolgate, a peer or direct-http's
// echoserver; the second, a toolgate's or a peer's HTTP upstream) and of loadgen itself
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
	writeTable(w, "CPU µs per call by process (medians over the rounds)", "| row | server (toolgate or peer, or direct's echoserver) | its upstream | loadgen |", "|---|--:|--:|--:|", lines)
}

// peerTable writes, for every toolgate binary (a label that is neither
// direct-http nor a peer) and every peer, one line: the binary's calls/s
// and server CPU per call over the peer's in each round both were
// measured in, with their medians, then the medians of p50 and p99 (µs)
// and of PSS (MB, the process tree at the end of a run), binary / peer.
// Nothing is written without peers.
func peerTable(w io.Writer, byLabel map[string]map[string]result, labels, peers, rounds []string) {
	var lines []string
	for _, p := range peers {
		pm := byLabel[p]
		if pm == nil {
			continue
		}
		for _, l := range labels {
			m := byLabel[l]
			if l == directLabel || slices.Contains(peers, l) || m == nil {
				continue
			}
			var x, cpu, p50, pp50, p99, pp99, pss, ppss []float64
			for _, n := range rounds {
				r, ok1 := m[n]
				q, ok2 := pm[n]
				if !ok1 || !ok2 {
					continue
				}
				p50, pp50 = append(p50, r.P50us), append(pp50, q.P50us)
				p99, pp99 = append(p99, r.P99us), append(pp99, q.P99us)
				if r.PSSTreeKB > 0 && q.PSSTreeKB > 0 {
					pss, ppss = append(pss, r.PSSTreeKB/1024), append(ppss, q.PSSTreeKB/1024)
				}
				if q.CallsPerS > 0 {
					x = append(x, r.CallsPerS/q.CallsPerS)
				}
				if q.CPUPerCall > 0 && r.CPUPerCall > 0 {
					cpu = append(cpu, r.CPUPerCall/q.CPUPerCall)
				}
			}
			if len(p50) == 0 {
				continue
			}
			lines = append(lines, fmt.Sprintf("| %s ÷ %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s |",
				l, p, ratios(x), fmtMedian(x, "%.2f"), ratios(cpu), fmtMedian(cpu, "%.2f"),
				fmtMedian(p50, "%.0f"), fmtMedian(pp50, "%.0f"), fmtMedian(p99, "%.0f"), fmtMedian(pp99, "%.0f"),
				fmtMedian(pss, "%.1f"), fmtMedian(ppss, "%.1f")))
		}
	}
	writeTable(w, "Each binary against the peer, per round", "| binary ÷ peer | calls/s per round | median | CPU/call per round | median | p50 µs | p99 µs | PSS MB |", "|---|---|--:|---|--:|--:|--:|--:|", lines)
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
	writeTable(w, "Share of one CPU of the row's first process over the loadgen run, and time on one P (medians over the rounds)", "| row | share of a CPU | per round | one P % |", "|---|--:|---|--:|", lines)
}

// writeTable writes a Markdown table to w after a blank line and its
// title: the header and alignment rows, then lines (each a row); nothing
// when lines is empty.
func writeTable(w io.Writer, title, header, align string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n\n%s\n%s\n", title, header, align)
	for _, s := range lines {
		fmt.Fprintln(w, s)
	}
}
