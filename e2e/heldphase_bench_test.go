package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The phases of BenchmarkHeldCalls whose peak RSS phaseWatch reports, in
// order: the admission (first call sent until all N are pending), held
// (the measurements at "held", the burst's tail and the idle window),
// approve (approve-all: first approval sent until every call returned)
// and after (the result checks, then phaseAfter of quiet).
var heldPhases = []string{"admit", "held", "approve", "after"}

// phaseAfter is how long phaseWatch samples after the last answer.
const phaseAfter = 3 * time.Second

// phaseEvery is how often phaseWatch reads toolgate's /proc status (and,
// at a phase's new highest sample or once a second, its /metrics).
const phaseEvery = 250 * time.Millisecond

// phaseWatch samples toolgate's resident memory through the benchmark and
// keeps each phase's peak. The peak is the kernel's (VmHWM, read at the
// phase's end and reset to the current RSS at its start by writing 5 to
// /proc/<pid>/clear_refs), so no page peak falls between two samples; the
// samples (every phaseEvery) give the moment of the peak and, at each new
// highest sample of a phase, toolgate's runtime as its /metrics says
// (heap in use, free heap not returned, stacks, goroutines), so a phase's
// peak can be taken apart. With TOOLGATE_BENCH_PROFILE it also writes the
// timeline (<driver>-<N>-rss-timeline.tsv, one line a second) and, at each phase's highest
// sample (at most one a second), a heap profile without a collection
// and the goroutines (<driver>-<N>-<phase>-peak-heap.pprof,
// …-peak-goroutine.txt).
type phaseWatch struct {
	pid     int
	admin   string
	profile string // file prefix, or "" without TOOLGATE_BENCH_PROFILE
	start   time.Time
	resetOK bool // clear_refs accepted: the peaks are VmHWM's

	mu     sync.Mutex
	phase  int // index into heldPhases
	peaks  [4]phasePeak
	lines  []string // the timeline, one sample a line
	cancel context.CancelFunc
	done   chan struct{}
}

// phasePeak is one phase's peak: hwm is VmHWM at the phase's end (MB; 0
// when clear_refs was refused), rss the highest sample, at its time since
// the first call and with toolgate's runtime at that sample.
type phasePeak struct {
	hwm, rss float64
	at       time.Duration
	rt       runtimeSample
	profiled time.Time // when the last peak heap profile was taken
}

// runtimeSample is toolgate's runtime from its /metrics (MB, and the
// goroutine count), and its RssAnon and RssFile (MB).
type runtimeSample struct {
	heapInuse, heapAlloc, heapFree, stack, goal, rssAnon, rssFile float64
	goroutines                                                    float64
}

// watchPhases starts the watch in phase "admit" (call it right before
// the first call is sent).
func watchPhases(ctx context.Context, tb testing.TB, pid int, admin, profile string) *phaseWatch {
	tb.Helper()
	ctx, cancel := context.WithCancel(ctx)
	w := &phaseWatch{pid: pid, admin: admin, profile: profile, start: time.Now(), cancel: cancel, done: make(chan struct{})}
	w.resetOK = clearHWM(pid) == nil
	go w.run(ctx)
	return w
}

// next ends the current phase (its VmHWM) and starts the next one.
func (w *phaseWatch) next(tb testing.TB) {
	tb.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resetOK {
		w.peaks[w.phase].hwm = hwmMB(tb, w.pid)
		if err := clearHWM(w.pid); err != nil {
			tb.Fatalf("reset VmHWM: %v", err)
		}
	}
	w.phase++
}

// stop ends the last phase and the sampling.
func (w *phaseWatch) stop(tb testing.TB) {
	tb.Helper()
	w.cancel()
	<-w.done
	if w.resetOK {
		w.peaks[w.phase].hwm = hwmMB(tb, w.pid)
	}
}

// report reports <phase>-peak-MB for each phase (VmHWM; the highest
// sample without clear_refs), run-peak-MB (the highest of them: the
// goal's number), and for each phase its peak sample's time since the
// first call (<phase>-peak-at-s), heap in use, objects in it (allocated:
// live or not yet swept), free heap, GC goal, stacks, goroutines and
// RssFile.
func (w *phaseWatch) report(b *testing.B) {
	b.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	run := 0.0
	for i, name := range heldPhases {
		p := w.peaks[i]
		peak := p.hwm
		if !w.resetOK {
			peak = p.rss
		}
		run = max(run, peak)
		b.ReportMetric(peak, name+"-peak-MB")
		b.ReportMetric(p.at.Seconds(), name+"-peak-at-s")
		b.ReportMetric(p.rt.heapInuse, name+"-peak-heap-inuse-MB")
		b.ReportMetric(p.rt.heapAlloc, name+"-peak-heap-alloc-MB")
		b.ReportMetric(p.rt.heapFree, name+"-peak-heap-free-MB")
		b.ReportMetric(p.rt.goal, name+"-peak-gc-goal-MB")
		b.ReportMetric(p.rt.stack, name+"-peak-stack-MB")
		b.ReportMetric(p.rt.goroutines, name+"-peak-goroutines")
		b.ReportMetric(p.rt.rssFile, name+"-peak-rss-file-MB")
	}
	b.ReportMetric(run, "run-peak-MB")
	if !w.resetOK {
		b.Log("clear_refs refused: the phase peaks are the highest samples (every 250 ms), not VmHWM")
	}
	if w.profile != "" {
		head := "t_s\tphase\trss_MB\theap_inuse_MB\theap_alloc_MB\theap_free_MB\tstack_MB\tgoal_MB\tgoroutines\trss_anon_MB\trss_file_MB\n"
		if err := os.WriteFile(w.profile+"-rss-timeline.tsv", []byte(head+strings.Join(w.lines, "")), 0o600); err != nil {
			b.Error(err)
		}
	}
}

