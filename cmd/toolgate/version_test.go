package main

import (
	"runtime/debug"
	"testing"
)

// A build without -ldflags says what the Go toolchain stamped into it
// (the module's version, the commit), not "dev" (newuser4); a version
// linked in with -ldflags wins.
func TestVersionOf(t *testing.T) {
	stamped := &debug.BuildInfo{
		Main: debug.Module{Path: "toolgate", Version: "v0.0.0-20261203101500-7e8d83f0aa11+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "7e8d83f0aa11bb22cc33dd44ee55ff6677889900"},
			{Key: "vcs.time", Value: "2026-12-03T10:15:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	released := &debug.BuildInfo{Main: debug.Module{Path: "toolgate", Version: "v1.4.0"}}
	devel := &debug.BuildInfo{Main: debug.Module{Path: "toolgate", Version: "(devel)"}}
	tests := []struct {
		name   string
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		{"go install from a checkout", "", stamped,
			"v0.0.0-20261203101500-7e8d83f0aa11+dirty (revision 7e8d83f0aa11bb22cc33dd44ee55ff6677889900, 2026-12-03T10:15:00Z, modified)"},
		{"go install module@version", "", released, "v1.4.0"},
		{"ldflags win", "v2.0.0", stamped, "v2.0.0 (revision 7e8d83f0aa11bb22cc33dd44ee55ff6677889900, 2026-12-03T10:15:00Z, modified)"},
		{"ldflags without build info", "v2.0.0", nil, "v2.0.0"},
		{"devel build", "", devel, "dev"},
		{"no build info", "", nil, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := versionOf(tt.linked, func() (*debug.BuildInfo, bool) { return tt.info, tt.info != nil })
			if got.String() != tt.want {
				t.Errorf("version %q, want %q", got.String(), tt.want)
			}
		})
	}
}
