package execpages

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// quietProcess is a process for WhenQuiet: its requests seen, its CPU
// time (and whether reading it fails) and the releases WhenQuiet made,
// each an atomic the test changes or reads between synctest.Wait calls.
type quietProcess struct {
	seen     atomic.Uint64
	cpu      atomic.Int64 // ns
	cpuFails atomic.Bool
	releases atomic.Int64
}

func (p *quietProcess) activity() Activity {
	return Activity{
		Seen: p.seen.Load,
		CPU: func() (time.Duration, error) {
			if p.cpuFails.Load() {
				return 0, errors.New("getrusage: no reading")
			}
			return time.Duration(p.cpu.Load()), nil
		},
	}
}

// start runs WhenQuiet on p until the test ends, first after first.
func (p *quietProcess) start(t *testing.T, first time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		WhenQuiet(ctx, first, p.activity(), func() { p.releases.Add(1) })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// after sleeps d and waits for WhenQuiet to settle, then checks the
// releases so far.
func (p *quietProcess) after(t *testing.T, d time.Duration, want int64, why string) {
	t.Helper()
	time.Sleep(d)
	synctest.Wait()
	if got := p.releases.Load(); got != want {
		t.Fatalf("%s: %d releases, want %d", why, got, want)
	}
}

// TestWhenQuietReleasesOncePerQuietPeriod: one release at the start-up's
// tail; none on a process that stays idle (nothing to give back); one
// QuietAfter after the last request; none while requests come, however
// long; then one again QuietAfter after they stop.
func TestWhenQuietReleasesOncePerQuietPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &quietProcess{}
		p.start(t, StartupTail)
		p.after(t, StartupTail-time.Millisecond, 0, "before the start-up's tail")
		p.after(t, time.Millisecond, 1, "at the start-up's tail")
		p.after(t, 10*QuietAfter, 1, "idle since start-up")

		p.seen.Add(1) // one call
		p.after(t, QuietLook, 1, "at the look that saw the call")
		p.after(t, QuietAfter-QuietLook, 1, "QuietAfter less one look after the call's look")
		p.after(t, QuietLook, 2, "QuietAfter after the call's look")
		p.after(t, 10*QuietAfter, 2, "idle after the quiet release")

		// A call every QuietLook for ten quiet periods: busy throughout.
		for range 10 * QuietAfter / QuietLook {
			p.seen.Add(1)
			p.after(t, QuietLook, 2, "while calls come")
		}
		p.after(t, QuietAfter, 3, "QuietAfter after the last call")
	})
}

// TestWhenQuietWaitsOutBusyCPU: a process that sees no request but uses
// more than QuietCPU of a CPU (approving held calls, a burst of work no
// request counts) is busy: released QuietAfter after the work stops, not
// during it; CPU under QuietCPU (the idle loops) is quiet.
func TestWhenQuietWaitsOutBusyCPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &quietProcess{}
		p.start(t, StartupTail)
		p.after(t, StartupTail, 1, "at the start-up's tail")
		busy := time.Duration(2 * QuietCPU * float64(QuietLook))
		idle := time.Duration(QuietCPU * float64(QuietLook) / 2)
		for range 20 {
			p.cpu.Add(int64(busy))
			p.after(t, QuietLook, 1, "while the process is busy")
		}
		for range QuietAfter/QuietLook - 1 {
			p.cpu.Add(int64(idle))
			p.after(t, QuietLook, 1, "after the work, less than QuietAfter")
		}
		p.cpu.Add(int64(idle))
		p.after(t, QuietLook, 2, "QuietAfter after the work")
	})
}

// TestWhenQuietCPUFails: a look whose CPU reading failed, and the first
// look after one, are busy (what the process used is not known), not
// quiet: after a call, no release while the readings fail, however long,
// and one QuietAfter after the first look that could measure again;
// readings that fail while the process is idle make it busy the same way
// (one release after they come back). Before, a failed reading was zero
// CPU: the busy process was released QuietAfter after its call.
func TestWhenQuietCPUFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &quietProcess{}
		p.start(t, StartupTail)
		p.after(t, StartupTail, 1, "at the start-up's tail")

		p.seen.Add(1) // one call, then the readings fail
		p.cpuFails.Store(true)
		p.after(t, QuietLook, 1, "at the look that saw the call")
		p.after(t, 10*QuietAfter, 1, "while the readings fail")
		p.cpuFails.Store(false)
		p.after(t, QuietLook, 1, "the first reading back (nothing to measure from)")
		p.after(t, QuietAfter-QuietLook, 1, "QuietAfter less one look after it")
		p.after(t, QuietLook, 2, "QuietAfter after the first look that measured")

		p.cpuFails.Store(true) // idle, but not known to be
		p.after(t, 3*QuietLook, 2, "failed readings while idle")
		p.cpuFails.Store(false)
		p.after(t, QuietAfter, 2, "QuietAfter after the readings came back (the first look measures from nothing)")
		p.after(t, QuietLook, 3, "QuietAfter after the first look that measured")
		p.after(t, 10*QuietAfter, 3, "idle, measured")
	})
}

// TestWhenQuietStopsWithContext: WhenQuiet returns when ctx ends, before
// its first release or after it, without releasing.
func TestWhenQuietStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, wait := range []time.Duration{time.Second, StartupTail + 3*QuietAfter} {
			var releases atomic.Int64
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				WhenQuiet(ctx, StartupTail, Activity{}, func() { releases.Add(1) })
				close(done)
			}()
			time.Sleep(wait)
			synctest.Wait()
			select {
			case <-done:
				t.Fatal("WhenQuiet returned before ctx ended")
			default:
			}
			n := releases.Load()
			cancel()
			<-done
			if releases.Load() != n {
				t.Fatal("WhenQuiet released after ctx ended")
			}
		}
	})
}
