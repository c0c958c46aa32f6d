//go:build linux && !race

package rawio_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"toolgate/internal/approval"
	"toolgate/internal/rawio"
)

// BenchmarkTimerLateBehindCPU measures the trade-off in the package doc
// (docs/architecture.md, "Scheduler Ps follow the calls in flight"):
// with every P busy with a CPU-bound goroutine that began right after a
// read, how late do timers fire, when that read was raw (sysmon left
// asleep) and when it was an ordinary one (sysmon woken)?
//
// Per op, another process (this test binary, TestRawioKicker) writes on
// each of procs connections at a moment no timer of this process knows
// of: one byte, and for "hash" a 4 MB JSON argument after it. Each
// connection's goroutine here reads it (through a rawio.Conn when raw,
// else the *net.TCPConn), arms a 5 ms time.AfterFunc (a call's own timer:
// a hold timeout, a heartbeat), works, and answers one byte. The work:
// "compute" computes for RAWIO_BENCH_SPIN (100 ms) with no system call or
// allocation, "allocate" decodes a 1 MB document as long, "hash" runs
// approval.HashDisplayCanonical on the argument (the gate's work on a held
// call's arguments). A ticker of RAWIO_BENCH_TICK (100 ms, procs.Follow's
// look in serve) runs throughout. Reported, in ms: the work's median
// (step-p50), the ticker's worst and 99th-percentile lateness (from the
// time it was due to its receipt), and the 5 ms timers' worst and median
// lateness. RAWIO_BENCH_PREEMPT=1 runs it; not in a race build (whose
// reads are the syscall package's).
func BenchmarkTimerLateBehindCPU(b *testing.B) {
	if os.Getenv("RAWIO_BENCH_PREEMPT") == "" {
		b.Skip("RAWIO_BENCH_PREEMPT=1 runs it (a second per op, needs a quiet P count)")
	}
	spin := 100 * time.Millisecond
	if s := os.Getenv("RAWIO_BENCH_SPIN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		spin = d
	}
	tick := 100 * time.Millisecond
	if s := os.Getenv("RAWIO_BENCH_TICK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		tick = d
	}
	for _, work := range []string{"compute", "allocate", "hash"} {
		for _, procs := range []int{1, 2} {
			for _, raw := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/procs=%d/raw=%v", work, procs, raw), func(b *testing.B) {
					benchLate(b, procs, raw, spin, tick, work)
				})
			}
		}
	}
}

