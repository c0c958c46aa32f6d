package e2e

import (
	"context"
	"net/http"
	"time"

	"toolgate/e2e/internal/schedmetric"
)

// procsWatch samples toolgate's GOMAXPROCS (go_sched_gomaxprocs_threads on
// its admin listener's /metrics) every procsEvery until stop is called,
// for BenchmarkHeldCalls' approve-all: procs.Follow sets one P when at
// most one MCP POST is in flight and toolgate uses under 0.7 of a CPU,
// and during approve-all the held calls are parked off the front.
type procsWatch struct {
	done       chan struct{}
	cancel     context.CancelFunc
	onP, total int // samples that read 1, samples that read a value
}

const procsEvery = 250 * time.Millisecond

func watchProcs(ctx context.Context, admin string) *procsWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &procsWatch{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		t := time.NewTicker(procsEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			status, body, err := adminDo(ctx, http.MethodGet, admin+"/metrics", "", nil)
			if err != nil || status != http.StatusOK {
				continue
			}
			if p, ok := schedmetric.Gomaxprocs(body); ok {
				w.total++
				if p == 1 {
					w.onP++
				}
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the share of samples (%) that read
// one P; -1 when no sample read a value.
func (w *procsWatch) stop() float64 {
	w.cancel()
	<-w.done
	if w.total == 0 {
		return -1
	}
	return 100 * float64(w.onP) / float64(w.total)
}