func (w *phaseWatch) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(phaseEvery)
	defer t.Stop()
	lastLine := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rss, anon, file, err := procRSS(w.pid)
		if err != nil {
			return // toolgate ended
		}
		w.mu.Lock()
		phase := w.phase
		p := &w.peaks[phase]
		higher := rss > p.rss
		w.mu.Unlock()
		now := time.Now()
		line := now.Sub(lastLine) >= time.Second
		if !higher && !line {
			continue
		}
		rt, err := readRuntime(ctx, w.admin)
		if err != nil {
			continue
		}
		rt.rssAnon, rt.rssFile = anon, file
		at := now.Sub(w.start)
		w.mu.Lock()
		if higher && phase == w.phase {
			p.rss, p.at, p.rt = rss, at, rt
		}
		if line {
			lastLine = now
			w.lines = append(w.lines, fmt.Sprintf("%.1f\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t%.1f\n",
				at.Seconds(), heldPhases[phase], rss, rt.heapInuse, rt.heapAlloc, rt.heapFree, rt.stack, rt.goal, rt.goroutines, rt.rssAnon, rt.rssFile))
		}
		profileNow := higher && w.profile != "" && now.Sub(p.profiled) >= time.Second
		if profileNow {
			p.profiled = now
		}
		w.mu.Unlock()
		if profileNow {
			prefix := fmt.Sprintf("%s-%s-peak", w.profile, heldPhases[phase])
			saveQuiet(ctx, w.admin, "/debug/pprof/heap", prefix+"-heap.pprof")
			saveQuiet(ctx, w.admin, "/debug/pprof/goroutine?debug=1", prefix+"-goroutine.txt")
		}
	}
}

// clearHWM resets pid's VmHWM to its current RSS (proc(5), clear_refs 5).
func clearHWM(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o600)
}

// procRSS reads pid's VmRSS, RssAnon and RssFile (MB).
func procRSS(pid int) (rss, anon, file float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		for name, dst := range map[string]*float64{"VmRSS:": &rss, "RssAnon:": &anon, "RssFile:": &file} {
			if v, ok := strings.CutPrefix(line, name); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				if err != nil {
					return 0, 0, 0, err
				}
				*dst = kb / 1024
			}
		}
	}
	return rss, anon, file, nil
}

// readRuntime reads toolgate's Go runtime from its /metrics (the
// Prometheus Go collector's go_memstats_* and go_goroutines).
func readRuntime(ctx context.Context, admin string) (runtimeSample, error) {
	status, body, err := adminDo(ctx, http.MethodGet, admin+"/metrics", "", nil)
	if err != nil {
		return runtimeSample{}, err
	}
	if status != http.StatusOK {
		return runtimeSample{}, fmt.Errorf("GET /metrics: %d", status)
	}
	var missing []string
	get := func(name string) float64 {
		i := bytes.Index(body, []byte("\n"+name+" "))
		if i < 0 {
			missing = append(missing, name)
			return 0
		}
		rest := body[i+len(name)+2:]
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[:j]
		}
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
		if err != nil {
			missing = append(missing, name)
		}
		return v
	}
	const mb = 1 << 20
	rt := runtimeSample{
		heapInuse:  get("go_memstats_heap_inuse_bytes") / mb,
		heapAlloc:  get("go_memstats_heap_alloc_bytes") / mb,
		heapFree:   (get("go_memstats_heap_idle_bytes") - get("go_memstats_heap_released_bytes")) / mb,
		stack:      get("go_memstats_stack_inuse_bytes") / mb,
		goal:       get("go_memstats_next_gc_bytes") / mb,
		goroutines: get("go_goroutines"),
	}
	if missing != nil {
		return rt, errors.New("/metrics lacks " + strings.Join(missing, ", "))
	}
	return rt, nil
}

// saveQuiet writes toolgate's profile at path (the heap's: no
// collection) to file, ignoring failures (a sample of the watch, not a
// measurement).
func saveQuiet(ctx context.Context, admin, path, file string) {
	status, body, err := adminDo(ctx, http.MethodGet, admin+path, approverToken, nil)
	if err != nil || status != http.StatusOK {
		return
	}
	_ = os.WriteFile(file, body, 0o600)
}
