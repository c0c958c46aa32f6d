package gctune

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	tests := []struct {
		name      string
		env       map[string]string
		cgroupMax int64
		want      Settings
	}{
		{
			name: "nothing set: no memory limit",
			want: Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "none"},
		},
		{
			name:      "a cgroup sets the limit to three quarters of it",
			cgroupMax: 256 << 20,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimit: 192 << 20, MemoryLimitSource: "default"},
		},
		{
			name:      "a large cgroup",
			cgroupMax: 8 << 30,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimit: 6 << 30, MemoryLimitSource: "default"},
		},
		{
			name: "GOGC wins",
			env:  map[string]string{"GOGC": "100"},
			want: Settings{GCPercentSource: "env", MemoryLimitSource: "none"},
		},
		{
			name:      "GOMEMLIMIT wins",
			env:       map[string]string{"GOMEMLIMIT": "2GiB"},
			cgroupMax: 256 << 20,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimitSource: "env"},
		},
		{
			name: "both set",
			env:  map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"},
			want: Settings{GCPercentSource: "env", MemoryLimitSource: "env"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Decide(env(tt.env), tt.cgroupMax)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadCgroupMax(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int64{"max\n": 0, "268435456\n": 268435456, "garbage": 0, "0\n": 0} {
		p := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := readCgroupMax(p); got != want {
			t.Errorf("readCgroupMax(%q) = %d, want %d", content, got, want)
		}
	}
	if got := readCgroupMax(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing file: %d", got)
	}
}

// TestApply checks that the defaults reach the runtime when the
// environment sets neither variable.
func TestApply(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	oldPercent := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
	s := Apply(os.Getenv)
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("GC percent after Apply = %d, want %d", got, DefaultGCPercent)
	}
	got := debug.SetMemoryLimit(-1)
	switch s.MemoryLimitSource {
	case "default":
		if got != s.MemoryLimit || got <= 0 {
			t.Errorf("memory limit after Apply = %d, settings %+v", got, s)
		}
	case "none":
		if got != math.MaxInt64 {
			t.Errorf("memory limit after Apply = %d, want none (settings %+v)", got, s)
		}
	default:
		t.Errorf("memory limit source %q with GOMEMLIMIT unset", s.MemoryLimitSource)
	}
}

func TestPercentFor(t *testing.T) {
	for live, want := range map[uint64]int{
		0:         400, // before the first collection
		1 << 20:   400,
		16 << 20:  400,
		32 << 20:  200,
		64 << 20:  100,
		512 << 20: 100, // never below Go's default
	} {
		if got := PercentFor(live); got != want {
			t.Errorf("PercentFor(%d MiB) = %d, want %d", live>>20, got, want)
		}
	}
}

// TestTune follows a live heap that grows and shrinks: GOGC is set each
// time PercentFor moves, and only then.
func TestTune(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			live atomic.Uint64
			mu   sync.Mutex
			set  []int
		)
		live.Store(4 << 20)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			tune(ctx, Settings{GCPercent: 400, GCPercentSource: "default"}, time.Second,
				func() (uint64, bool) { return live.Load(), true },
				func(p int) { mu.Lock(); set = append(set, p); mu.Unlock() })
		}()
		step := func(l uint64) {
			live.Store(l)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		step(4 << 20)   // 400 already
		step(32 << 20)  // 200
		step(32 << 20)  // unchanged
		step(256 << 20) // 100
		step(2 << 20)   // 400 again
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if want := []int{200, 100, 400}; !slices.Equal(set, want) {
			t.Errorf("GOGC set to %v, want %v", set, want)
		}
	})
}

// TestTuneLeavesGOGCFromTheEnvironment: a GOGC the operator set is never
// changed.
func TestTuneLeavesGOGCFromTheEnvironment(t *testing.T) {
	tune(t.Context(), Settings{GCPercentSource: "env"}, time.Second,
		func() (uint64, bool) { t.Error("read the live heap"); return 0, false },
		func(int) { t.Error("set GOGC") })
}
