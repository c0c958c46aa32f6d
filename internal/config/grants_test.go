package config

import (
	"strings"
	"testing"
	"time"
)

func TestGrantsSection(t *testing.T) {
	if got := Default().Grants.MaxTTL; got != 24*time.Hour {
		t.Errorf("default grants.max_ttl = %s, want 24h", got)
	}
	if cfg := mustLoad(t, "grants: { max_ttl: 90m }\n", nil); cfg.Grants.MaxTTL != 90*time.Minute {
		t.Errorf("grants.max_ttl = %s, want 1h30m", cfg.Grants.MaxTTL)
	}
	for text, want := range map[string]string{
		"grants: { max_ttl: 0s }\n":  "grants.max_ttl 0s: must be positive",
		"grants: { max_ttl: -1h }\n": "grants.max_ttl -1h0m0s: must be positive",
		"grants: { ttl: 1h }\n":      `unknown key "ttl" in grants`,
	} {
		if _, err := load(t, text, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", text, err, want)
		}
	}
}
