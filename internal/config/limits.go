package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits bounds what agents and upstreams may make the gateway hold
// (issue 9, items 10 and 15).
type Limits struct {
	// MaxRequestBytes bounds one agent request: an HTTP body (413 past
	// it) or a --stdio line (a JSON-RPC error past it; the session goes
	// on). Default 8MiB.
	MaxRequestBytes ByteSize `yaml:"max_request_bytes"`
	// MaxResultBytes bounds one message from an upstream: a result over
	// it fails only its own call, with an isError result naming the
	// limit; the shared upstream session survives. Default 64MiB.
	MaxResultBytes ByteSize `yaml:"max_result_bytes"`
	// MaxMCPSessions and MaxMCPSessionsPerPrincipal bound the agents'
	// open MCP sessions (Streamable HTTP) in total and per principal; an
	// initialize past them gets HTTP 503 or 429 and a JSON-RPC error.
	// Defaults 10000 and 100.
	MaxMCPSessions             int `yaml:"max_mcp_sessions"`
	MaxMCPSessionsPerPrincipal int `yaml:"max_mcp_sessions_per_principal"`
	// MCPSessionIdleTimeout closes an agent's MCP session that made no
	// request for this long (a held call keeps it busy). Default 10m.
	MCPSessionIdleTimeout time.Duration `yaml:"mcp_session_idle_timeout"`
	// StdioWriteTimeout bounds each write to the agent of serve --stdio
	// (its stdout): an agent that stops reading ends the session, and so
	// the process, with status 1 and a log line, instead of blocking it
	// for good. Default 30s. At shutdown a write's wait is cut to the
	// shutdown grace (3 s) instead, and the stop is a clean one (tail40).
	StdioWriteTimeout time.Duration `yaml:"stdio_write_timeout"`
}

// Upstreams holds settings shared by every upstream server.
type Upstreams struct {
	// HealthInterval is how often each upstream session is checked with an
	// MCP ping, and the longest wait between reconnect attempts of an
	// upstream that is down. /readyz follows the result. Default 10s.
	HealthInterval time.Duration `yaml:"health_interval"`
}

// Bounds of the limits section.
const (
	minMessageBytes = 1 << 10
	maxMessageBytes = 1 << 30
)

func defaultLimits() Limits {
	return Limits{
		MaxRequestBytes:            8 << 20,
		MaxResultBytes:             64 << 20,
		MaxMCPSessions:             10000,
		MaxMCPSessionsPerPrincipal: 100,
		MCPSessionIdleTimeout:      10 * time.Minute,
		StdioWriteTimeout:          30 * time.Second,
	}
}

func defaultUpstreams() Upstreams { return Upstreams{HealthInterval: 10 * time.Second} }

func (l Limits) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, b := range []struct {
		key string
		v   ByteSize
	}{{"limits.max_request_bytes", l.MaxRequestBytes}, {"limits.max_result_bytes", l.MaxResultBytes}} {
		if b.v < minMessageBytes || b.v > maxMessageBytes {
			add("%s %s: must be from 1KiB to 1GiB", b.key, b.v)
		}
	}
	if l.MaxMCPSessions < 1 {
		add("limits.max_mcp_sessions %d: must be >= 1", l.MaxMCPSessions)
	}
	if l.MaxMCPSessionsPerPrincipal < 1 {
		add("limits.max_mcp_sessions_per_principal %d: must be >= 1", l.MaxMCPSessionsPerPrincipal)
	}
	if l.MCPSessionIdleTimeout < time.Second {
		add("limits.mcp_session_idle_timeout %s: must be at least 1s", l.MCPSessionIdleTimeout)
	}
	if l.StdioWriteTimeout < 100*time.Millisecond {
		add("limits.stdio_write_timeout %s: must be at least 100ms", l.StdioWriteTimeout)
	}
	return errs
}

func (u Upstreams) validate() []error {
	if u.HealthInterval < 10*time.Millisecond {
		return []error{fmt.Errorf("upstreams.health_interval %s: must be at least 10ms", u.HealthInterval)}
	}
	return nil
}

// ByteSize is a number of bytes. In YAML it is an integer (bytes) or a
// number with a unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB
// (powers of 1024), as in 64MiB.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	n      int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"B", 1},
}

// ParseByteSize parses "64MiB", "8 MB", "1048576".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q: want a number of bytes, optionally with a unit (B, KB, MB, GB, KiB, MiB, GiB)", s)
	}
	return ByteSize(n * mult), nil
}

// UnmarshalYAML reads a ByteSize from a scalar. Its error is a
// *lineError naming n's line but not the key, which the node does not
// know: Load's checkShape decodes each ByteSize before go-yaml does and
// puts the key's path after the line (tail40).
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &lineError{line: n.Line, err: errors.New("want a size such as 64MiB")}
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		// shown, not ParseByteSize's whole value: a ${VAR} is expanded
		// by now (see shownMax).
		return &lineError{line: n.Line, err: fmt.Errorf("%s is not a size: want a number of bytes, optionally with a unit (B, KB, MB, GB, KiB, MiB, GiB), such as 64MiB", shown(n.Value))}
	}
	*b = v
	return nil
}

// String writes b with the largest binary unit that divides it.
func (b ByteSize) String() string {
	v := int64(b)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10) + "B"
}
