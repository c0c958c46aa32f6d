package config

import (
	"strings"
	"testing"
	"time"
)

func TestLimitsAndUpstreams(t *testing.T) {
	cfg := mustLoad(t, valid+`
limits:
  max_request_bytes: 1MB
  max_result_bytes: 64MiB
  max_mcp_sessions: 500
  max_mcp_sessions_per_principal: 5
  mcp_session_idle_timeout: 2m
  stdio_write_timeout: 5s
upstreams: { health_interval: 3s }
`, nil)
	want := Limits{MaxRequestBytes: 1000 * 1000, MaxResultBytes: 64 << 20, MaxMCPSessions: 500, MaxMCPSessionsPerPrincipal: 5, MCPSessionIdleTimeout: 2 * time.Minute, StdioWriteTimeout: 5 * time.Second}
	if cfg.Limits != want {
		t.Errorf("limits = %+v, want %+v", cfg.Limits, want)
	}
	if cfg.Upstreams.HealthInterval != 3*time.Second {
		t.Errorf("upstreams.health_interval = %s", cfg.Upstreams.HealthInterval)
	}
	def := Default()
	if def.Limits.MaxRequestBytes != 8<<20 || def.Limits.MaxResultBytes != 64<<20 || def.Limits.MCPSessionIdleTimeout != 10*time.Minute || def.Limits.StdioWriteTimeout != 30*time.Second ||
		def.Limits.MaxMCPSessions != 10000 || def.Limits.MaxMCPSessionsPerPrincipal != 100 || def.Upstreams.HealthInterval != 10*time.Second {
		t.Errorf("defaults: %+v %+v", def.Limits, def.Upstreams)
	}
}

func TestServerRequired(t *testing.T) {
	cfg := mustLoad(t, edit(t, `pay: { url: "https://pay.example/mcp", headers: { Authorization: x } }`,
		`pay: { url: "https://pay.example/mcp", headers: { Authorization: x }, required: false }`), nil)
	if cfg.Servers["pay"].IsRequired() || !cfg.Servers["fs"].IsRequired() {
		t.Errorf("required: pay %v, fs %v; want false, true", cfg.Servers["pay"].IsRequired(), cfg.Servers["fs"].IsRequired())
	}
}

func TestLimitsInvalid(t *testing.T) {
	_, err := Load(strings.NewReader(valid+`
limits:
  max_request_bytes: 10
  max_result_bytes: 2GiB
  max_mcp_sessions: 0
  max_mcp_sessions_per_principal: -1
  mcp_session_idle_timeout: 10ms
  stdio_write_timeout: 1ms
upstreams: { health_interval: 1ms }
`), nil)
	for _, want := range []string{
		"limits.max_request_bytes 10B: must be from 1KiB to 1GiB",
		"limits.max_result_bytes 2GiB: must be from 1KiB to 1GiB",
		"limits.max_mcp_sessions 0: must be >= 1",
		"limits.max_mcp_sessions_per_principal -1: must be >= 1",
		"limits.mcp_session_idle_timeout 10ms: must be at least 1s",
		"limits.stdio_write_timeout 1ms: must be at least 100ms",
		"upstreams.health_interval 1ms: must be at least 10ms",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
	_, err = Load(strings.NewReader(valid+"limits: { max_result_bytes: 64 mebibytes }\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "want a number of bytes") {
		t.Errorf("bad size: %v", err)
	}
	_, err = Load(strings.NewReader(valid+"limits: { max_results: 1 }\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "max_results"`) {
		t.Errorf("unknown key: %v", err)
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"0": 0, "1048576": 1 << 20, "64MiB": 64 << 20, "8 MiB": 8 << 20, "1KB": 1000, "2GiB": 2 << 30, "12B": 12} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "MiB", "9999999999GiB", "1 TB"} {
		if _, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q): no error", in)
		}
	}
}
