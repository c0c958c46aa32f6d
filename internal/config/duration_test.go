package config

import (
	"strings"
	"testing"
	"time"
)

// TestZeroDurationIsAccepted: the reference documents 0 for several
// durations ("0 holds such calls until decided", "0 keeps requests
// forever"), and time.ParseDuration reads "0" as zero, but YAML types a
// bare 0 as an integer, which go-yaml refuses for a time.Duration.
func TestZeroDurationIsAccepted(t *testing.T) {
	cfg := mustLoad(t, `approvals:
  max_hold: 0
retention:
  requests: 0
  events: 0
audit:
  retention: 0
`, nil)
	if cfg.Approvals.MaxHold != 0 || cfg.Retention.Requests != 0 || cfg.Retention.Events != 0 || cfg.Audit.Retention != 0 {
		t.Errorf("max_hold %v, retention.requests %v, retention.events %v, audit.retention %v; want 0 each",
			cfg.Approvals.MaxHold, cfg.Retention.Requests, cfg.Retention.Events, cfg.Audit.Retention)
	}
	if Default().Approvals.MaxHold == 0 {
		t.Fatal("the default max_hold is 0: this test cannot tell 0 from the default")
	}
}

// TestBadDurationNamesTheKey: a duration that does not parse is reported
// once, with its line, the key's path and what to write instead, not as
// go-yaml's "cannot unmarshal !!str into time.Duration".
func TestBadDurationNamesTheKey(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"words", "policy:\n  approval: { timeout: 5 minutes }\n",
			`line 2: policy.approval.timeout: "5 minutes" is not a duration: write a number with a unit (ms, s, m, h), such as 30s, 5m or 1h30m`},
		{"no unit", "servers:\n  fs:\n    command: x\n    call_timeout: 60\n",
			`line 4: servers.fs.call_timeout: 60 has no unit: write a number with a unit (ms, s, m, h), such as 60s`},
		{"rule", "policy:\n  rules:\n    - effect: approve\n      approval: { valid_for: 1.5 }\n",
			`line 4: policy.rules[0].approval.valid_for: 1.5 has no unit: write a number with a unit (ms, s, m, h), such as 1.5s`},
		{"negative number", "approvals:\n  keepalive: -1\n",
			`line 2: approvals.keepalive: -1 has no unit`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.text, nil)
			lines := Lines(err)
			var hits int
			for _, l := range lines {
				if strings.Contains(l, "time.Duration") {
					t.Errorf("go-yaml's message reaches the user: %q", l)
				}
				if strings.Contains(l, c.want) {
					hits++
				}
			}
			if hits != 1 {
				t.Errorf("errors:\n%s\nwant exactly one containing %q", strings.Join(lines, "\n"), c.want)
			}
		})
	}
}

// TestQuotedAndUnitDurationsStillLoad: the usual spellings are unchanged.
func TestQuotedAndUnitDurationsStillLoad(t *testing.T) {
	cfg := mustLoad(t, "approvals:\n  max_hold: \"0\"\n  keepalive: 5s\n  retry_wait: 1m30s\n", nil)
	if cfg.Approvals.MaxHold != 0 || cfg.Approvals.KeepAlive != 5*time.Second || cfg.Approvals.RetryWait != 90*time.Second {
		t.Errorf("got max_hold %v, keepalive %v, retry_wait %v", cfg.Approvals.MaxHold, cfg.Approvals.KeepAlive, cfg.Approvals.RetryWait)
	}
}
