package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What BenchmarkHeldCalls measures of the gate's keep-alive beat
// (docs/performance.md, "The keep-alive beat under 10,000 held calls"),
// with TOOLGATE_BENCH_PROGRESS=1: every call sends a progress token
// (heldload -progress), so the gateway sends each held call a progress
// keep-alive every approvals.keepalive (TOOLGATE_BENCH_KEEPALIVE, else the
// default 15s), all on the gate's one beat. TOOLGATE_BENCH_IDLE sets the
// idle window (default 10s; make it a few intervals long). It reports,
// over the idle window:
//
//   - ka-per-call: keep-alives the agents received, per held call;
//   - ka-gap-p50-s, ka-gap-p99-s: each held call's gaps between
//     keep-alives as the agent saw them, those that end in the window;
//     ka-gap-max-s: the longest of those and of the gaps still open at
//     the window's end;
//   - ka-peak-100ms: the most keep-alives the agents received in any
//     100 ms of the window (all N at once: one burst; N/64 a step of the
//     phased beat);
//   - ka-bursts, ka-burst-ms and ka-burst-max-ms: the bursts of
//     keep-alives (runs of arrivals less than 50 ms apart), and how long,
//     median and longest, a burst took from its first keep-alive to its
//     last as the agents received them.
//
// With or without progress tokens it reports idle-drops (packets dropped
// by the machine's full receive backlogs during the window,
// /proc/net/softnet_stat's 2nd column, every CPU: the machine's counter),
// and with TOOLGATE_BENCH_PROBE=1 idle-probe-p99-ms, idle-probe-max-ms:
// the latency of the admin listener's /healthz, asked every 20 ms through
// the window (how long toolgate keeps a small request waiting while the
// beat's burst runs; the probes' own CPU is in idle-cpu-%). The prober
// reads each answer to its end, so its one connection is reused, as a
// well-behaved client's; TOOLGATE_BENCH_PROBE=newconn closes each body
// unread instead, so every probe is a new TCP connection (what =1 did
// before 2026-12-04, fourth session: rows measured with it compare with
// the earlier sections of docs/performance.md).

// benchKeepAlive is the approvals.keepalive of TOOLGATE_BENCH_KEEPALIVE
// (0: the default).
func benchKeepAlive(tb testing.TB) time.Duration {
	tb.Helper()
	v := os.Getenv("TOOLGATE_BENCH_KEEPALIVE")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("TOOLGATE_BENCH_KEEPALIVE=%q: want a positive duration", v)
	}
	return d
}

// benchIdle is the idle window of TOOLGATE_BENCH_IDLE, else 10s.
func benchIdle(tb testing.TB) time.Duration {
	tb.Helper()
	v := os.Getenv("TOOLGATE_BENCH_IDLE")
	if v == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("TOOLGATE_BENCH_IDLE=%q: want a positive duration", v)
	}
	return d
}

// softnetDrops sums /proc/net/softnet_stat's second column (packets
// dropped because a CPU's receive backlog was full) over the CPUs; -1
// where the file cannot be read.
func softnetDrops() int64 {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return -1
	}
	var sum int64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 16, 64)
		if err != nil {
			return -1
		}
		sum += v
	}
	return sum
}

// benchProbe is TOOLGATE_BENCH_PROBE: "" (no probes), "1" (probes that
// reuse their connection) or "newconn" (a new connection per probe).
func benchProbe(tb testing.TB) string {
	tb.Helper()
	switch v := os.Getenv("TOOLGATE_BENCH_PROBE"); v {
	case "", "1", "newconn":
		return v
	default:
		tb.Fatalf("TOOLGATE_BENCH_PROBE=%q: want 1 or newconn", v)
		return ""
	}
}

// probeLatency asks admin's /healthz every 20 ms until ctx ends and
// returns each answer's latency. It runs on a goroutine of the caller's;
// failed requests, and answers other than 200, are left out. Each answer
// is read to its end, so the transport reuses the connection; with
// newConn each body is closed unread, so every probe opens a new one.
func probeLatency(ctx context.Context, admin string, newConn bool) []time.Duration {
	var out []time.Duration
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/healthz", nil) //nolint:gosec // the benchmark's own gateway (its ready file)
		if err != nil {
			return out
		}
		t0 := time.Now()
		resp, err := client.Do(req) //nolint:gosec // the benchmark's own gateway
		if err != nil {
			continue
		}
		if !newConn {
			_, err = io.Copy(io.Discard, resp.Body)
		}
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			continue
		}
		out = append(out, time.Since(t0))
	}
}

