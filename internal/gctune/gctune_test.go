package gctune

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

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
			name: "nothing set",
			want: Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimit: 512 << 20, MemoryLimitSource: "default"},
		},
		{
			name:      "a small cgroup lowers the limit",
			cgroupMax: 256 << 20,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimit: 192 << 20, MemoryLimitSource: "default"},
		},
		{
			name:      "a large cgroup keeps the default",
			cgroupMax: 8 << 30,
			want:      Settings{GCPercent: 400, GCPercentSource: "default", MemoryLimit: 512 << 20, MemoryLimitSource: "default"},
		},
		{
			name: "GOGC wins",
			env:  map[string]string{"GOGC": "100"},
			want: Settings{GCPercentSource: "env", MemoryLimit: 512 << 20, MemoryLimitSource: "default"},
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
	if got := debug.SetMemoryLimit(-1); got != s.MemoryLimit || got <= 0 || got > DefaultMemoryLimit {
		t.Errorf("memory limit after Apply = %d, settings %+v", got, s)
	}
}
