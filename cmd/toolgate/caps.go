package main

import (
	"fmt"
	"time"

	"toolgate/internal/api"
	"toolgate/internal/config"
)

// Automatic connection caps (listen.max_conns_mcp and max_conns_admin left
// at 0): a reserve of descriptors stays free for the store, upstream pipes,
// logs and files (a tenth of the limit, at least 256); the admin listener
// gets an eighth of the rest, at most 1024; the agent listener the rest, at
// most 32768 (each open connection also costs memory). A descriptor limit
// that is unknown or above 2^20 counts as 2^20. When a memory ceiling is
// known (GOMEMLIMIT, the cgroup's memory.max: gctune.MemoryCeiling), the
// agent listener's cap is also at most what connections without a request
// fill a quarter of it with (connMemShare, connBytes).
const (
	minReserve       = 256
	maxAutoConnsMCP  = 32768
	maxAutoConnsAdm  = 1024
	minAutoConns     = 16
	assumedMaxNofile = 1 << 20
	// connBytes is what an open agent connection without a request is
	// taken to cost in memory, in bytes: that of the costliest kind, one
	// idle after a keep-alive request (net/http's 4 KiB bufio reader and
	// writer, its 8 KiB goroutine stack, ≈ 21 KB of RSS; a silent one
	// ≈ 9 KB, one that sent a byte ≈ 12 KB: docs/performance.md,
	// "conn39"), rounded up.
	connBytes = 24 << 10
	// connMemShare: the derived agent cap's connections take at most
	// 1/connMemShare of the memory ceiling, the rest staying for held
	// calls, the store and the collector's headroom.
	connMemShare = 4
)

// minBodyRate is the slowest body upload a listener waits for: a request's
// body must arrive within the read-header timeout plus its size limit at
// this rate (64 KiB/s), e.g. 10s + 8 MiB / 64 KiB/s = 2m18s on /mcp.
const minBodyRate = 64 << 10

// mcpMaxBody is the default largest agent request body, in bytes
// (limits.max_request_bytes; the gateway answers 413 above it).
const mcpMaxBody = 8 << 20

// connCaps are the connection caps of the two listeners.
type connCaps struct {
	mcp, admin int
	// mcpFrom says where mcp came from: "config" (listen.max_conns_mcp),
	// "nofile" (the descriptor limit) or "memory" (the memory ceiling,
	// which bounded it below what the descriptors allow).
	mcpFrom string
	// warning, when not empty, says that configured caps exceed the
	// descriptor limit.
	warning string
}

// capsFor returns the caps for listen given the soft descriptor limit
// nofile (0 when unknown) and the memory ceiling memCeiling in bytes (0
// when unknown), as the constants above describe. An explicit cap wins.
func capsFor(listen config.Listen, nofile uint64, memCeiling int64) connCaps {
	limit := assumedMaxNofile
	if nofile > 0 && nofile < assumedMaxNofile {
		limit = int(nofile)
	}
	budget := max(0, limit-max(minReserve, limit/10))
	c := connCaps{mcp: listen.MaxConnsMCP, admin: listen.MaxConnsAdmin, mcpFrom: "config"}
	if c.admin == 0 {
		c.admin = max(minAutoConns, min(maxAutoConnsAdm, budget/8))
	}
	if c.mcp == 0 {
		c.mcp, c.mcpFrom = max(minAutoConns, min(maxAutoConnsMCP, budget-c.admin)), "nofile"
		if m := memConns(memCeiling); m > 0 && m < c.mcp {
			c.mcp, c.mcpFrom = m, "memory"
		}
	}
	if nofile > 0 && nofile < assumedMaxNofile && c.mcp+c.admin+minReserve > limit {
		c.warning = fmt.Sprintf("listen.max_conns_mcp (%d) + listen.max_conns_admin (%d) + %d for the rest exceed the file descriptor limit %d: a flood of connections can exhaust descriptors; lower them or raise the limit (LimitNOFILE=)",
			c.mcp, c.admin, minReserve, limit)
	}
	return c
}

// memConns is the most agent connections without a request that take at
// most 1/connMemShare of memCeiling bytes, at least minAutoConns; 0 when
// memCeiling is unknown (0 or less).
func memConns(memCeiling int64) int {
	if memCeiling <= 0 {
		return 0
	}
	return int(max(minAutoConns, min(maxAutoConnsMCP, memCeiling/connMemShare/connBytes)))
}

// readTimeout is the body-read timeout of a listener whose requests carry
// at most maxBody bytes (see minBodyRate).
func readTimeout(readHeader time.Duration, maxBody int64) time.Duration {
	return readHeader + time.Duration(maxBody)*time.Second/minBodyRate
}

// adminReadTimeout is the body-read timeout of the admin listener.
func adminReadTimeout(readHeader time.Duration) time.Duration {
	return readTimeout(readHeader, api.MaxBodyBytes)
}