// quantile is the q-quantile of sorted xs (0 when empty).
func quantile[T int64 | time.Duration](xs []T, q float64) T {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

// beatStats is what the agents saw of the keep-alives in [from, to).
type beatStats struct {
	peak                    int // the most arrivals in 100 ms
	perCall                 float64
	gaps                    []time.Duration // sorted: those that end in the window
	open                    time.Duration   // the longest still open at its end
	beats                   int
	spreadMedian, spreadMax time.Duration
}

// readBeatStats reads heldload's -progress file (lines "<i> <unix ns>")
// and measures the keep-alives of n calls in [from, to).
func readBeatStats(tb testing.TB, file string, n int, from, to time.Time) beatStats {
	tb.Helper()
	f, err := os.Open(file) //nolint:gosec // the benchmark's own temporary file
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	last := make([]int64, n) // each call's previous arrival
	lo, hi := from.UnixNano(), to.UnixNano()
	var in []int64
	var gaps []time.Duration
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var i, at int64
		if _, err := fmt.Sscanf(sc.Text(), "%d %d", &i, &at); err != nil || i < 0 || i >= int64(n) {
			tb.Fatalf("progress log line %q", sc.Text())
		}
		if at >= lo && at < hi {
			in = append(in, at)
			if last[i] != 0 {
				gaps = append(gaps, time.Duration(at-last[i]))
			}
		}
		if at < hi {
			last[i] = at
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	var open time.Duration // the longest gap still open at the window's end
	for _, l := range last {
		if l == 0 {
			l = lo // none before or in the window: at least the window
		}
		open = max(open, time.Duration(hi-l))
	}
	slices.Sort(gaps)
	slices.Sort(in)
	var spreads []time.Duration
	for k := 0; k < len(in); {
		j := k
		for j+1 < len(in) && time.Duration(in[j+1]-in[j]) < 50*time.Millisecond {
			j++
		}
		spreads = append(spreads, time.Duration(in[j]-in[k]))
		k = j + 1
	}
	slices.Sort(spreads)
	st := beatStats{perCall: float64(len(in)) / float64(n), gaps: gaps, open: open, beats: len(spreads)}
	for k, j := 0, 0; j < len(in); j++ { // in[k..j]: the arrivals of the 100 ms up to in[j]
		for time.Duration(in[j]-in[k]) >= 100*time.Millisecond {
			k++
		}
		st.peak = max(st.peak, j-k+1)
	}
	if len(spreads) > 0 {
		st.spreadMedian, st.spreadMax = quantile(spreads, 0.5), spreads[len(spreads)-1]
	}
	return st
}

func (st beatStats) report(b *testing.B) {
	b.Helper()
	b.ReportMetric(st.perCall, "ka-per-call")
	b.ReportMetric(quantile(st.gaps, 0.5).Seconds(), "ka-gap-p50-s")
	b.ReportMetric(quantile(st.gaps, 0.99).Seconds(), "ka-gap-p99-s")
	longest := st.open
	if len(st.gaps) > 0 {
		longest = max(longest, st.gaps[len(st.gaps)-1])
	}
	b.ReportMetric(longest.Seconds(), "ka-gap-max-s")
	b.ReportMetric(float64(st.peak), "ka-peak-100ms")
	b.ReportMetric(float64(st.beats), "ka-bursts")
	b.ReportMetric(float64(st.spreadMedian)/float64(time.Millisecond), "ka-burst-ms")
	b.ReportMetric(float64(st.spreadMax)/float64(time.Millisecond), "ka-burst-max-ms")
}

// reportProbes reports the p99 and the largest /healthz latency.
func reportProbes(b *testing.B, lat []time.Duration) {
	b.Helper()
	slices.Sort(lat)
	b.ReportMetric(float64(quantile(lat, 0.99))/float64(time.Millisecond), "idle-probe-p99-ms")
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)-1])/float64(time.Millisecond), "idle-probe-max-ms")
	}
}