func benchLate(b *testing.B, procs int, raw bool, spin, tick time.Duration, work string) {
	b.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	kicker := exec.Command(os.Args[0], "-test.run=^TestRawioKicker$", "-test.count=1") //nolint:gosec // G702: this test binary, run again
	kicker.Env = append(os.Environ(), "RAWIO_KICK_ADDR="+ln.Addr().String(),
		"RAWIO_KICK_CONNS="+strconv.Itoa(procs), "RAWIO_KICK_ROUNDS="+strconv.Itoa(b.N), "RAWIO_KICK_ARGS="+strconv.FormatBool(work == "hash"))
	kicker.Stderr = os.Stderr
	if err := kicker.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = kicker.Wait() }()
	conns := make([]net.Conn, procs)
	for i := range conns {
		c, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if raw {
			c = rawio.WrapConn(c)
		}
		conns[i] = c
	}

	var (
		mu      sync.Mutex
		ticks   []time.Duration
		afters  []time.Duration
		steps   []time.Duration
		stop    = make(chan struct{})
		tickEnd = make(chan struct{})
	)
	go func() {
		defer close(tickEnd)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case due := <-t.C:
				late := time.Since(due)
				mu.Lock()
				ticks = append(ticks, late)
				mu.Unlock()
			}
		}
	}()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			one := make([]byte, 1)
			var args []byte
			for range b.N {
				if _, err := io.ReadFull(c, one); err != nil {
					b.Error(err)
					return
				}
				if work == "hash" {
					// The argument: 4 bytes of length, then the JSON.
					var n [4]byte
					if _, err := io.ReadFull(c, n[:]); err != nil {
						b.Error(err)
						return
					}
					args = slices.Grow(args[:0], int(binary.BigEndian.Uint32(n[:])))[:binary.BigEndian.Uint32(n[:])]
					if _, err := io.ReadFull(c, args); err != nil {
						b.Error(err)
						return
					}
				}
				armed := time.Now()
				time.AfterFunc(5*time.Millisecond, func() {
					late := time.Since(armed) - 5*time.Millisecond
					mu.Lock()
					afters = append(afters, late)
					mu.Unlock()
				})
				switch work {
				case "allocate":
					burnAllocating(spin)
				case "hash":
					// The gate's work on a held call's argument.
					if _, err := approval.HashDisplayCanonical(args, approval.Redaction{}); err != nil {
						b.Error(err)
						return
					}
				default:
					burn(spin)
				}
				step := time.Since(armed)
				mu.Lock()
				steps = append(steps, step)
				mu.Unlock()
				if _, err := c.Write(one); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(stop)
	<-tickEnd
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(ticks)
	slices.Sort(afters)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	if len(ticks) > 0 {
		b.ReportMetric(ms(ticks[len(ticks)-1]), "tick-late-max-ms")
		b.ReportMetric(ms(ticks[len(ticks)*99/100]), "tick-late-p99-ms")
	}
	if len(steps) > 0 {
		slices.Sort(steps)
		b.ReportMetric(ms(steps[len(steps)/2]), "step-p50-ms")
	}
	if len(afters) > 0 {
		b.ReportMetric(ms(afters[len(afters)-1]), "timer-late-max-ms")
		b.ReportMetric(ms(afters[len(afters)/2]), "timer-late-p50-ms")
	}
}

// burn computes for d: no system call (time.Now is the vDSO's), no
// allocation, so nothing but a preemption stops it.
func burn(d time.Duration) {
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

var sink uint64

// doc is a 1 MB JSON document (a large tool argument) for burnAllocating;
// doc4 one of 4 MB, the argument of "hash".
var doc, doc4 = jsonDoc(1 << 20), jsonDoc(4 << 20)

func jsonDoc(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"item %d","tags":["a","b","c"],"value":%d.5}`, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// burnAllocating decodes doc for d, as a large argument's parse
// allocates: the collections it starts wake sysmon (startTheWorld).
func burnAllocating(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			panic(err)
		}
		sinkAny = v
	}
}

var sinkAny any

// TestRawioKicker is BenchmarkTimerLateBehindCPU's other process: it
// dials RAWIO_KICK_CONNS connections to RAWIO_KICK_ADDR and, per round,
// after 150–250 ms (no timer of the benchmark's process knows when),
// writes one byte on each (raw: no system call of its own wakes anything
// there) and waits for each one's answer.
func TestRawioKicker(t *testing.T) {
	addr := os.Getenv("RAWIO_KICK_ADDR")
	if addr == "" {
		t.Skip("BenchmarkTimerLateBehindCPU's helper process")
	}
	n, _ := strconv.Atoi(os.Getenv("RAWIO_KICK_CONNS"))
	rounds, _ := strconv.Atoi(os.Getenv("RAWIO_KICK_ROUNDS"))
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr) //nolint:gosec // G704: the benchmark's own listener
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	one := []byte{1}
	msg := one
	if os.Getenv("RAWIO_KICK_ARGS") == "true" {
		msg = binary.BigEndian.AppendUint32([]byte{1}, uint32(len(doc4))) //nolint:gosec // 4 MB
		msg = append(msg, doc4...)
	}
	for range rounds {
		time.Sleep(150*time.Millisecond + rand.N(100*time.Millisecond))
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() {
				if _, err := c.Write(msg); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, c := range conns {
			if _, err := c.Read(one); err != nil {
				t.Fatal(err)
			}
		}
	}
}
