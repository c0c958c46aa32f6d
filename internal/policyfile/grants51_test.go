package policyfile

import (
	"strings"
	"testing"
	"time"

	"toolgate/internal/config"
)

// TestReloadAppliesGrantsEnabled (grants51): with Options.Grants, a reload
// hands over the grants section of the file, so grants.enabled: false
// (and back to true) takes effect without a restart, is logged, and is not
// reported as a key waiting for a restart; grants.max_ttl still is. On
// a2628f8c a reload applied only the policy and warned "keys=grants".
func TestReloadAppliesGrantsEnabled(t *testing.T) {
	var got []config.Grants
	f := setup(t, allowEcho, &Options{Grants: func(g config.Grants) { got = append(got, g) }})
	f.write(t, allowEcho+"grants: { enabled: false }\n")
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Enabled {
		t.Fatalf("grants handed over = %+v, want one with enabled false", got)
	}
	log := f.log.String()
	if strings.Contains(log, "restart") || !strings.Contains(log, "grants.enabled reloaded") || !strings.Contains(log, "enabled=false") {
		t.Errorf("after turning grants off, the log:\n%s\nwant grants.enabled reloaded enabled=false and no restart warning", log)
	}

	f.write(t, allowEcho+"grants: { enabled: true, max_ttl: 2h }\n")
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[1].Enabled || got[1].MaxTTL != 2*time.Hour {
		t.Fatalf("grants handed over = %+v, want a second with enabled true", got)
	}
	if log := f.log.String(); !strings.Contains(log, "enabled=true") || !strings.Contains(log, "keys=grants") {
		t.Errorf("after turning grants on with another max_ttl, the log:\n%s\nwant enabled=true and a restart warning naming grants (max_ttl)", log)
	}

	// A refused reload hands nothing over.
	f.write(t, allowEcho+"grants: { enabled: false, max_ttl: -1h }\n")
	if err := f.r.Reload(t.Context()); err == nil {
		t.Fatal("reload of an invalid grants section: nil error")
	}
	if len(got) != 2 {
		t.Errorf("a refused reload handed over %+v", got[2:])
	}
}

// TestReloadWithoutGrantsStillWarns: without Options.Grants (nothing
// applies it) a changed grants.enabled is a key waiting for a restart.
func TestReloadWithoutGrantsStillWarns(t *testing.T) {
	f := setup(t, allowEcho, nil)
	f.write(t, allowEcho+"grants: { enabled: false }\n")
	if err := f.r.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if log := f.log.String(); !strings.Contains(log, "take effect only after a restart") || !strings.Contains(log, "keys=grants") {
		t.Errorf("log:\n%s\nwant a restart warning naming grants", log)
	}
}
