package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"toolgate/internal/config"
)

func TestCapsFor(t *testing.T) {
	tests := []struct {
		name       string
		listen     config.Listen
		nofile     uint64
		mcp, admin int
		warn       bool
	}{
		{name: "20000", nofile: 20000, mcp: 20000 - 2000 - 1024, admin: 1024},
		{name: "1024", nofile: 1024, mcp: 768 - 96, admin: 96},
		{name: "unknown", nofile: 0, mcp: maxAutoConnsMCP, admin: maxAutoConnsAdm},
		{name: "huge", nofile: 1 << 40, mcp: maxAutoConnsMCP, admin: maxAutoConnsAdm},
		{name: "tiny", nofile: 100, mcp: minAutoConns, admin: minAutoConns, warn: true},
		{name: "explicit", nofile: 20000, listen: config.Listen{MaxConnsMCP: 500, MaxConnsAdmin: 50}, mcp: 500, admin: 50},
		{name: "explicit over the limit", nofile: 4096, listen: config.Listen{MaxConnsMCP: 5000}, mcp: 5000, admin: 460, warn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capsFor(tt.listen, tt.nofile, 0)
			if c.mcp != tt.mcp || c.admin != tt.admin || (c.warning != "") != tt.warn {
				t.Errorf("capsFor = %+v, want mcp %d admin %d warning %v", c, tt.mcp, tt.admin, tt.warn)
			}
			if tt.warn && !strings.Contains(c.warning, "listen.max_conns_mcp ("+strconv.Itoa(tt.mcp)+")") {
				t.Errorf("warning %q does not name the key", c.warning)
			}
		})
	}
}

// TestCapsForMemory checks that a known memory ceiling bounds the derived
// agent cap (a quarter of it at connBytes, 24 KiB, each), never an explicit one
// nor the admin cap, and never raises the descriptors' bound.
func TestCapsForMemory(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name    string
		listen  config.Listen
		nofile  uint64
		mem     int64
		mcp     int
		mcpFrom string
	}{
		{name: "no ceiling", nofile: 1 << 20, mcp: maxAutoConnsMCP, mcpFrom: "nofile"},
		{name: "512 MiB", nofile: 1 << 20, mem: 512 * mib, mcp: 512 * mib / 4 / connBytes, mcpFrom: "memory"},
		{name: "128 MiB", nofile: 1 << 20, mem: 128 * mib, mcp: 1365, mcpFrom: "memory"},
		{name: "tiny", nofile: 1 << 20, mem: 1 * mib, mcp: minAutoConns, mcpFrom: "memory"},
		{name: "descriptors tighter", nofile: 4096, mem: 512 * mib, mcp: 4096 - 409 - 460, mcpFrom: "nofile"},
		{name: "plenty", nofile: 1 << 20, mem: 64 << 30, mcp: maxAutoConnsMCP, mcpFrom: "nofile"},
		{name: "explicit wins", nofile: 1 << 20, mem: 128 * mib, listen: config.Listen{MaxConnsMCP: 20000}, mcp: 20000, mcpFrom: "config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capsFor(tt.listen, tt.nofile, tt.mem)
			if c.mcp != tt.mcp || c.mcpFrom != tt.mcpFrom {
				t.Errorf("capsFor = %+v, want mcp %d from %s", c, tt.mcp, tt.mcpFrom)
			}
			if want := capsFor(tt.listen, tt.nofile, 0).admin; c.admin != want {
				t.Errorf("admin cap %d, want %d as without a ceiling", c.admin, want)
			}
		})
	}
}

func TestReadTimeouts(t *testing.T) {
	if got := readTimeout(10*time.Second, mcpMaxBody); got != 138*time.Second {
		t.Errorf("agent listener read timeout = %v, want 2m18s (10s + 8 MiB at 64 KiB/s)", got)
	}
	if got := adminReadTimeout(10 * time.Second); got != 11*time.Second {
		t.Errorf("admin read timeout = %v, want 11s (10s + 64 KiB at 64 KiB/s)", got)
	}
}

// TestPreflightMemoryCap checks that preflight derives the agent cap from
// the system's memory ceiling (GOMEMLIMIT or the cgroup's memory.max, which
// osSystem reads), and that a configured cap still wins.
func TestPreflightMemoryCap(t *testing.T) {
	for _, tt := range []struct {
		name, extra string
		mcp         int
		from        string
	}{
		{name: "derived", mcp: 128 << 20 / connMemShare / connBytes, from: "memory"},
		{name: "configured", extra: ", max_conns_mcp: 30000", mcp: 30000, from: "config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, "listen: { mcp: 127.0.0.1:0, admin: 127.0.0.1:0"+tt.extra+" }\nstorage: { path: DB }\n"+principals+"policy: { default: allow }\n")
			sys := testSystem(nil)
			sys.nofile, sys.memCeiling = 1<<20, 128<<20
			cfg, err := config.LoadFile(path, sys.lookupEnv)
			if err != nil {
				t.Fatal(err)
			}
			p, err := preflight(cfg, serveFlags{}, sys, sys.files(cfg))
			if err != nil {
				t.Fatalf("preflight: %v", err)
			}
			if p.caps.mcp != tt.mcp || p.caps.mcpFrom != tt.from {
				t.Errorf("caps %+v, want mcp %d from %s", p.caps, tt.mcp, tt.from)
			}
		})
	}
}
