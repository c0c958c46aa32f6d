package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"toolgate/e2e/internal/schedmetric"
)

// onePEvery is how often -procs reads a toolgate's number of Ps.
const onePEvery = 100 * time.Millisecond

// onePWatch samples a toolgate's number of Ps (go_sched_gomaxprocs_threads
// on its admin listener's /metrics) every onePEvery, for -procs:
// procs.Follow runs toolgate on one P while it is not busy.
type onePWatch struct {
	done       chan struct{}
	cancel     context.CancelFunc
	onP, total int // samples that read 1, samples that read a value
}

// watchOneP starts sampling the toolgate whose admin listener is on
// 127.0.0.1:port, after the first wait has passed (loadgen's warm-up),
// until stop.
func watchOneP(ctx context.Context, port int, wait time.Duration) *onePWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &onePWatch{done: make(chan struct{}), cancel: cancel}
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	go func() {
		defer close(w.done)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		t := time.NewTicker(onePEvery)
		defer t.Stop()
		for {
			if p, ok := readProcs(ctx, url); ok {
				w.total++
				if p == 1 {
					w.onP++
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the share (0–1) of the samples that
// read one P, and how many read a value.
func (w *onePWatch) stop() (share float64, samples int) {
	w.cancel()
	<-w.done
	if w.total == 0 {
		return 0, 0
	}
	return float64(w.onP) / float64(w.total), w.total
}

// readProcs reads go_sched_gomaxprocs_threads from url; false when it
// cannot.
func readProcs(ctx context.Context, url string) (int, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	return schedmetric.Gomaxprocs(body)
}

// userHZ is the unit of /proc/PID/stat's CPU times: clock ticks per
// second, 100 on Linux whatever the kernel's own tick (proc(5)).
const userHZ = 100

// withShares returns loadgen's JSON line with "proc_cpu_share_each" added:
// each of the row's processes' CPU over the loadgen run (before and after
// are cpuSnapshot around it, which took wall) as a share of one CPU, in the
// row's pid order (toolgate alone, without a stdio child, first); and
// with onePSamples > 0, "one_p_share", the share of onePSamples that read
// one P. A process that could not be read gets -1.
func withShares(line []byte, before, after []int64, wall time.Duration, oneP float64, onePSamples int) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("loadgen output: %w", err)
	}
	share := make([]float64, len(before))
	for i := range before {
		share[i] = -1
		if before[i] >= 0 && after[i] >= 0 && wall > 0 {
			share[i] = float64(after[i]-before[i]) / userHZ / wall.Seconds()
		}
	}
	raw, err := json.Marshal(share)
	if err != nil {
		return nil, err
	}
	m["proc_cpu_share_each"] = raw
	if onePSamples > 0 {
		if m["one_p_share"], err = json.Marshal(oneP); err != nil {
			return nil, err
		}
	}
	return json.Marshal(m)
}
